"""itemsampling.evaluation.sampled_ranks: each design against brute-force ranking on a tiny catalogue
(the decoys, the ranks, ties in the target's favour), the fixed design's sampled-rank law against the
with-replacement kernel the estimators use (chi-square and an exact binomial test), the adaptive
design's stopping rule, sizes and law (TORS Algorithm 1), full ranking exact and user sampling,
determinism, batching, the estimate path on the table, and every bad input refused naming the
argument and the row."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

from itemsampling import evaluation
from itemsampling.estimators import estimate_metrics
from itemsampling.evaluation import design_call, sampled_ranks
from itemsampling.kernel import kernel_row

# A tiny catalogue: N = 8 items, 5 users; user 0 excludes items 6 and 7 (pool of 6 with the target), user 1
# excludes item 0, users 2 and 3 exclude nothing, user 4 excludes items 0..4 (pool {5, 6, 7}). Scores with
# ties (user 0: items 2 and 3 tie with item 4). Decoys come by rejection for pools (less the target) of at
# least N/2 items, by the position map for smaller ones (user 4): both paths are checked.
N = 8
S = np.array([
    [0.9, 0.1, 0.5, 0.5, 0.5, 0.3, 0.95, 0.99],
    [0.2, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.1],
    [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
    [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
    [0.9, 0.9, 0.9, 0.9, 0.9, 0.2, 0.6, 0.7],
])
EXCL = sp.csr_matrix(([1] * 8, ([0, 0, 1, 4, 4, 4, 4, 4], [6, 7, 0, 0, 1, 2, 3, 4])), shape=(5, N))


def _brute_rank(u, t, pool):
    """1 + pool items scoring strictly higher than the target."""
    return 1 + sum(S[u, j] > S[u, t] for j in pool if j != t)


def _pool(u):
    return [j for j in range(N) if EXCL[u, j] == 0]


class Recorder:
    """A scorer over S that keeps every call."""

    def __init__(self, table=S):
        self.table = table
        self.calls = []

    def __call__(self, users, items):
        assert users.dtype == np.int64 and items.dtype == np.int64 and items.shape[0] == users.size
        self.calls.append((users.copy(), np.array(items)))
        return self.table[users[:, None], items]


def _merge_chisq(observed: dict, expected_p: dict, total: int) -> float:
    """Pearson chi-square p-value, cells with an expected count below 5 pooled into one."""
    assert sum(observed.values()) == total and set(observed) <= set(expected_p)  # nothing outside the support
    if any(observed.get(cell, 0) for cell, p in expected_p.items() if p == 0):
        return 0.0  # a draw where the law puts no mass
    expected_p = {cell: p for cell, p in expected_p.items() if p > 0}
    if len(expected_p) == 1:
        return 1.0  # one possible outcome, and every draw has it
    obs, exp = [], []
    rest_o = rest_e = 0.0
    for cell, p in expected_p.items():
        if p * total < 5:
            rest_o += observed.get(cell, 0)
            rest_e += p * total
        else:
            obs.append(observed.get(cell, 0))
            exp.append(p * total)
    if rest_e > 0:
        obs.append(rest_o)
        exp.append(rest_e)
    exp = np.array(exp) * total / np.sum(exp)
    return float(stats.chisquare(obs, exp).pvalue)


def test_fixed_design_against_brute_force():
    """Every call: the target in column 0 then n - 1 decoys from the row's pool other than the target; the
    rank is 1 + decoys scoring strictly higher (a decoy tying with the target does not count); the table's
    pool sizes, sizes and scorings are the design's."""
    users = np.array([0, 1, 2, 3, 0, 1, 4, 4])
    targets = np.array([4, 2, 5, 3, 0, 1, 6, 5])
    rec = Recorder()
    tab = sampled_ranks(rec, users, targets, exclude=EXCL, n_items=N, design="fixed", sample_size=3, rng=3)
    assert list(tab.columns) == ["user", "item", "rank", "sample_size", "n_items"]
    assert tab["user"].tolist() == users.tolist() and tab["item"].tolist() == targets.tolist()
    assert tab["n_items"].tolist() == [6, 7, 8, 8, 6, 7, 3, 3] and (tab["sample_size"] == 3).all()
    assert tab.attrs["scorings"] == 8 * 3 and tab.attrs["design"] == "fixed" and tab.attrs["replacement"] is True
    assert tab.attrs["call"] == ('sampled_ranks(score, users, targets, exclude=exclude, n_items=8, design="fixed", '
                                 'sample_size=3, rng=seed)')
    (cu, items), = rec.calls
    assert cu.tolist() == users.tolist() and (items[:, 0] == targets).all()
    for b, (u, t) in enumerate(zip(users, targets)):
        dec = items[b, 1:]
        assert set(dec) <= set(_pool(u)) - {t}
        assert tab["rank"][b] == 1 + sum(S[u, d] > S[u, t] for d in dec)
    # user 3 scores every item alike: every tie goes to the target
    assert tab["rank"][3] == 1


