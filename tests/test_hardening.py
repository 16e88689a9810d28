"""Issue 19, the edges of the public API: each class of input the last round left alone is refused
with a ValueError naming the argument (or file, line and field), or documented and tested as the
intended result."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from itemsampling import theory as T
from itemsampling.estimators import metric_from_distribution


# --- distributions and probability vectors -------------------------------------------------------
@pytest.mark.parametrize("bad, msg", [([0.5, 0.6, 0.1], "sum to 1"), ([0.2, 0.2, 0.2], "sum to 1"),
                                      ([-0.2, 0.6, 0.6], "non-negative"), ([np.nan, 0.5, 0.5], "NaN")])
def test_metric_from_distribution_refuses_non_distributions(bad, msg):
    with pytest.raises(ValueError, match=f"rank_distribution must .*{msg}"):
        metric_from_distribution(bad, "recall", 1)
    # a distribution is accepted: Recall@1 is P(R = 1), Recall@2 = P(R <= 2)
    np.testing.assert_allclose(metric_from_distribution([0.25, 0.25, 0.5], "recall", [1, 2]), [0.25, 0.5])


@pytest.mark.parametrize("fn", [T.deviation_probability, T.deviation_radius])
def test_theory_pmf_argument_must_be_a_distribution(fn):
    probs = np.array([0.2, 0.5])
    pmf = T.poisson_binomial_pmf(probs)  # [0.4, 0.5, 0.1]
    np.testing.assert_allclose(pmf, [0.8 * 0.5, 0.2 * 0.5 + 0.8 * 0.5, 0.1])
    second = 0.1 if fn is T.deviation_probability else 0.05
    assert fn(probs, second, pmf=pmf) == fn(probs, second)  # the shared pmf gives the same answer
    for bad, msg in ((pmf * 1.5, "sum to 1"), (np.r_[pmf[:2], -0.1] + [0, 0.1, 0], "non-negative"),
                     (np.r_[np.nan, pmf[1:]], "NaN"), (pmf[:2], "shape")):
        with pytest.raises(ValueError, match=f"pmf must .*{msg}"):
            fn(probs, second, pmf=bad)


# --- booleans and floats where integers (or numbers) are meant -----------------------------------
def test_number_arguments_refuse_booleans():
    from itemsampling import mapping as MP
    from itemsampling import sampling as S

    for call, name in ((lambda: S.hoeffding_bound(10, True), "t"),
                       (lambda: T.dominates([1.0, 2.0], [1.0, 2.0], atol=True), "atol"),
                       (lambda: T.crossings([1.0, 2.0], [2.0, 1.0], atol=True), "atol"),
                       (lambda: MP.fit_beta([1, 2], 100, 10, tol=True), "tol")):
        with pytest.raises(ValueError, match=f"^{name} must be a .*number"):
            call()
    # the valid calls give the values of their formulas: 2 exp(-2 M t^2), and the tie tolerance
    assert S.hoeffding_bound(10, 0.25) == pytest.approx(2 * np.exp(-2 * 10 * 0.0625))
    assert T.dominates([1.0, 2.0], [1.0, 2.5], atol=0.5) and not T.dominates([1.0, 2.0], [1.0, 2.5], atol=0.25)


@pytest.mark.parametrize("seed", [3.5, 3.0, True, np.float64(2.0), -1, "3"])
def test_experiment_seeds_are_integers_as_in_as_rng(seed):
    from itemsampling import experiments as E
    from itemsampling._validation import as_rng

    with pytest.raises(ValueError, match="rng must be"):
        as_rng(seed)  # the rule everywhere else ...
    for call in (lambda: E.make_model("als", rng=seed), lambda: E.make_model("popular", rng=seed),
                 lambda: E.load_split("sim-ml100k", rng=seed)):
        with pytest.raises(ValueError, match="rng must be a non-negative integer seed"):  # ... and here
            call()


def test_make_model_seed_is_used():
    from itemsampling import experiments as E

    a, b, c = (E.make_model("als", rng=s) for s in (3, np.int64(3), 4))
    draw = [m.rng.integers(1 << 30) for m in (a, b, c)]
    assert draw[0] == draw[1] != draw[2]


# --- sizes that cannot be --------------------------------------------------------------------------
def _tiny_split():
    import pandas as pd

    train = pd.DataFrame({"user": [0, 0, 1, 1], "item": [0, 1, 1, 2], "rating": 1.0, "timestamp": 0})
    test = pd.DataFrame({"user": [0, 1], "item": [2, 3], "rating": 1.0, "timestamp": 1})
    for df in (train, test):
        df.attrs["n_items"], df.attrs["n_users"] = 6, 2
    return train, test


@pytest.mark.parametrize("replacement", [True, False])
def test_sampled_ranks_explicit_sizes(replacement):
    from itemsampling import models as MO
    from itemsampling.ranking import pool_sizes, sampled_ranks_explicit

    train, test = _tiny_split()
    model = MO.Popular().fit(train)
    pools = pool_sizes(train, test, 6)
    np.testing.assert_array_equal(pools, [4, 4])  # 6 items less each user's 2 training items
    with pytest.raises(ValueError, match="sample_size must be <= 6"):  # above the catalogue
        sampled_ranks_explicit(model, train, test, 7, rng=0, replacement=replacement)
    with pytest.raises(ValueError, match=r"sample_size must be <= every user's pool N_u .* N_u = 4, got 5"):
        sampled_ranks_explicit(model, train, test, 5, rng=0, replacement=replacement)
    # at n = N_u every item of the pool can be drawn: ranks stay in 1..n
    r = sampled_ranks_explicit(model, train, test, 4, rng=0, replacement=replacement)
    assert r.min() >= 1 and r.max() <= 4


def test_empty_lists_are_refused():
    from itemsampling import experiments as E
    from itemsampling.estimators import estimate_metrics
    from itemsampling.estimators.grid import grid_estimate_metrics

    R = np.array([1, 5, 20, 50])
    gr = E.GlobalRanks({"a": R}, 100, np.full(4, 100), np.arange(4), np.zeros(4, dtype=np.int64), "hand", True, 0)
    kw = dict(n_repeats=2, cache=False, progress=False)
    cases = [(lambda: estimate_metrics([1, 2, 3], 100, 10, "recall", 5, []), "methods must name at least one"),
             (lambda: estimate_metrics([1, 2, 3], 100, 10, [], 5, ["cls"]), "metrics must name at least one"),
             (lambda: estimate_metrics([1, 2, 3], 100, 10, "recall", 5, [], ci=0.9), "methods must name"),
             (lambda: grid_estimate_metrics([1, 2], 10**6, 10, "recall", 5, []), "methods must name"),
             (lambda: grid_estimate_metrics([1, 2], 10**6, 10, [], 5, ["mes"]), "metrics must name"),
             (lambda: metric_from_distribution(np.full(4, 0.25), "recall", []), "k must name at least one"),
             (lambda: E.run_experiment(gr, sample_sizes=(), **kw), "sample_sizes must hold at least one"),
             (lambda: E.run_experiment(gr, metrics=(), **kw), "metrics must hold at least one"),
             (lambda: E.run_experiment(gr, estimators={}, **kw), "estimators must be a non-empty dict")]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()
    # one entry is enough, and gives the value of its formula: Recall@2 of a uniform distribution
    assert estimate_metrics([1, 2, 3], 100, 10, "recall", 5, ["sampled"]) == {"sampled": {"recall": 1.0}}
    np.testing.assert_allclose(metric_from_distribution(np.full(4, 0.25), "recall", [2]), [0.5])


# --- splits ----------------------------------------------------------------------------------------
def _interactions(ts):
    import pandas as pd

    return pd.DataFrame({"user": [0, 0, 0, 1, 1], "item": [0, 1, 2, 2, 3], "rating": 1.0, "timestamp": ts})


def test_leave_last_out_refuses_missing_timestamps():
    import pandas as pd

    from itemsampling.data import leave_last_out

    for ts in ([1.0, np.nan, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, np.inf, 4.0]):
        with pytest.raises(ValueError, match=r"interactions\['timestamp'\] must be finite: 1 row"):
            leave_last_out(_interactions(ts), rng=0)
    with pytest.raises(ValueError, match="NaT"):
        leave_last_out(_interactions(pd.to_datetime([1, None, 2, 3, 4], unit="s")), rng=0)
    # finite times: each user's latest event is held out (user 0: item 1 at t = 9; user 1: item 2 at t = 5)
    train, test = leave_last_out(_interactions([1.0, 9.0, 2.0, 5.0, 4.0]), rng=0)
    assert test["item"].tolist() == [1, 2] and len(train) == 3


def test_holdout_fraction_test_users():
    from itemsampling.data import holdout_fraction

    df = _interactions([1, 2, 3, 4, 5])
    for bad, msg in (([], "non-empty"), ([0.5], "integer user ids"), ([True], "integer user ids"),
                     ("0", "non-empty 1-d array"), ([[0, 1]], "non-empty 1-d array"), ([0, 7], "present")):
        with pytest.raises(ValueError, match=f"test_users must .*{msg}"):
            holdout_fraction(df, 0.5, rng=0, test_users=bad)
    # user 1 only: round(0.5 * 2) = 1 of its 2 interactions held out, user 0 untouched
    for users in ([1], np.array([1.0]), np.int64(1)):
        train, test = holdout_fraction(df, 0.5, rng=0, test_users=users)
        assert test["user"].tolist() == [1] and len(train) == 4


# --- loaders ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, content", [
    ("u.data", "1\t2\t3\t881250949\n{u}\t3\t4\t881250950\n"),
    ("ratings.dat", "1::2::3::978300760\n{u}::3::4::978300761\n"),
    ("ratings.csv", "userId,movieId,rating,timestamp\n1,2,3.0,1\n{u},3,4.0,2\n")])
def test_movielens_ids_negative_or_beyond_int64(tmp_path, name, content):
    from itemsampling.data import load_movielens

    f = tmp_path / name
    line = 3 if name == "ratings.csv" else 2
    for u, msg in (("-5", "must be a non-negative id, got '-5'"),
                   (str(2**64 - 1), "must fit in a 64-bit integer"),  # once wrapped silently to -1
                   (str(10**20), "must fit in a 64-bit integer")):  # once a raw OverflowError
        f.write_text(content.format(u=u))
        with pytest.raises(ValueError, match=rf"{name}: line {line}, field 1 \(user\) {msg}"):
            load_movielens(f)
    f.write_text(content.format(u=2**63 - 1))  # the largest int64 is an id like any other
    assert load_movielens(f).attrs["user_ids"].tolist() == [1, 2**63 - 1]


def test_ncf_ids_beyond_int64(tmp_path):
    from itemsampling.data import load_ncf

    (tmp_path / "ml-1m.train.rating").write_text(f"0\t1\t5\t978300760\n{2**64 - 1}\t2\t3\t978300761\n")
    (tmp_path / "ml-1m.test.rating").write_text("0\t2\t5\t978300762\n")
    (tmp_path / "ml-1m.test.negative").write_text("(0,2)\t3\t4\n")
    with pytest.raises(ValueError, match=r"train\.rating: line 2, field 1 \(user\) must fit in a 64-bit"):
        load_ncf(tmp_path, "ml-1m")
    (tmp_path / "ml-1m.train.rating").write_text("0\t1\t5\t978300760\n1\t2\t3\t978300761\n")
    (tmp_path / "ml-1m.test.negative").write_text(f"(0,2)\t3\t{2**64}\n")
    with pytest.raises(ValueError, match=r"test\.negative: line 1, field 3 \(decoy\) must be a non-negative item "
                                         r"id that fits in a 64-bit integer"):
        load_ncf(tmp_path, "ml-1m")


def test_last_line_without_newline_is_read_with_a_warning(tmp_path):
    from itemsampling.data import load_movielens

    f = tmp_path / "u.data"
    f.write_text("1\t2\t3\t881250949\n2\t3\t4\t88125")  # cut inside the last timestamp?
    with pytest.warns(UserWarning, match=r"u\.data: the file does not end with a newline, so its last line 2 "
                                         r"\('2\\t3\\t4\\t88125'\) may be cut inside a number"):
        df = load_movielens(f)
    assert df["timestamp"].tolist() == [881250949, 88125]  # read as it stands
    f.write_text("1\t2\t3\t881250949\n2\t3\t4\t88125\n")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a complete file reads without a warning
        assert len(load_movielens(f)) == 2


# --- huge sizes: a result or a ValueError naming the argument, never a raw error --------------------
def _huge_calls(N, n):
    from itemsampling import kernel as KN
    from itemsampling import mapping as MP
    from itemsampling import metrics as ME
    from itemsampling import sampling as S
    from itemsampling.estimators import corrected as C
    from itemsampling.estimators import estimate_metric, estimate_metrics

    R = np.array([1, 5, 1000])
    r = np.array([1, 2, 3])
    return {
        "theory.kernel_tv_distance(ranks)": lambda: T.kernel_tv_distance(N, n, R),
        "theory.kernel_tv_distance(all)": lambda: T.kernel_tv_distance(N, n),
        "theory.repeat_probability": lambda: T.repeat_probability(N, n),
        "theory.beta_rank_distribution": lambda: T.beta_rank_distribution(N, 0.3),
        "theory.beta_rank_cdf": lambda: T.beta_rank_cdf([1, 10, N], N, 0.3),
        "theory.simulate_sampled_recall_curves": lambda: T.simulate_sampled_recall_curves(R, N, n, 2, [1, 2], rng=0),
        "mapping.beta_mapping": lambda: MP.beta_mapping([1, 10, n], N, n, 0.3),
        "mapping.beta_mapping_closed_form": lambda: MP.beta_mapping_closed_form([1, 10, n], N, n, 0.3),
        "mapping.beta_mapping_printed_product": lambda: MP.beta_mapping_printed_product(10, N, n, 0.3),
        "mapping.mapping": lambda: MP.mapping("bound", [1, n], N, n),
        "mapping.oracle_mapping": lambda: MP.oracle_mapping(R, N, n, [1, 2]),
        "mapping.fit_beta": lambda: MP.fit_beta(r, N, n),
        "sampling.expected_sampled_metric": lambda: S.expected_sampled_metric(R, N, n, "ndcg", 10),
        "sampling.expected_metric_given_rank": lambda: S.expected_metric_given_rank(R, N, n, "recall", 10),
        "sampling.sampled_metric_moments": lambda: S.sampled_metric_moments(R, N, n, "ap"),
        "sampling.shr_moments": lambda: S.shr_moments(R, N, n, [1, 2]),
        "sampling.sample_ranks": lambda: S.sample_ranks(R, N, n, rng=0),
        "kernel.kernel_cdf": lambda: KN.kernel_cdf(N, n, True, R),
        "metrics.evaluate": lambda: ME.evaluate(R, "ndcg", 10, N),
        "corrected.corrected_metric": lambda: C.corrected_metric("recall", 10, N, n, "bv", gamma=0.1),
        "estimate_metric(mes)": lambda: estimate_metric(r, N, n, "recall", 10, "mes"),
        "estimate_metric(bv)": lambda: estimate_metric(r, N, n, "recall", 10, "bv", gamma=0.1),
        "estimate_metrics": lambda: estimate_metrics(r, N, n, "recall", 10, ["mle", "rank_estimate", "sampled"]),
    }


ARGS = r"\b(n_items|sample_size|global_ranks|n_repeats|n_users|sampled_ranks)\b"


@pytest.mark.parametrize("N", [10**9, 10**12])
@pytest.mark.parametrize("n_of", ["100", "N"])
def test_huge_sizes_give_a_result_or_name_the_argument(monkeypatch, N, n_of):
    import warnings

    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(2**28))  # 256 MiB
    n = 100 if n_of == "100" else N
    outcomes = {}
    for name, call in _huge_calls(N, n).items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # resolution / convergence notes are not the point here
                out = call()
        except ValueError as e:
            assert re.search(ARGS, str(e)), f"{name}: {e}"
            outcomes[name] = "refused"
        else:  # any other exception fails the test by itself
            vals = [v for d in out.values() for v in d.values()] if isinstance(out, dict) else [out]
            assert all(np.all(np.isfinite(np.asarray(v, dtype=float))) for v in vals), name
            outcomes[name] = "result"
    # the closed forms answer at any size
    for name in ("theory.repeat_probability", "mapping.beta_mapping", "mapping.beta_mapping_closed_form",
                 "mapping.mapping", "theory.beta_rank_cdf", "metrics.evaluate", "sampling.sample_ranks"):
        assert outcomes[name] == "result", name
    if n == N:  # one decoy per other item: a repeat is certain, the Beta map ends at f(n) = N
        assert T.repeat_probability(N, n) == 1.0
    from itemsampling import mapping as MP

    np.testing.assert_allclose(MP.beta_mapping([n], N, n, 0.3), [N], rtol=1e-9)
    np.testing.assert_allclose(MP.beta_mapping([n // 2], N, n, 1.0), [(n // 2) * (N - 1) / n + 1], rtol=1e-9)


def test_repeat_probability_closed_form_matches_the_product(monkeypatch):
    # Euler-Maclaurin beyond REPEAT_EXACT_TERMS against the term-by-term sum, on sizes both can do
    cases = [(10**6, 1000), (10**9, 10**5), (10**6, 5000), (10**6, 100), (10**12, 2 * 10**6)]
    exact = [T.repeat_probability(N, n) for N, n in cases]
    monkeypatch.setattr(T, "REPEAT_EXACT_TERMS", 10)
    np.testing.assert_allclose([T.repeat_probability(N, n) for N, n in cases], exact, rtol=1e-12)
    # and the bound rho <= m(m-1)/(2(N-1)), tight for small m / sqrt(N)
    N, n = 10**12, 10**4
    m = n - 1
    assert T.repeat_probability(N, n) <= m * (m - 1) / (2 * (N - 1)) < T.repeat_probability(N, n) * 1.001


def test_beta_mapping_closed_form_above_the_recurrence_limit(monkeypatch):
    from itemsampling import mapping as MP

    ks = [1, 2, 17, 400, 999, 1000]
    for a in (0.05, 0.3, 1.0, 2.5):
        rec = MP.beta_mapping(ks, 10**9, 1000, a)
        monkeypatch.setattr(MP, "BETA_RECURRENCE_MAX", 10)
        np.testing.assert_allclose(MP.beta_mapping(ks, 10**9, 1000, a), rec, rtol=1e-10)
        monkeypatch.setattr(MP, "BETA_RECURRENCE_MAX", 1 << 22)


# --- mes_cvxpy: the gap at the returned point, computed as mes_dual's --------------------------------
def test_mes_cvxpy_reports_the_kkt_gap_of_its_point():
    from itemsampling.estimators import distribution as D
    from itemsampling.kernel import kernel
    from itemsampling.sampling import sample_ranks

    N, n = 300, 20
    r = sample_ranks(np.random.default_rng(0).integers(1, N + 1, 400), N, n, rng=1)
    pt = np.bincount(r, minlength=n + 1)[1:] / r.size
    K = kernel(N, n)
    for a in (1e-3, 0.05, 1.0):
        dual, prim = D.mes_dual(pt, K, a), D.mes_cvxpy(pt, K, a)
        assert np.isfinite(prim.gap) and prim.gap == D.mes_primal_gap(prim.distribution, pt, K, a)
        # both solvers agree, and the gap is small at each one's answer and zero at the dual optimum
        assert np.abs(prim.distribution - dual.distribution).max() < 1e-4
        assert D.mes_primal_gap(dual.distribution, pt, K, a) < 1e-10 and prim.gap < 1e-4
        # a point that is not the optimum has a gap as large as its distance from it
        assert D.mes_primal_gap(np.full(N, 1.0 / N), pt, K, a) > 100 * prim.gap


# --- docstrings cite papers and equations, not the project's private notes ----------------------------
def test_docstrings_do_not_cite_private_notes():
    from pathlib import Path

    import itemsampling

    root = Path(itemsampling.__file__).parent
    files = list(root.rglob("*.py"))
    assert len(files) > 20
    cited = [f"{p.relative_to(root)}:{i}" for p in files
             for i, line in enumerate(p.read_text().splitlines(), 1) if "SEED-NOTES" in line]
    assert cited == []


# --- resolution: K below one kernel width N/(n-1) ------------------------------------------------------
def test_resolution_warning_is_exported_and_names_k_width_and_remedy():
    import warnings

    import itemsampling
    from itemsampling.estimators import estimate_metric, estimate_metrics

    assert issubclass(itemsampling.ResolutionWarning, UserWarning)
    r = np.array([1, 1, 2, 3, 5])
    # Recall@10 at N = 10^12, n = 50: the rule asks for K >= 2 x 10^12 / 49 = 4.082e10; n >= 2 x 10^11 + 1
    with pytest.warns(itemsampling.ResolutionWarning,
                      match=r"cut-off K = 10 is below the resolution rule K >= 2 N/\(n-1\) = 4\.082e\+10 \(N = "
                            r"1000000000000, n = 50\).*\(design='adaptive'\), or use a larger sample size \(n >= "
                            r"200000000001 for K = 10\)"):
        estimate_metric(r, 10**12, 50, "recall", 10, "mle")
    # N = 300, n = 60: the rule asks for K >= 2 x 300/59 = 10.17; K = 1, 5, 6, 10 are below it, K = 11 is not
    with pytest.warns(itemsampling.ResolutionWarning,
                      match=r"K = 1, 5, 6, 10 is below the resolution rule K >= 2 N/\(n-1\) = 10\.17"):
        estimate_metrics(r, 300, 60, ["recall", "ndcg"], [1, 5, 6, 10, 11], ["bv", "mle"], gamma=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", itemsampling.ResolutionWarning)
        estimate_metric(r, 300, 60, "recall", [11, 20], "mle")  # every K resolved
        estimate_metric(r, 300, 60, "recall", 1, "sampled")  # the sampled metric estimates nothing global
        estimate_metric(r, 300, 60, "auc", None, "mle")  # no cut-off
        estimate_metric(r, 300, np.array([60, 60, 120, 240, 240]), "recall", 3, "mle")  # n_u up to 240: 2 x 1.26


def test_estimate_command_prints_the_resolution_note(tmp_path, capsys):
    import pandas as pd

    from itemsampling.cli import main
    from itemsampling.sampling import sample_ranks

    p = tmp_path / "ranks.csv"
    R = np.random.default_rng(0).integers(1, 301, 200)
    pd.DataFrame({"rank": sample_ranks(R, 300, 60, rng=1)}).to_csv(p, index=False)
    base = ["estimate", str(p), "--n-items", "300", "--sample-size", "60", "--quiet", "--n-boot", "20",
            "--method", "mle", "--metric", "recall"]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the note is printed under the table, not warned as well
        assert main(base + ["--k", "1", "10"]) == 0
    out = capsys.readouterr().out
    table, note = out.split("Note: ")
    assert "recall@10" in table.lower() or "Recall@10" in table
    assert note.startswith("cut-off K = 1, 10 is below the resolution rule K >= 2 N/(n-1) = 10.17 (N = 300, n = 60)")
    assert main(base + ["--k", "11"]) == 0
    assert "Note: " not in capsys.readouterr().out


# --- issue 31: the last rough edges found by trying bad input --------------------------------------
def test_ratings_csv_with_a_byte_order_mark_is_read_as_without(tmp_path):
    from itemsampling.data import load_movielens

    text = "userId,movieId,rating,timestamp\n1,10,4.0,100\n1,20,3.5,101\n2,10,5.0,102\n"
    (tmp_path / "plain").mkdir()
    (tmp_path / "bom").mkdir()
    (tmp_path / "plain" / "ratings.csv").write_bytes(text.encode("utf-8"))
    (tmp_path / "bom" / "ratings.csv").write_bytes(text.encode("utf-8-sig"))  # as spreadsheets write it
    assert (tmp_path / "bom" / "ratings.csv").read_bytes()[:3] == b"\xef\xbb\xbf"
    plain, bom = load_movielens(tmp_path / "plain"), load_movielens(tmp_path / "bom")
    assert bom.equals(plain)
    assert bom["user"].tolist() == [0, 0, 1] and bom["item"].tolist() == [0, 1, 0]
    assert bom["rating"].tolist() == [4.0, 3.5, 5.0] and list(bom.attrs["user_ids"]) == [1, 2]


@pytest.mark.parametrize("bad", [123, None, 1.5, b"ratings.csv", ["ratings.csv"]])
def test_load_movielens_and_ncf_refuse_a_path_of_another_type(bad):
    from itemsampling.data import load_movielens, load_ncf

    with pytest.raises(ValueError, match=r"^path must be a folder or file path \(a string or os.PathLike\), got"):
        load_movielens(bad)
    with pytest.raises(ValueError, match=r"^path must be a folder or file path"):
        load_ncf(bad)


_LIMITED = """
import resource, sys
import numpy as np, pandas as pd
from itemsampling import models, sampling
# hold the process to its present address space + 1.5 GiB (as a container's limit would)
vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (vm + 1536 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
try:
    {call}
except MemoryError:
    print("MemoryError"); sys.exit(3)
except ValueError as exc:
    print("ValueError:", exc); sys.exit(0)
print("no error"); sys.exit(4)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_expected_sampled_metric_refuses_before_allocating_under_a_process_memory_limit():
    # N = 10^12, n = 10^8: three kernel rows of 10^8 doubles and their temporaries (about 12 GB)
    # exceed a 1.5 GiB address-space limit; the check reads the limit instead of the machine's memory
    call = "sampling.expected_sampled_metric(np.array([1, 5, 10]), 10**12, 10**8, 'ndcg', 10)"
    proc = subprocess.run([sys.executable, "-c", _LIMITED.format(call=call)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"3 kernel row\(s\) of length sample_size = 100000000 needs 11\.\d GiB of memory but at most "
                     r"\d\.\d GiB is available; reduce sample_size", proc.stdout), proc.stdout
    # a request that fits the limit runs under it: n = 10^5 is E[NDCG@10] of the kernel rows
    call = ("v = sampling.expected_sampled_metric(np.array([1, 5, 10]), 10**12, 10**5, 'ndcg', 10); "
            "assert abs(v - 1.0) < 1e-5, v; raise ValueError('ran')")
    proc = subprocess.run([sys.executable, "-c", _LIMITED.format(call=call)], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.strip() == "ValueError: ran", proc.stdout + proc.stderr


def test_memory_limit_is_the_smallest_of_the_machine_and_the_process_limits(monkeypatch):
    from itemsampling import _validation as V

    monkeypatch.delenv("ITEMSAMPLING_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(V, "_process_memory_caps", lambda: [3 * 2**30, 5 * 2**30])
    assert V.memory_limit() == 3 * 2**30
    with pytest.raises(ValueError, match=r"needs 4\.0 GiB of memory but at most 3\.0 GiB is available; reduce x"):
        V.check_memory(4 * 2**30, "it", "x")
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(2**20))  # the variable still wins
    assert V.memory_limit() == 2**20


def test_als_with_a_billion_factors_is_refused_before_allocating():
    import pandas as pd

    from itemsampling import models

    train = pd.DataFrame({"user": [0, 0, 1, 1], "item": [0, 1, 1, 2], "rating": [1.0] * 4, "timestamp": range(4)})
    # (4 + 8) bytes x (2 users + 3 items) x 10^9 factors + 4 x 10^18 x 4 bytes for Y^T Y: exabytes
    with pytest.raises(ValueError, match=r"^ALS on 2 users and 3 items with factors = 1000000000 needs .* of memory "
                                         r"but at most .* is available; reduce factors"):
        models.ALS(factors=10**9).fit(train)
    with pytest.raises(ValueError, match=r"^BPR on 2 users and 3 items with factors = 1000000000000 needs"):
        models.BPR(factors=10**12).fit(train)
    m = models.ALS(factors=2, iterations=2, rng=0).fit(train)  # a small model still fits
    assert m.user_factors_.shape == (2, 2) and m.item_factors_.shape == (3, 2)


def test_winner_agreement_refuses_positions_that_are_not_a_dict():
    from itemsampling import mapping as MP

    ranks = {"A": [1, 2, 3], "B": [4, 5, 6]}
    for bad in ([1.0], None, {}):
        with pytest.raises(ValueError, match=r"^positions must be a non-empty dict mapping name -> array of f\(k\)"):
            MP.winner_agreement(ranks, 100, 10, [1], bad, n_repeats=2, rng=0)
    with pytest.raises(ValueError, match=r"^positions\['id'\] must be an array of numbers"):
        MP.winner_agreement(ranks, 100, 10, [1], {"id": ["x"]}, n_repeats=2, rng=0)
    # A beats B at every rank, globally and in every sampled evaluation: agreement in 2 of 2 repeats
    out = MP.winner_agreement(ranks, 100, 10, [1], {"id": [1.0]}, n_repeats=2, rng=0)
    assert out["id"] == {1: 2} and out["_global_winner"]["id"] == {1: "A"}


def test_cached_kernel_checks_its_arguments():
    from itemsampling.estimators.distribution import cached_kernel
    from itemsampling.kernel import kernel

    for args, msg in ((([10], 3), "n_items must be an integer"), ((10, 3.5), "sample_size must be an integer"),
                      ((10, 11), "sample_size must be <= 10"), ((10, 3, "yes"), "replacement must be True or False")):
        with pytest.raises(ValueError, match=f"^{re.escape(msg)}"):
            cached_kernel(*args)
    np.testing.assert_array_equal(cached_kernel(10, 3), kernel(10, 3))
    np.testing.assert_array_equal(cached_kernel(10, 3, False), kernel(10, 3, False))


def test_order_string_refuses_values_that_are_not_numbers():
    from itemsampling.book import order_string

    for values, name in (({"a": "x"}, "a"), ({"a": 1, "b": None}, "b"), ({"a": 1.0, "b": float("nan")}, "b"),
                         ({"a": True, "b": 0.5}, "a")):
        with pytest.raises(ValueError, match=rf"^values\['{name}'\] must be a finite number, got"):
            order_string(values)
    assert order_string({"a": 1, "b": 2.5, "c": np.float32(2.5)}) == "b = c > a"
    assert order_string({"a": 1}) == "a"


def test_record_refuses_a_corrupt_or_unwritable_results_file(tmp_path, monkeypatch):
    import json

    from itemsampling.book import RESULTS_ENV, record

    corrupt = tmp_path / "results.json"
    corrupt.write_text('{"x": 1')
    monkeypatch.setenv(RESULTS_ENV, str(corrupt))
    with pytest.raises(ValueError, match=rf"^cannot read the results file {re.escape(str(corrupt))} "
                                         r"\(\$ITEMSAMPLING_RESULTS\): .*remove it or point"):
        record("y", 2)
    assert corrupt.read_text() == '{"x": 1'  # left as it was
    corrupt.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"must hold a JSON object of recorded values, got a JSON list"):
        record("y", 2)
    missing = tmp_path / "no-such-folder" / "results.json"
    monkeypatch.setenv(RESULTS_ENV, str(missing))
    with pytest.raises(ValueError, match=rf"^cannot write the results file {re.escape(str(missing))} .*: "
                                         "No such file or directory"):
        record("y", 2)
    good = tmp_path / "good.json"
    good.write_text('{"x": 1}')
    monkeypatch.setenv(RESULTS_ENV, str(good))
    assert record("y", 2) == 2
    assert json.loads(good.read_text()) == {"x": 1, "y": 2}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".results-")] == []


