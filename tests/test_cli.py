"""``python -m itemsampling estimate``: intervals that cover the truth, the numbers of the shared
estimators, paired and unpaired comparisons, per-user sample sizes, and a clear error for every
bad file."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from itemsampling.cli import DEFAULT_METHOD, main, read_rank_file
from itemsampling.estimators import estimate_metric
from itemsampling.estimators.bootstrap import bootstrap_models
from itemsampling.mapping import sample_beta_ranks
from itemsampling.metrics import evaluate
from itemsampling.sampling import sample_ranks

SRC = str(Path(__file__).resolve().parents[1] / "src")
N, n = 300, 60


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _estimate_json(path, capsys, *extra):
    code, out, err = _run(["estimate", path, "--n-items", N, "--json", "--quiet", *extra], capsys)
    assert code == 0, err
    return json.loads(out)


def _two_models(tmp_path, a=(0.4, 0.4), M=600, seed=0, users=True, name="ranks.csv"):
    """Two models' sampled ranks for the same M users; model A's global ranks ~ Beta(a[0]), B's ~ Beta(a[1])."""
    frames, truth = [], {}
    for j, (model, aa) in enumerate(zip("AB", a)):
        R = sample_beta_ranks(aa, N, M, rng=np.random.default_rng([seed, j]))
        r = sample_ranks(R, N, n, rng=np.random.default_rng([seed, j, 1]))
        truth[model] = R
        df = pd.DataFrame({"model": model, "rank": r})
        if users:
            df.insert(0, "user", np.arange(M))
        frames.append(df)
    p = tmp_path / name
    pd.concat(frames).to_csv(p, index=False)
    return p, truth


def test_intervals_cover_the_truth(tmp_path, capsys):
    """Files of ranks drawn from a known P(R) (Beta model, TORS Sec. 3.2): the default method's 95%
    intervals cover the users' exact Recall and NDCG in (nearly) every file; at K = 20, above the
    resolution rule (2 N/(n-1) = 10.2), the bootstrap interval widened by MLE's bias margin, informative; at
    K = 10, below it, the row is marked not identified and its interval is the identification bounds."""
    covered, total = 0, 0
    for seed, a in enumerate((0.3, 0.4, 0.5, 0.6)):
        R = sample_beta_ranks(a, N, 600, rng=np.random.default_rng([seed, 0]))
        p = tmp_path / f"ranks{seed}.csv"
        pd.DataFrame({"rank": sample_ranks(R, N, n, rng=np.random.default_rng([seed, 1]))}).to_csv(p, index=False)
        res = _estimate_json(p, capsys, "--sample-size", n, "--metric", "recall", "ndcg", "--k", 10, 20,
                             "--n-boot", 60, "--seed", seed)
        assert res["method"] == DEFAULT_METHOD == "mle"
        assert len(res["estimates"]) == 4 and res["comparisons"] == []
        for row in res["estimates"]:
            exact = evaluate(R, row["metric"], row["k"])
            assert row["identified"] is (row["k"] == 20)
            assert row["interval"] == ("bootstrap+margin" if row["k"] == 20 else "bounds")
            if row["k"] == 20:
                assert row["bias_margin"] >= 0
                assert row["low"] + row["bias_margin"] <= row["estimate"] <= row["high"] - row["bias_margin"]
                assert row["high"] - row["low"] < 0.2  # informative, not a trivially wide interval
            covered += row["low"] <= exact <= row["high"]
            total += 1
    assert covered >= total - 1, f"{covered} of {total} intervals cover the exact metric"