@pytest.mark.parametrize("u,t,allowed", [(0, 4, [0, 1, 2, 3, 5]), (4, 6, [5, 7]), (2, 0, [1, 2, 3, 4, 5, 6, 7])])
def test_decoys_are_uniform_over_the_pool(u, t, allowed):
    """Decoys with replacement, uniform over the pool minus the target (by rejection for users 0 and 2, by the
    position map for user 4, with no exclude at all for user 2), 20,000 rows, chi-square; repeated decoys
    occur (with replacement)."""
    rec = Recorder()
    M = 20_000
    excl = None if u == 2 else EXCL
    sampled_ranks(rec, np.full(M, u), np.full(M, t), exclude=excl, n_items=N, sample_size=3, rng=0)
    dec = np.concatenate([it[:, 1:].ravel() for _, it in rec.calls])
    counts = np.bincount(dec, minlength=N)
    assert counts[np.setdiff1d(np.arange(N), allowed)].sum() == 0
    assert stats.chisquare(counts[allowed]).pvalue > 1e-3
    it = np.concatenate([it[:, 1:] for _, it in rec.calls])
    assert np.any(np.sort(it, axis=1)[:, 1:] == np.sort(it, axis=1)[:, :-1])


@pytest.mark.parametrize("u,t", [(0, 4), (0, 0), (1, 3), (2, 2), (4, 6)])
def test_fixed_design_law_is_the_with_replacement_kernel(u, t):
    r"""Given the global rank R in the row's pool (brute force, ties to the target), the sampled rank's law is
    the binomial kernel P(r | R) at N_u (what estimate's default likelihood uses): chi-square over r, and an
    exact binomial test of P(r = 1) = (1 - theta)^(n - 1); the hypergeometric law (without replacement) is
    rejected where it differs."""
    pool = _pool(u)
    R, Nu, n, M = _brute_rank(u, t, pool), len(pool), 3, 20_000
    tab = sampled_ranks(Recorder(), np.full(M, u), np.full(M, t), exclude=EXCL, n_items=N, sample_size=n, rng=11)
    assert (tab["n_items"] == Nu).all()
    p = kernel_row(R, Nu, n, replacement=True)
    counts = np.bincount(tab["rank"], minlength=n + 1)[1:]
    observed = {r: int(c) for r, c in enumerate(counts, 1) if c}
    assert _merge_chisq(observed, dict(enumerate(p, 1)), M) > 1e-3
    theta = (R - 1) / (Nu - 1)
    assert stats.binomtest(int(counts[0]), M, (1 - theta) ** (n - 1)).pvalue > 1e-3
    q = kernel_row(R, Nu, n, replacement=False)
    if np.abs(p - q).max() > 0.02:
        assert _merge_chisq(observed, dict(enumerate(q, 1)), M) < 1e-6


def _adaptive_law(R, Nu, ladder):
    """Exact P(n_u, r_u) of TORS Algorithm 1 with replacement, given R."""
    theta = (R - 1) / (Nu - 1)
    out, cont = {}, 1.0
    for j, size in enumerate(ladder):
        draws = size - 1 if j == 0 else size // 2
        pm = stats.binom.pmf(np.arange(draws + 1), draws, theta)
        for x in range(1, draws + 1):
            out[(int(size), x + 1)] = cont * pm[x]
        if j == len(ladder) - 1:
            out[(int(size), 1)] = cont * pm[0]
        cont *= pm[0]
    return out


