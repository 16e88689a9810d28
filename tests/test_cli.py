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
    intervals cover the users' exact Recall@10 and NDCG@10 in (nearly) every file."""
    covered, total = 0, 0
    for seed, a in enumerate((0.3, 0.4, 0.5, 0.6)):
        R = sample_beta_ranks(a, N, 600, rng=np.random.default_rng([seed, 0]))
        p = tmp_path / f"ranks{seed}.csv"
        pd.DataFrame({"rank": sample_ranks(R, N, n, rng=np.random.default_rng([seed, 1]))}).to_csv(p, index=False)
        res = _estimate_json(p, capsys, "--sample-size", n, "--metric", "recall", "ndcg", "--k", 10,
                             "--n-boot", 60, "--seed", seed)
        assert res["method"] == DEFAULT_METHOD == "mle"
        assert len(res["estimates"]) == 2 and res["comparisons"] == []
        for row in res["estimates"]:
            exact = evaluate(R, row["metric"], row["k"])
            assert row["low"] <= row["estimate"] <= row["high"]
            assert row["high"] - row["low"] < 0.2  # informative, not a trivially wide interval
            covered += row["low"] <= exact <= row["high"]
            total += 1
    assert covered >= total - 1, f"{covered} of {total} intervals cover the exact metric"


def test_json_matches_the_shared_estimators(tmp_path, capsys):
    """Every number of --json is what bootstrap_models returns for the same ranks and the documented
    seed (top-K metrics: default_rng([seed, 0])), its point estimates those of estimate_metrics."""
    p, truth = _two_models(tmp_path, a=(0.3, 0.6), M=300)
    res = _estimate_json(p, capsys, "--sample-size", n, "--metric", "ndcg", "--k", 5, 10, "--n-boot", 30,
                         "--seed", 7, "--method", "bv", "--gamma", 0.1)
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
    res = _estimate_json(same, capsys, "--sample-size", n, "--metric", "recall", "--n-boot", 30, "--method", "cls")
    (c,) = res["comparisons"]
    assert c["difference"] == 0 and c["verdict"] == "cannot be told apart" and not c["told_apart"]
    far, _ = _two_models(tmp_path, a=(0.2, 1.0), M=400, name="far.csv")
    res = _estimate_json(far, capsys, "--sample-size", n, "--metric", "recall", "--n-boot", 30, "--method", "cls")
    (c,) = res["comparisons"]
    assert c["told_apart"] and c["low"] > 0 and c["verdict"] == "A > B"
    # the text report says the same
    code, out, _ = _run(["estimate", same, "--n-items", N, "--sample-size", n, "--metric", "recall",
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
    assert res["users"] == M and res["decoys"] == d
    row = res["results"][0]
    ref = estimate_metric_weighted(p, a, NN, "ndcg", 10, ci=0.95, n_boot=30, rng=0)
    assert row["estimate"] == pytest.approx(ref.estimate, rel=1e-12)
    assert (row["low"], row["high"]) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert row["sampled"] == pytest.approx(estimate_metric_weighted(p, a, NN, "ndcg", 10, method="sampled"))
    code, out, _ = _run(["estimate", path, "--weighted", "--n-items", NN, "--n-boot", 20, "--quiet"], capsys)
    assert code == 0 and "ndcg@10" in out and "recall@10" in out
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