def test_json_matches_the_shared_estimators(tmp_path, capsys):
    """Every number of --json is what bootstrap_models returns for the same ranks and the documented
    seed (top-K metrics: default_rng([seed, 0])), its point estimates those of estimate_metrics."""
    p, truth = _two_models(tmp_path, a=(0.3, 0.6), M=300)
    res = _estimate_json(p, capsys, "--sample-size", n, "--metric", "ndcg", "--k", 5, 10, "--n-boot", 30,
                         "--seed", 7, "--method", "bv", "--gamma", 0.1, "--interval", "bootstrap")
    df = pd.read_csv(p)
    assert res["n_items"] == N and res["sample_size"] == n and res["n_boot"] == 30
    ranks = {m: df.loc[df.model == m, "rank"].to_numpy() for m in "AB"}
    users = {m: df.loc[df.model == m, "user"].astype(str).to_numpy() for m in "AB"}
    shared = bootstrap_models(ranks, N, n, ["ndcg"], [5, 10], "bv", ci=0.95, n_boot=30,
                              rng=np.random.default_rng([7, 0]), users=users, gamma=0.1)
    assert shared.groups == [["A", "B"]]
    for model in "AB":
        r = ranks[model]
        e = shared.estimates[model]["ndcg"]
        raw = [evaluate(r, "ndcg", k, n_items=n) for k in (5, 10)]
        rows = [x for x in res["estimates"] if x["model"] == model]
        assert [x["k"] for x in rows] == [5, 10]
        np.testing.assert_allclose([x["estimate"] for x in rows], e.estimate, rtol=1e-12)
        np.testing.assert_allclose([x["low"] for x in rows], e.low, rtol=1e-12)
        np.testing.assert_allclose([x["high"] for x in rows], e.high, rtol=1e-12)
        np.testing.assert_allclose([x["sampled"] for x in rows], raw, rtol=1e-12)
        assert rows[1]["estimate"] == pytest.approx(estimate_metric(r, N, n, "ndcg", 10, "bv", gamma=0.1), rel=1e-12)
    c = shared.comparisons[("A", "B")]["ndcg"]
    comp = res["comparisons"]
    assert [x["k"] for x in comp] == [5, 10] and all(x["paired"] for x in comp)
    np.testing.assert_allclose([x["difference"] for x in comp], c.difference, rtol=1e-12)
    np.testing.assert_allclose([x["low"] for x in comp], c.low, rtol=1e-12)
    np.testing.assert_allclose([x["high"] for x in comp], c.high, rtol=1e-12)
    # the difference is the difference of the two point estimates
    np.testing.assert_allclose(c.difference, [estimate_metric(ranks["A"], N, n, "ndcg", k, "bv", gamma=0.1)
                                              - estimate_metric(ranks["B"], N, n, "ndcg", k, "bv", gamma=0.1)
                                              for k in (5, 10)], rtol=1e-12)


def test_verdicts(tmp_path, capsys):
    """A model against an identical copy of itself cannot be told apart; a much better model is."""
    R = sample_beta_ranks(0.4, N, 400, rng=1)
    r = sample_ranks(R, N, n, rng=2)
    same = tmp_path / "same.csv"
    pd.DataFrame({"user": np.tile(np.arange(400), 2), "model": np.repeat(["A", "B"], 400),
                  "rank": np.tile(r, 2)}).to_csv(same, index=False)
    res = _estimate_json(same, capsys, "--sample-size", n, "--metric", "recall", "--k", 20, "--n-boot", 30,
                         "--method", "cls")
    (c,) = res["comparisons"]
    assert c["difference"] == 0 and c["verdict"] == "cannot be told apart" and not c["told_apart"]
    far, _ = _two_models(tmp_path, a=(0.2, 1.0), M=400, name="far.csv")
    res = _estimate_json(far, capsys, "--sample-size", n, "--metric", "recall", "--k", 20, "--n-boot", 30,
                         "--method", "cls")
    (c,) = res["comparisons"]
    assert c["told_apart"] and c["low"] > 0 and c["verdict"] == "A > B"
    # the text report says the same
    code, out, _ = _run(["estimate", same, "--n-items", N, "--sample-size", n, "--metric", "recall", "--k", 20,
                         "--n-boot", 30, "--method", "cls", "--quiet"], capsys)
    assert code == 0 and "cannot be told apart" in out and "paired" in out


def test_paired_only_with_the_same_users(tmp_path, capsys):
    """Without a user column, or with different users, the comparison is unpaired and says so."""
    p, _ = _two_models(tmp_path, M=200, users=False)
    res = _estimate_json(p, capsys, "--sample-size", n, "--metric", "recall", "--n-boot", 20, "--method", "cls")
    assert [c["paired"] for c in res["comparisons"]] == [False]
    df = pd.read_csv(_two_models(tmp_path, M=200, name="u.csv")[0])
    df.loc[df.model == "B", "user"] += 1  # one user differs
    df.to_csv(tmp_path / "shifted.csv", index=False)
    res = _estimate_json(tmp_path / "shifted.csv", capsys, "--sample-size", n, "--metric", "recall",
                         "--n-boot", 20, "--method", "cls")
    assert [c["paired"] for c in res["comparisons"]] == [False]
    # rows in any order: users are matched by id, so a shuffled file gives the same numbers
    base = _estimate_json(tmp_path / "u.csv", capsys, "--sample-size", n, "--metric", "recall", "--n-boot", 20,
                          "--method", "cls")
    pd.read_csv(tmp_path / "u.csv").sample(frac=1, random_state=0).to_csv(tmp_path / "shuffled.csv", index=False)
    shuf = _estimate_json(tmp_path / "shuffled.csv", capsys, "--sample-size", n, "--metric", "recall",
                          "--n-boot", 20, "--method", "cls")
    assert shuf["comparisons"][0]["paired"]
    assert shuf["comparisons"][0]["difference"] == pytest.approx(base["comparisons"][0]["difference"], abs=1e-12)