def test_adaptive_design_stopping_rule_sizes_and_law():
    """TORS Algorithm 1 on the model: n0 items; while the target ranks first, n_u extra decoys (n_u -> 2 n_u),
    up to n_max. Checked call by call (each stage's extra decoys, the target scored once), the stopping rule
    (rank 1 only at n_max, every size on the ladder), the rank by brute force over every item the row scored,
    scorings = sum of n_u, and the joint law of (n_u, r_u) against the exact one (chi-square)."""
    u, t = 2, 6  # R = 2 in a pool of 8: theta = 1/7
    M, n0, nmax = 6_000, 2, 8
    rec = Recorder()
    tab = sampled_ranks(rec, np.full(M, u), np.full(M, t), n_items=N, design="adaptive", initial_size=n0,
                        max_size=nmax, rng=5)
    ladder = [2, 4, 8]
    assert set(tab["sample_size"]) <= set(ladder)
    stopped_early = tab["sample_size"] < nmax
    assert (tab["rank"][stopped_early] > 1).all()
    assert tab.attrs["scorings"] == tab["sample_size"].sum()
    assert [it.shape[1] for _, it in rec.calls] == [2, 2, 4]  # n0 (target + 1 decoy), then n_u extra
    assert (rec.calls[0][1][:, 0] == t).all() and all((it != t).all() for _, it in rec.calls[1:])
    # brute force per row over everything it scored
    scored = {b: list(rec.calls[0][1][b, 1:]) for b in range(M)}
    active = np.arange(M)[np.array([sum(S[u, d] > S[u, t] for d in scored[b]) == 0 for b in range(M)])]
    for (_, it), size in zip(rec.calls[1:], ladder[1:]):
        assert it.shape[0] == active.size
        for row, dec in zip(active, it):
            scored[row] += list(dec)
        active = active[[sum(S[u, d] > S[u, t] for d in dec) == 0 for dec in it]]
    for b in range(0, M, 7):
        assert len(scored[b]) + 1 == tab["sample_size"][b]
        # the rank counts the decoys of the last stage only (all earlier ones rank below the target)
        assert tab["rank"][b] == 1 + sum(S[u, d] > S[u, t] for d in scored[b])
    law = _adaptive_law(2, 8, ladder)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    obs = tab.groupby(["sample_size", "rank"]).size()
    assert _merge_chisq({(int(a), int(b)): int(c) for (a, b), c in obs.items()}, law, M) > 1e-3


def test_full_design_is_exact_and_user_sampling_takes_whole_users():
    """Full ranking: the brute-force rank in the row's pool, sample_size = n_items = N_u, N scorings a row.
    With n_users: a uniform sample of that many distinct users, all their rows, ranks as in the full table."""
    users = np.array([0, 1, 2, 3, 0, 1, 2, 0, 4])
    targets = np.array([4, 2, 5, 3, 0, 1, 7, 5, 6])
    tab = sampled_ranks(Recorder(), users, targets, exclude=EXCL, n_items=N, design="full")
    want = [_brute_rank(u, t, _pool(u)) for u, t in zip(users, targets)]
    assert tab["rank"].tolist() == want and (tab["sample_size"] == tab["n_items"]).all()
    assert tab["n_items"].tolist() == [len(_pool(u)) for u in users] and tab.attrs["scorings"] == users.size * N
    # the metric of a full table is the plain mean: method "sampled"
    est = estimate_metrics(tab["rank"], tab["n_items"], tab["sample_size"], ["recall"], [2], ["sampled"])
    assert est["sampled"]["recall"][0] == pytest.approx(np.mean(np.array(want) <= 2))
    seen = set()
    for seed in range(80):
        sub = sampled_ranks(Recorder(), users, targets, exclude=EXCL, n_items=N, design="full", n_users=2, rng=seed)
        chosen = set(sub["user"])
        assert len(chosen) == 2 and sub.index.tolist() == np.flatnonzero(np.isin(users, list(chosen))).tolist()
        assert sub["rank"].tolist() == [want[i] for i in sub.index]
        assert sub.attrs["call"].endswith('design="full", n_users=2, rng=seed)')
        assert (sub["test_users"] == 5).all()  # the 5 distinct test users the 2 were drawn from
        seen.add(frozenset(chosen))
    assert "test_users" not in tab.columns  # every row: no user sample
    assert len(seen) == 10  # every pair of the 5 users turns up