def test_run_notebook_refuses_bad_arguments_before_the_kernel(tmp_path):
    from myst_header import MYST_HEADER

    from itemsampling.run import run_notebook

    nb = tmp_path / "nb.md"
    nb.write_text(MYST_HEADER + "\n# T\n\n```{code-cell} ipython3\n:tags: [parameters]\n\nx = 1\n```\n")
    with pytest.raises(ValueError, match=r"^parameters must be a dict of name -> value .*got str 'x=1'"):
        run_notebook(nb, "x=1", tmp_path / "o", progress=False)
    with pytest.raises(ValueError, match=rf"^notebook {re.escape(str(tmp_path))} is a folder"):
        run_notebook(tmp_path, {}, tmp_path / "o", progress=False)
    taken = tmp_path / "taken.txt"
    taken.write_text("keep me")
    with pytest.raises(ValueError, match=rf"^out {re.escape(str(taken))} exists and is not a folder"):
        run_notebook(nb, {}, taken, progress=False)
    assert taken.read_text() == "keep me"
    for t in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="^timeout must be"):
            run_notebook(nb, {}, tmp_path / "o", progress=False, timeout=t)
    assert not (tmp_path / "o").exists()  # nothing was written before the refusals


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "x"])
def test_run_command_refuses_a_timeout_that_is_not_positive(value, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "itemsampling", "run", "1", "--timeout", value, "--out",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(
        f"error: argument --timeout: must be a positive whole number of seconds, got {value!r}"), proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


def test_compare_models_refuses_zero_variance_and_keeps_defined_cases():
    from itemsampling import users

    for a, b in (([1.0, 1, 1], [0.0, 0, 0]), ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])):
        with pytest.raises(ValueError, match=r"^test 't' \(Welch\) is undefined when per_user_a and per_user_b both "
                                             r"have zero variance"):
            users.compare_models(a, b, test="t")
        with pytest.raises(ValueError, match="^test 'paired-t' is undefined when every per-user difference"):
            users.compare_models(a, b, test="paired-t")
    # one constant sample is fine for Welch: t = (2/3 - 0) / sqrt(s_a^2 / 3) with s_a^2 = 1/3, t = 2
    res = users.compare_models([1.0, 1, 0], [0.0, 0, 0], test="t")
    assert res.statistic == pytest.approx(2.0) and 0 < res.p_value < 1
    assert users.compare_models([1.0, 1, 1], [0.0, 0, 0], test="sign").p_value == pytest.approx(0.25)