def test_per_user_sample_sizes(tmp_path, capsys):
    """A sample_size column (adaptive sampling) is read per user; mle takes it, bv refuses it."""
    R = sample_beta_ranks(0.4, N, 300, rng=3)
    sizes = np.where(np.arange(300) % 2 == 0, 30, 60)
    r = np.array([sample_ranks([Ru], N, s, rng=np.random.default_rng([4, u]))[0] for u, (Ru, s) in enumerate(zip(R, sizes))])
    p = tmp_path / "adaptive.tsv"
    pd.DataFrame({"rank": r, "sample_size": sizes}).to_csv(p, sep="\t", index=False)
    table = read_rank_file(p, N)
    np.testing.assert_array_equal(table.sizes["model"], sizes)
    res = _estimate_json(p, capsys, "--metric", "recall", "--n-boot", 20)
    assert res["sample_size"] == "per-user"
    assert res["estimates"][0]["sampled"] == pytest.approx(estimate_metric(r, N, sizes, "recall", 10, "sampled"), rel=1e-12)
    assert res["estimates"][0]["estimate"] == pytest.approx(estimate_metric(r, N, sizes, "recall", 10, "mle"), rel=1e-10)
    code, _, err = _run(["estimate", p, "--n-items", N, "--method", "bv"], capsys)
    assert code == 2 and "per-user sample sizes" in err and "mle" in err


def test_parquet_and_column_options(tmp_path, capsys):
    R = sample_beta_ranks(0.4, N, 200, rng=5)
    r = sample_ranks(R, N, n, rng=6)
    pd.DataFrame({"pos": r}).to_parquet(tmp_path / "r.parquet")
    res = _estimate_json(tmp_path / "r.parquet", capsys, "--sample-size", n, "--rank-column", "pos", "--metric",
                         "auc", "--n-boot", 20, "--method", "cls")
    (row,) = res["estimates"]
    assert row["k"] is None and row["estimate"] == pytest.approx(estimate_metric(r, N, n, "auc", None, "cls"))
    assert res["comparisons"] == []
    bad = pd.DataFrame({"rank": [1.0, 2.0, np.nan, 4.0]})
    bad.to_parquet(tmp_path / "bad.parquet")
    code, _, err = _run(["estimate", tmp_path / "bad.parquet", "--n-items", N, "--sample-size", n], capsys)
    assert code == 2 and "bad.parquet, row 3, column 'rank'" in err