def test_determinism_and_batches(monkeypatch):
    """The same seed gives the same table for every design, another seed another; batches of one row (a
    tiny BATCH_ENTRIES) still rank by brute force, and full ranking is unchanged by the batching."""
    rng = np.random.default_rng(0)
    M = 300
    users = rng.integers(0, 5, M)
    targets = np.array([rng.choice([j for j in _pool(u)]) for u in users])
    kw = dict(exclude=EXCL, n_items=N, sample_size=3, initial_size=2, max_size=2)
    for design in ("fixed", "adaptive", "full"):
        a = sampled_ranks(Recorder(), users, targets, design=design, rng=7, **kw)
        b = sampled_ranks(Recorder(), users, targets, design=design, rng=np.random.default_rng(7), **kw)
        pd.testing.assert_frame_equal(a, b)
        if design != "full":
            c = sampled_ranks(Recorder(), users, targets, design=design, rng=8, **kw)
            assert not a["rank"].equals(c["rank"])
    full = sampled_ranks(Recorder(), users, targets, design="full", **kw)
    monkeypatch.setattr(evaluation, "BATCH_ENTRIES", 5)
    rec = Recorder()
    small = sampled_ranks(rec, users, targets, design="fixed", rng=7, **kw)
    assert len(rec.calls) == M and all(it.shape == (1, 3) for _, it in rec.calls)
    for b, (_, it) in enumerate(rec.calls):
        assert small["rank"][b] == 1 + np.sum(S[users[b], it[0, 1:]] > S[users[b], targets[b]])
    pd.testing.assert_frame_equal(full, sampled_ranks(Recorder(), users, targets, design="full", **kw))


def test_tables_feed_the_estimators_and_the_adaptive_design_costs_less():
    """On a catalogue of 2,000 items and a model whose targets rank well: the fixed and adaptive tables go
    through estimate_metrics' MLE with per-user pools (the default, with-replacement likelihood), the
    adaptive design scores fewer items than full ranking, and the estimates land near the full truth."""
    rng = np.random.default_rng(1)
    Nb, M = 2000, 1500
    item_q = rng.standard_normal(Nb)
    targets = rng.integers(0, Nb, M)
    bonus = rng.exponential(2.5, M)  # a score: the item's quality, plus a bonus on the user's own target

    def score(users, items):
        return item_q[items] + bonus[users][:, None] * (items == targets[users][:, None])

    X = sp.random(M, Nb, density=0.01, random_state=2, format="csr")
    X = X - X.multiply(sp.csr_matrix((np.ones(M), (np.arange(M), targets)), shape=(M, Nb)))
    users = np.arange(M)
    full = sampled_ranks(score, users, targets, exclude=X, n_items=Nb, design="full")
    truth = np.array([np.mean(full["rank"] <= k) for k in (20, 50)])
    for design in ("fixed", "adaptive"):
        tab = sampled_ranks(score, users, targets, exclude=X, n_items=Nb, design=design, sample_size=200,
                            initial_size=50, max_size=800, rng=3)
        est = estimate_metrics(tab["rank"], tab["n_items"], tab["sample_size"], ["recall"], [20, 50], ["mle"])
        assert np.abs(est["mle"]["recall"] - truth).max() < 0.05
        assert tab.attrs["scorings"] < full.attrs["scorings"] / 5
        assert tab.attrs["seconds"] >= tab.attrs["score_seconds"] > 0


def test_design_call_names_each_design():
    assert design_call("adaptive", initial_size=100, max_size=3200, n_items=500) == (
        'sampled_ranks(score, users, targets, exclude=exclude, n_items=500, design="adaptive", initial_size=100, '
        'max_size=3200, rng=seed)')
    assert design_call("full", n_users=1068) == ('sampled_ranks(score, users, targets, exclude=exclude, n_items=N, '
                                                 'design="full", n_users=1068, rng=seed)')
    with pytest.raises(ValueError, match="design must be one of"):
        design_call("uniform")