def test_sample_size_refuses_overflow_and_handles_many_models():
    import math

    from scipy import stats

    from itemsampling import users

    # 10^17 simultaneous statements: z at alpha / (2 * 10^17), from the upper tail
    z = stats.norm.isf(0.05 / 2 / 1e17)
    assert z == pytest.approx(8.9, abs=0.05)
    assert users.sample_size(0.03, n_models=10**17) == math.ceil(0.25 * (z / 0.03) ** 2 * (1 - 1e-12))
    assert users.sample_size(0.03) == 1068 and users.sample_size(0.03, n_models=10) == 2189
    with pytest.raises(ValueError, match=r"^margin must be at least 7\.3e-155 here .* got 1e-200"):
        users.sample_size(1e-200)
    assert users.sample_size(1e-150) > 10**299  # still a count
    with pytest.raises(ValueError, match=r"^n_models = 1e400 makes the Bonferroni level .* underflow"):
        users.sample_size(0.03, n_models=10**400)


def test_t_interval_of_values_near_the_float_limit():
    from itemsampling import users

    assert users.confidence_interval([1e308, 1e308, 1e308], method="t") == (1e308, 1e308)
    low, high = users.confidence_interval([1e308, 0.5e308, 1e308], method="t")
    # mean 2.5/3 e308, s = 0.5/sqrt(3) e308, t_{2, 0.975} = 4.303: the ends stay finite only scaled
    from scipy import stats

    t2 = stats.t.ppf(0.975, 2)
    assert t2 == pytest.approx(4.303, abs=1e-3)
    h = t2 * (0.5 / np.sqrt(3)) / np.sqrt(3)
    assert (low, high) == pytest.approx(((2.5 / 3 - h) * 1e308, (2.5 / 3 + h) * 1e308), rel=1e-12)
    assert np.isfinite(high) and high > 1.5e308
    with pytest.raises(ValueError, match=r"^values are so large that the 't' interval's ends exceed the float range"):
        users.confidence_interval([1.7e308, -1.7e308, 1.7e308], method="t")
    # ordinary values: unchanged, bit for bit, from the unscaled formula
    x = np.array([0.1, 0.2, 0.5])
    h = t2 * x.std(ddof=1) / np.sqrt(3)
    assert users.confidence_interval(x, method="t") == pytest.approx((x.mean() - h, x.mean() + h), rel=1e-14)