BAD_FILES = {
    # name: (content, extra args, expected fragments of the message)
    "empty": ("", [], ["empty.csv: the file is empty"]),
    "header_only": ("rank\n", [], ["no data rows"]),
    "no_rank": ("model,user\na,1\n", [], ["missing column 'rank'"]),
    "no_header": ("3\n4\n", [], ["missing column 'rank'", "needs a header row"]),
    "unknown": ("rank,score\n1,0.5\n", [], ["unknown column(s) ['score']"]),
    "two_rank_columns": ("rank,r\n1,2\n", [], ["all look like the rank column"]),
    "nan": ("rank\n1\nNaN\n", [], ["line 3, column 'rank'", "NaN"]),
    "missing": ("rank,model\n1,a\n,a\n", [], ["line 3, column 'rank'", "missing value"]),
    "blank_line": ("rank\n1\n\n2\n", [], ["line 3, column 'rank'", "missing value"]),
    "text": ("rank\n1\n2\nfirst\n", [], ["line 4, column 'rank'", "'first' is not a number"]),
    "non_integer": ("rank\n1\n2.5\n", [], ["line 3, column 'rank'", "2.5 is not an integer"]),
    "zero": ("rank\n1\n0\n", [], ["line 3, column 'rank'", "out of range", "1..60"]),
    "too_large": ("rank\n1\n61\n", [], ["line 3, column 'rank'", "out of range", "1..60"]),
    "ragged": ("rank,model\n1,a\n2,a,x\n", [], ["line 3", "3 fields where the header has 2"]),
    "no_model_name": ("rank,model\n1,a\n2,\n", [], ["line 3, column 'model'", "missing model name"]),
    "duplicate_user": ("user,rank\nu1,1\nu2,2\nu1,3\n", [], ["line 4, column 'user'", "already appears on line 2"]),
    "size_and_option": ("rank,sample_size\n1,10\n", [], ["--sample-size was given too"]),
    "size_column_range": ("rank,sample_size\n1,10\n1,1\n", ["--no-size"], ["line 3, column 'sample_size'", "2..N"]),
    "size_column_above_N": ("rank,sample_size\n1,10\n1,301\n", ["--no-size"], ["line 3, column 'sample_size'"]),
    "rank_above_own_size": ("rank,sample_size\n1,10\n11,10\n", ["--no-size"],
                            ["line 3, column 'rank'", "1..10 (this row's sample size)"]),
    "no_size": ("rank\n1\n", ["--no-size"], ["--sample-size is required"]),
    "size_above_N": ("rank\n1\n", ["--sample-size", "301"], ["--sample-size must be an integer in 2..300"]),
    "size_one": ("rank\n1\n", ["--sample-size", "1"], ["--sample-size must be an integer in 2..300"]),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files(tmp_path, capsys, case):
    content, extra, fragments = BAD_FILES[case]
    p = tmp_path / f"{case}.csv"
    p.write_text(content)
    size = [] if "--no-size" in extra or "--sample-size" in extra else ["--sample-size", n]
    extra = [x for x in extra if x != "--no-size"]
    code, out, err = _run(["estimate", p, "--n-items", N, *size, *extra, "--quiet"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "Traceback" not in err
    if not any(f.startswith("--") for f in fragments):
        assert str(p) in err
    for f in fragments:
        assert f in err, err


@pytest.mark.parametrize("argv, fragment", [
    (["--n-items", "1", "--sample-size", "2"], "--n-items"),
    (["--n-items", "300", "--sample-size", "60", "--ci", "1.5"], "--ci must be a confidence level in (0, 1)"),
    (["--n-items", "300", "--sample-size", "60", "--n-boot", "1"], "--n-boot must be an integer >= 2"),
    (["--n-items", "300", "--sample-size", "60", "--gamma", "0.1"], "--gamma is used by methods bv"),
    (["--n-items", "300", "--sample-size", "60", "--method", "mes", "--eta", "-1"], "--eta must be a positive"),
    (["--n-items", "300", "--sample-size", "60", "--metric", "foo"], "metric must be one of"),
])
def test_bad_options(tmp_path, capsys, argv, fragment):
    p = tmp_path / "ok.csv"
    p.write_text("rank\n1\n2\n")
    code, out, err = _run(["estimate", p, *argv, "--quiet"], capsys)
    assert code == 2 and fragment in err and "Traceback" not in err


def test_file_level_errors(tmp_path, capsys):
    code, _, err = _run(["estimate", tmp_path / "nope.csv", "--n-items", N, "--sample-size", n], capsys)
    assert code == 2 and "nope.csv: no such file" in err
    (tmp_path / "r.txt").write_text("rank\n1\n")
    code, _, err = _run(["estimate", tmp_path / "r.txt", "--n-items", N, "--sample-size", n], capsys)
    assert code == 2 and "cannot tell the format" in err
    (tmp_path / "x.parquet").write_text("rank\n1\n")
    code, _, err = _run(["estimate", tmp_path / "x.parquet", "--n-items", N, "--sample-size", n], capsys)
    assert code == 2 and "cannot be read as Parquet" in err


def test_module_entry_points(tmp_path):
    """`python -m itemsampling` dispatches estimate / run / data; a bad file gives one error line."""
    env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}
    bad = tmp_path / "bad.csv"
    bad.write_text("rank\n1\nx\n")
    proc = subprocess.run([sys.executable, "-m", "itemsampling", "estimate", str(bad), "--n-items", "10",
                           "--sample-size", "5"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"error: {bad}, line 3, column 'rank': 'x' is not a number (expected an integer sampled rank)"
    proc = subprocess.run([sys.executable, "-m", "itemsampling", "run", "--help"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "python -m itemsampling.run" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "itemsampling", "data", "--help"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "fetch" in proc.stdout


def test_ranks_from_scores():
    """Hand-computed ranks: strictly higher decoys push the target down; ties by the chosen rule."""
    from itemsampling.cli import ranks_from_scores

    t = np.array([0.9, 0.5, 0.5, 0.1])
    d = np.array([[0.1, 0.2, 0.3], [0.6, 0.5, 0.5], [0.4, 0.4, 0.4], [0.2, 0.3, 0.4]])
    np.testing.assert_array_equal(ranks_from_scores(t, d, "optimistic"), [1, 2, 1, 4])
    np.testing.assert_array_equal(ranks_from_scores(t, d, "pessimistic"), [1, 4, 1, 4])
    draws = np.array([ranks_from_scores(t, d, rng=s) for s in range(400)])
    assert set(draws[:, 1]) == {2, 3, 4} and np.all(draws[:, [0, 2, 3]] == [1, 1, 4])
    assert draws[:, 1].mean() == pytest.approx(3.0, abs=0.15)  # uniform on 2..4
    with pytest.raises(ValueError, match="decoy_scores must have shape"):
        ranks_from_scores(t, d[:2])
    with pytest.raises(ValueError, match="ties must be"):
        ranks_from_scores(t, d, ties="mean")
    with pytest.raises(ValueError, match="NaN"):
        ranks_from_scores([np.nan], [[1.0]])


def test_weighted_file(tmp_path, capsys):
    """``estimate --weighted`` on a long file of popularity-weighted decoys: the numbers of
    ``estimate_metric_weighted``, and bad rows refused with the file, line and column."""
    from itemsampling.estimators import estimate_metric_weighted
    from itemsampling.estimators.weighted import draw_weighted_decoys

    rng = np.random.default_rng(0)
    M, NN, d = 400, 120, 15
    w = 1.0 / np.arange(1, NN + 1)
    above = rng.random((M, NN)) < (rng.random((M, 1)) * 0.2) * (w / w.max()) ** 0.5
    excluded = np.zeros((M, NN), dtype=bool)
    excluded[:, NN - 1] = True
    above &= ~excluded
    p, a = draw_weighted_decoys(above, excluded, w, d, rng=1)
    path = tmp_path / "decoys.csv"
    pd.DataFrame({"user": np.repeat(np.arange(M), d), "prob": p.ravel(), "above": a.ravel().astype(int)}).to_csv(
        path, index=False)
    code, out, err = _run(["estimate", path, "--weighted", "--n-items", NN, "--metric", "ndcg", "--k", 10,
                           "--n-boot", 30, "--json", "--quiet"], capsys)
    assert code == 0, err
    res = json.loads(out)
    assert res["models"]["model"]["n_users"] == M and res["models"]["model"]["decoys"] == d
    row = res["estimates"][0]
    assert (row["metric"], row["k"], row["label"]) == ("ndcg", 10, "NDCG@10")
    ref = estimate_metric_weighted(p, a, NN, "ndcg", 10, ci=0.95, n_boot=30, rng=0)
    assert row["estimate"] == pytest.approx(ref.estimate, rel=1e-12)
    assert (row["low"], row["high"]) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert row["sampled"] == pytest.approx(estimate_metric_weighted(p, a, NN, "ndcg", 10, method="sampled"))
    code, out, _ = _run(["estimate", path, "--weighted", "--n-items", NN, "--n-boot", 20, "--quiet"], capsys)
    assert code == 0 and "NDCG@10" in out and "Recall@10" in out
    lines = path.read_text().splitlines()
    for bad, fragment in [(lines[5].rsplit(",", 1)[0] + ",2", "line 6, column 'above'"),
                          ("0,1.5," + lines[5].rsplit(",", 1)[1], "line 6, column 'prob'")]:
        path.write_text("\n".join(lines[:5] + [bad] + lines[6:]) + "\n")
        code, _, err = _run(["estimate", path, "--weighted", "--n-items", NN, "--quiet"], capsys)
        assert code == 2 and str(path) in err and fragment in err
    path.write_text("\n".join(lines[:-1]) + "\n")           # the last user loses a decoy
    code, _, err = _run(["estimate", path, "--weighted", "--n-items", NN, "--quiet"], capsys)
    assert code == 2 and "every user needs the same number of decoys" in err
    code, _, err = _run(["estimate", path, "--weighted", "--n-items", NN, "--sample-size", 16, "--quiet"], capsys)
    assert code == 2 and "--sample-size" in err


def test_estimate_target_test_users(tmp_path):
    """--target test-users: intervals for the test users' own metric (narrower than the population's
    when decoys are drawn without replacement at n close to N); a bad target is refused."""
    import json as _json
    import subprocess as _sp
    import sys as _sys

    import numpy as _np

    g = _np.random.default_rng(0)
    R = g.integers(1, 61, 300)
    from itemsampling.sampling import sample_ranks as _sr

    r = _sr(R, 60, 55, rng=g, replacement=False)
    f = tmp_path / "ranks.csv"
    f.write_text("rank\n" + "\n".join(map(str, r)) + "\n")
    out = {}
    for target in ("population", "test-users"):
        p = _sp.run([_sys.executable, "-m", "itemsampling", "estimate", str(f), "--n-items", "60", "--sample-size",
                     "55", "--metric", "recall", "--k", "10", "--n-boot", "20", "--without-replacement", "--json",
                     "--quiet", "--target", target], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        out[target] = _json.loads(p.stdout)
        assert out[target]["target"] == target
    pop, test = out["population"]["estimates"][0], out["test-users"]["estimates"][0]
    assert pop["estimate"] == test["estimate"]
    assert test["high"] - test["low"] < 0.5 * (pop["high"] - pop["low"])
    p = _sp.run([_sys.executable, "-m", "itemsampling", "estimate", str(f), "--n-items", "60", "--sample-size", "55",
                 "--target", "users"], capture_output=True, text=True)
    assert p.returncode == 2 and "--target" in p.stderr and "test-users" in p.stderr


# --- issue 31, part 2: the weighted path as complete as the uniform one ----------------------------
def _weighted_models(tmp_path, pools=False, third=False):
    """Two models (A better than B) scored on the same 300 users with 15 popularity-weighted decoys
    each, optionally a per-user pool size column and a third model on other users."""
    from itemsampling.candidates import draw_weighted_decoys

    rng = np.random.default_rng(0)
    M, NN, d = 300, 120, 15
    w = 1.0 / np.arange(1, NN + 1)
    frames, data = [], {}
    for i, (m, spread) in enumerate([("A", 0.1), ("B", 0.3)] + ([("C", 0.2)] if third else [])):
        above = rng.random((M, NN)) < (rng.random((M, 1)) * spread) * (w / w.max()) ** 0.5
        excluded = np.zeros((M, NN), dtype=bool)
        excluded[:, NN - 1] = True
        if pools:  # users 0..149 rank among all 120 items, the others lose 19 (training) items from the pool
            excluded[150:, 100:NN - 1] = True
        above &= ~excluded
        p, a = draw_weighted_decoys(above, excluded, w, d, rng=1 + i)
        users = np.arange(M) + (1000 if m == "C" else 0)
        order = rng.permutation(M) if m == "B" else np.arange(M)  # B's rows in another user order
        data[m] = (users, p, a, NN - excluded.sum(axis=1) + 1)
        f = pd.DataFrame({"model": m, "user": np.repeat(users[order], d), "prob": p[order].ravel(),
                          "above": a[order].ravel().astype(int)})
        if pools:
            f["n_items"] = np.repeat(data[m][3][order], d)
        frames.append(f)
    path = tmp_path / "weighted.csv"
    pd.concat(frames).to_csv(path, index=False)
    return path, data, NN


def test_weighted_file_with_models_is_compared_like_the_uniform_path(tmp_path, capsys):
    from itemsampling.estimators.bootstrap import bootstrap_p_value, percentile_interval
    from itemsampling.estimators.weighted import bootstrap_weights, estimate_metric_weighted, weighted_replicates

    from itemsampling.estimators.weighted import weighted_bounds

    path, data, NN = _weighted_models(tmp_path, third=True)
    # the default below the rule: each model's identification bounds, the comparisons their differences
    code, out, err = _run(["estimate", path, "--weighted", "--n-items", NN, "--metric", "ndcg", "--k", 10,
                           "--n-boot", 40, "--seed", 3, "--json", "--quiet"], capsys)
    assert code == 0, err
    kept = json.loads(out)
    bnd = {}
    for m in "ABC":
        _, pm, am, _ = data[m]
        b = weighted_bounds(pm, am, NN, "ndcg", 10, ci=0.95)
        bnd[m] = (b.low["ndcg"], b.high["ndcg"])
        (row,) = [r for r in kept["estimates"] if r["model"] == m]
        assert (row["low"], row["high"]) == bnd[m] and row["interval"] == "bounds" and row["identified"] is False
    for c in kept["comparisons"]:
        a_, b_ = c["model_a"], c["model_b"]
        assert (c["low"], c["high"]) == pytest.approx((bnd[a_][0] - bnd[b_][1], bnd[a_][1] - bnd[b_][0]))
        assert c["interval"] == "bounds" and c["p_value"] is None and c["verdict"] == "not identified (K below the rule)"
    code, out, _ = _run(["estimate", path, "--weighted", "--n-items", NN, "--metric", "ndcg", "--k", 10,
                         "--n-boot", 40, "--seed", 3, "--quiet"], capsys)
    assert "identification bounds" in out and "at least 90%" in out
    # --interval bootstrap: the bootstrap everywhere
    code, out, err = _run(["estimate", path, "--weighted", "--n-items", NN, "--metric", "ndcg", "--k", 10,
                           "--n-boot", 40, "--seed", 3, "--json", "--quiet", "--interval", "bootstrap"], capsys)
    assert code == 0, err
    res = json.loads(out)
    assert list(res["models"]) == ["A", "B", "C"] and res["weighted"] is True
    est = {r["model"]: r for r in res["estimates"]}
    assert est["A"]["estimate"] == {r["model"]: r for r in kept["estimates"]}["A"]["estimate"]
    # model A (the first group of models on the same users) draws its replicates from --seed itself:
    # exactly estimate_metric_weighted's interval
    users, p, a, _ = data["A"]
    ref = estimate_metric_weighted(p, a, NN, "ndcg", 10, ci=0.95, n_boot=40, rng=3, interval="bootstrap")
    assert (est["A"]["estimate"], est["A"]["low"], est["A"]["high"]) == pytest.approx(
        (ref.estimate, ref.low, ref.high), rel=1e-12)
    assert est["A"]["uniform"] == pytest.approx(estimate_metric_weighted(p, a, NN, "ndcg", 10, method="uniform"))
    # A and B share their users (in another row order): one draw, aligned by user id -> paired
    W = bootstrap_weights(300, 40, 3)
    ea, ra = weighted_replicates(p, a, NN, "ndcg", [10], W)
    _, pb, ab, _ = data["B"]
    eb, rb = weighted_replicates(pb, ab, NN, "ndcg", [10], W)  # data["B"] is in user order 0..299, as A
    (ab_row,) = [c for c in res["comparisons"] if (c["model_a"], c["model_b"]) == ("A", "B")]
    lo, hi = percentile_interval(ra[:, 0] - rb[:, 0], 0.95)
    assert ab_row["paired"] is True
    assert ab_row["difference"] == pytest.approx(ea[0] - eb[0], rel=1e-12)
    assert (ab_row["low"], ab_row["high"]) == pytest.approx((lo, hi), rel=1e-12)
    assert ab_row["p_value"] == pytest.approx(bootstrap_p_value(ra[:, 0] - rb[:, 0]))
    assert ab_row["told_apart"] == ((lo > 0 or hi < 0) and ab_row["identified"])
    assert ab_row["verdict"] == "not identified (K below the rule)"  # below the rule, whatever the interval
    # A's targets sit far higher and the interval excludes 0, but K = 10 is below the resolution rule
    # (2 x 120/15 = 16): the comparison is not identified, and the verdict says so instead of "A > B"
    assert lo > 0 and not ab_row["identified"] and ab_row["verdict"] == "not identified (K below the rule)"
    # C was scored on other users: its comparisons are unpaired (independent draws)
    assert [c["paired"] for c in res["comparisons"] if "C" in (c["model_a"], c["model_b"])] == [False, False]
    # the text report: the uniform path's tables, with the uniform-kernel column
    code, out, _ = _run(["estimate", path, "--weighted", "--n-items", NN, "--metric", "ndcg", "--k", 10,
                         "--n-boot", 40, "--seed", 3, "--quiet"], capsys)
    assert code == 0 and "uniform kernel" in out and "Differences A - B" in out
    assert "A  B  NDCG@10" in out and "paired" in out and "unpaired" in out


def test_weighted_and_uniform_json_have_one_schema(tmp_path, capsys):
    path, _, NN = _weighted_models(tmp_path)
    code, out, err = _run(["estimate", path, "--weighted", "--n-items", NN, "--metric", "ndcg", "recall", "--k", 10,
                           "--n-boot", 20, "--json", "--quiet"], capsys)
    assert code == 0, err
    weighted = json.loads(out)
    ranks = tmp_path / "ranks.csv"
    R = np.random.default_rng(0).integers(1, 301, 200)
    pd.DataFrame({"model": np.repeat(["A", "B"], 100), "user": np.tile(np.arange(100), 2),
                  "rank": sample_ranks(R, 300, 60, rng=1)}).to_csv(ranks, index=False)
    code, out, err = _run(["estimate", ranks, "--n-items", 300, "--sample-size", 60, "--metric", "ndcg", "recall",
                           "--k", 10, "--n-boot", 20, "--json", "--quiet"], capsys)
    assert code == 0, err
    uniform = json.loads(out)
    extra = {"weighted"}  # the weighted path's own fields, beside every field of the uniform path
    assert set(weighted) == set(uniform) | extra
    assert set(weighted["estimates"][0]) == set(uniform["estimates"][0]) | {"uniform"}
    assert set(weighted["comparisons"][0]) == set(uniform["comparisons"][0])
    assert set(weighted["models"]["A"]) == set(uniform["models"]["A"]) | {"decoys"}
    assert weighted["models"]["A"]["sample_size"] == 16 and weighted["sample_size"] == 16
    for key in ("estimate", "low", "high", "sampled", "n_users", "label", "model", "metric", "k"):
        assert type(weighted["estimates"][0][key]) is type(uniform["estimates"][0][key]), key


def test_weighted_file_with_per_user_pools(tmp_path, capsys):
    from itemsampling.estimators.weighted import estimate_metric_weighted

    path, data, NN = _weighted_models(tmp_path, pools=True)
    code, out, err = _run(["estimate", path, "--weighted", "--metric", "ndcg", "--k", 10, "--n-boot", 20,
                           "--json", "--quiet"], capsys)
    assert code == 0, err
    res = json.loads(out)
    assert res["n_items"] == "per-user"
    assert res["models"]["A"]["n_items"] == {"min": 101, "max": 120, "mean": 110.5}
    users, p, a, pools = data["A"]
    assert sorted(set(pools)) == [101, 120]
    row = [r for r in res["estimates"] if r["model"] == "A"][0]
    ref = estimate_metric_weighted(p, a, pools, "ndcg", 10, ci=0.95, n_boot=20, rng=0)
    assert (row["estimate"], row["low"], row["high"]) == pytest.approx((ref.estimate, ref.low, ref.high), rel=1e-12)
    # the ratio curve reads each pool from the decoys' probabilities: per-user sizes give the estimate
    # of their largest; the uniform kernel maps pi to R with each user's own pool (a mixture)
    assert ref.estimate == pytest.approx(estimate_metric_weighted(p, a, 120, "ndcg", 10), rel=1e-12)
    mixed = estimate_metric_weighted(p, a, pools, "ndcg", 10, method="uniform")
    assert row["uniform"] == pytest.approx(mixed, rel=1e-12)
    assert mixed != pytest.approx(estimate_metric_weighted(p, a, 120, "ndcg", 10, method="uniform"), rel=1e-6)
    assert estimate_metric_weighted(p, a, np.full(300, 120), "ndcg", 10, method="uniform") == \
        estimate_metric_weighted(p, a, 120, "ndcg", 10, method="uniform")
    # one source of N, one pool size per user
    code, _, err = _run(["estimate", path, "--weighted", "--n-items", NN, "--quiet"], capsys)
    assert code == 2 and "per-user pool-size column 'n_items' and --n-items was given too" in err
    lines = path.read_text().splitlines()
    head = lines[0].split(",")
    j = head.index("n_items")
    bad = lines[2].split(",")
    bad[j] = "99"
    path.write_text("\n".join([lines[0], lines[1], ",".join(bad)] + lines[3:]) + "\n")
    code, _, err = _run(["estimate", path, "--weighted", "--quiet"], capsys)
    assert code == 2 and "line 3, column 'n_items'" in err and "one pool size per user" in err


# --- issue 31, part 3: bad input on the command line ----------------------------------------------
def _rank_file(tmp_path):
    p = tmp_path / "ranks.csv"
    p.write_text("rank\n1\n2\n3\n")
    return p


def test_estimate_reports_unreadable_files_in_one_line(tmp_path, capsys, monkeypatch):
    good = _rank_file(tmp_path)
    base = ["--n-items", 100, "--sample-size", 10, "--quiet", "--n-boot", 20]
    long_name = tmp_path / ("x" * 300 + ".csv")
    code, out, err = _run(["estimate", long_name, *base], capsys)
    assert code == 2 and err.startswith(f"error: {long_name}") and "File name too long" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = _run(["estimate", tmp_path, *base], capsys)
    assert code == 2 and err.strip() == f"error: {tmp_path}: is a folder, not a file of sampled ranks"
    code, _, err = _run(["estimate", tmp_path, "--weighted", "--n-items", 100, "--quiet"], capsys)
    assert code == 2 and err.strip() == f"error: {tmp_path}: is a folder, not a file of weighted decoys"

    real_open = open

    def no_permission(file, *args, **kw):  # as for a file without read permission (the tests may run as root)
        if str(file) == str(good):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kw)

    monkeypatch.setattr("builtins.open", no_permission)
    code, _, err = _run(["estimate", good, *base], capsys)
    assert code == 2 and err.strip() == f"error: {good}: cannot be read (Permission denied)"


def test_estimate_refuses_sizes_it_cannot_hold_naming_the_option(tmp_path, capsys, monkeypatch):
    good = _rank_file(tmp_path)
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(8 * 2**30))
    code, _, err = _run(["estimate", good, "--n-items", 100, "--sample-size", 10, "--quiet", "--n-boot",
                         1_000_000_000], capsys)
    assert code == 2 and err.strip() == ("error: 1,000,000,000 bootstrap replicates of 3 users needs 67.1 GiB of "
                                         "memory but at most 8.0 GiB is available; reduce --n-boot")
    code, _, err = _run(["estimate", good, "--n-items", 10**19, "--sample-size", 10, "--quiet"], capsys)
    assert code == 2 and err.startswith("error: --n-items: n_items must be <= 4611686018427387904")
    code, out, err = _run(["estimate", good, "--n-items", 2**62, "--sample-size", 10, "--quiet", "--n-boot", 20],
                          capsys)
    assert code == 0, err  # the largest catalogue the command takes
    for seed in ("-1", "1.5", "x"):
        with pytest.raises(SystemExit) as exc:
            main(["estimate", str(good), "--n-items", "100", "--sample-size", "10", "--seed", seed])
        assert exc.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"python -m itemsampling estimate: error: argument --seed: must be a non-negative integer, got {seed!r}")


def test_estimate_into_a_closed_pipe_is_one_error_line(tmp_path):
    good = _rank_file(tmp_path)
    cmd = (f"{sys.executable} -m itemsampling estimate {good} --n-items 100 --sample-size 10 --quiet --n-boot 20 "
           "| head -c 0; exit ${PIPESTATUS[0]}")
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "error: standard output was closed before the report was written (broken pipe)"


def test_the_header_gives_the_method_parameters_in_words(tmp_path, capsys):
    """The report's header names the method's options as ``name = value``, never as a Python dict."""
    path, _ = _two_models(tmp_path)
    code, out, err = _run(["estimate", path, "--n-items", N, "--sample-size", n, "--metric", "ndcg", "--k", 10,
                           "--quiet", "--method", "bv", "--gamma", 0.05], capsys)
    assert code == 0, err
    assert "method bv (gamma = 0.05)" in out
    assert "{" not in out.split("\n\n")[0] and "'gamma'" not in out