def _bad(match, score=None, users=(0, 1, 2), targets=(1, 2, 3), **kw):
    kw = {"n_items": N, **kw}
    with pytest.raises(ValueError, match=match):
        sampled_ranks(Recorder() if score is None else score, np.asarray(users), np.asarray(targets), **kw)


def test_every_bad_input_is_refused_naming_the_argument_and_the_row():
    # the scorer
    _bad("score must be a function", score=3)
    _bad(r"score must return an array of shape \(len\(users\), k\) = \(3, 100\).*rows 0\.\.2",
         score=lambda u, i: np.zeros(i.shape[0]), sample_size=100, n_items=200)
    _bad(r"score returned NaN for row 1 \(user 1, item", score=lambda u, i: np.where(u[:, None] == 1, np.nan, 0.0)
         + np.zeros(i.shape), sample_size=3)
    _bad("score must return real numbers", score=lambda u, i: np.zeros(i.shape, dtype=complex), sample_size=3)
    _bad("score must return real numbers", score=lambda u, i: np.zeros(i.shape, dtype=bool), sample_size=3)
    # users and targets
    _bad(r"targets must lie in 0..n_items - 1 = 7, got 8 \(row 2\)", targets=(1, 2, 8))
    _bad(r"targets must be >= 0, got -1 \(row 1\)", targets=(1, -1, 2))
    _bad(r"users must be >= 0, got -2 \(row 0\)", users=(-2, 1, 2))
    _bad("users must hold integer ids", users=(0.0, 1.0, 2.0))
    _bad("targets must hold integer ids", targets=("a", "b", "c"))
    _bad("users must be a 1-d array", users=[[0, 1, 2]])
    _bad("users must not be empty", users=(), targets=())
    _bad(r"targets must have one item per row of users \(3 rows\), got 2", targets=(1, 2))
    # exclude
    _bad(r"exclude must not exclude a row's target: row 1 \(user 1\) has its target 0 excluded", targets=(1, 0, 3),
         exclude=EXCL, sample_size=3)
    _bad("exclude must be a scipy.sparse matrix", exclude=np.zeros((4, N)))
    _bad("exclude must have n_items = 8 columns", exclude=sp.csr_matrix((4, 9)))
    _bad(r"exclude must have a row for every user: it has 2 rows, users has 2 \(row 2\)", exclude=sp.csr_matrix((2, N)))
    full_row = sp.csr_matrix(np.r_[[np.ones(N)], np.zeros((3, N))])
    full_row[0, 1] = 0
    full_row.eliminate_zeros()
    _bad(r"pool needs the target and at least one other item: row 0 \(user 0\) has a pool of 1", exclude=full_row)
    # sizes against the pools
    _bad(r"sample_size must be <= every row's pool N_u .* row 0 \(user 0\) has N_u = 6, got sample_size = 7",
         exclude=EXCL, targets=(1, 2, 3), sample_size=7)
    _bad("sample_size must be >= 2", sample_size=1)
    _bad("sample_size must be <= 8", sample_size=9)
    _bad(r"max_size must be <= every row's pool N_u .* row 0 \(user 0\) has N_u = 6, got max_size = 8",
         exclude=EXCL, design="adaptive", initial_size=2, max_size=8)
    _bad("max_size must be initial_size", design="adaptive", initial_size=2, max_size=6)
    _bad("initial_size must be >= 2", design="adaptive", initial_size=1, max_size=4)
    # the rest
    _bad("design must be one of", design="uniform")
    _bad("n_items must be >= 2", n_items=1)
    _bad("n_items must be an integer", n_items=8.5)
    _bad(r"n_users must be <= 3", design="full", n_users=4)
    _bad("n_users must be >= 1", design="full", n_users=0)
    _bad("rng must be a non-negative integer seed", sample_size=3, rng=-1)
    _bad("rng must be None, a non-negative integer seed", sample_size=3, rng=1.5)


def test_the_table_is_the_file_estimate_reads(tmp_path, capsys):
    """Written as CSV, a table of one row per user goes through `estimate` as it is (the item column recognised
    and unused): the ranks, per-user sizes and pools read back are the table's."""
    from itemsampling.cli import main
    from itemsampling.inputs import read_rank_file

    users = np.arange(5)
    targets = np.array([4, 2, 5, 3, 6])
    tab = sampled_ranks(Recorder(), users, targets, exclude=EXCL, n_items=N, design="adaptive", initial_size=2,
                        max_size=2, rng=0)
    path = tmp_path / "ranks.csv"
    tab.to_csv(path, index=False)
    got = read_rank_file(str(path), None, None)
    (model,) = got.models
    assert got.ranks[model].tolist() == tab["rank"].tolist()
    assert np.broadcast_to(got.sizes[model], len(tab)).tolist() == tab["sample_size"].tolist()
    assert got.pools[model].tolist() == tab["n_items"].tolist() and got.n_items == tab["n_items"].max()
    assert main(["estimate", str(path), "--metric", "recall", "--k", "1", "--n-boot", "20"]) == 0
    assert "Recall@1" in capsys.readouterr().out


def test_a_user_sample_table_carries_its_test_users_to_estimate(tmp_path, capsys):
    """sampled_ranks(n_users=m) writes test_users (the distinct users sampled from); read back, `estimate
    --target test-users` gives every model intervals for all of them (the user sampling's error added: wider
    than for the m users alone, which a full ranking knows exactly), and says so in its header and JSON.
    A bad test_users column is refused naming the file, line and column."""
    import json

    from itemsampling.cli import estimate_table, main
    from itemsampling.inputs import InputError, read_rank_file

    g = np.random.default_rng(3)
    M, n_items = 400, 60
    users, targets = np.arange(M), g.integers(0, n_items, M)
    S2 = g.random((M, n_items))
    tab = sampled_ranks(lambda u, i: S2[u[:, None], i], users, targets, n_items=n_items, design="full", n_users=100,
                        rng=1)
    assert (tab["test_users"] == M).all() and len(tab) == 100
    path = tmp_path / "ranks.csv"
    tab.to_csv(path, index=False)
    table = read_rank_file(str(path), None, None)
    assert table.test_users == {"model": M}
    res = estimate_table(table, ["recall"], [10], target="test-users")
    row = res["estimates"][0]
    assert res["models"]["model"]["test_users"] == M and row["high"] - row["low"] > 0.05
    F = (tab["rank"].to_numpy() <= 10).astype(float)
    half = 1.959964 * F.std(ddof=1) * np.sqrt((1 - 100 / M) / 100)
    assert (row["high"] - row["low"]) / 2 == pytest.approx(half, rel=1e-4)
    assert main(["estimate", str(path), "--metric", "recall", "--k", "10", "--target", "test-users", "--quiet"]) == 0
    assert f"sampled from {M:,} test users (intervals for all of them)" in capsys.readouterr().out
    assert main(["estimate", str(path), "--metric", "recall", "--k", "10", "--json", "--quiet"]) == 0
    assert "test_users" not in json.loads(capsys.readouterr().out)["models"]["model"]  # population: not used
    for bad, msg in (("2.5", "is not an integer number of test users"), ("50", "has 100 users, more than the 50"),
                     ("x", "is not a number")):
        t2 = tab.copy()
        t2["test_users"] = t2["test_users"].astype(object)
        t2.iloc[3, t2.columns.get_loc("test_users")] = bad if bad == "x" or bad == "2.5" else int(bad)
        if bad == "50":
            t2["test_users"] = 50
        t2.to_csv(path, index=False)
        with pytest.raises(InputError, match=msg):
            read_rank_file(str(path), None, None)
    t2 = tab.copy()
    t2.iloc[7, t2.columns.get_loc("test_users")] = M + 1
    t2.to_csv(path, index=False)
    with pytest.raises(InputError, match=r"line 9, column 'test_users': gives 401 test users where an earlier row"):
        read_rank_file(str(path), None, None)
