"""Candidate-set sampling (Ihemelandu & Ekstrand 2023): decoy distributions (goodness of fit),
pools, evaluation against independent rankings, the popularity score, the truth experiment and
bad input."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from itemsampling.candidates import (CandidateSets, decoy_experiment, draw_candidates, draw_decoys,
                                     evaluate_candidates, gini_sweep, item_popularity, make_recommender, max_decoys,
                                     popularity_prone, popularity_ranks, popularity_score,
                                     split_holdout, target_ranks, truth_decoy_pools,
                                     truth_experiment)
from itemsampling.data import SimulationConfig, simulate
from itemsampling import models as M
from itemsampling.metrics import evaluate, topk_metric_values
from itemsampling.models import BPR, EASE, Popular, Random
from itemsampling.ranking import global_ranks

N_TOY = 12


@pytest.fixture(scope="module")
def toy_split():
    """4,000 users who all interacted with items 0 and 1 (one goes to train, one to test), so every
    user's decoy pool is items 2..11."""
    M = 4000
    df = pd.DataFrame({"user": np.repeat(np.arange(M), 2), "item": np.tile([0, 1], M)})
    df.attrs["n_items"] = N_TOY
    return split_holdout(df, 0.2, rng=0)


@pytest.fixture(scope="module")
def sim_split():
    sim = simulate(SimulationConfig(n_users=150, n_items=300, true_profile_mean=150, profile_median=20, seed=4))
    return sim, split_holdout(sim.observed, 0.2, rng=1)


POP = np.array([9.0, 9.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 0.0])  # items 2 and 11 never drawn


def test_popularity_decoys_first_draw_proportional(toy_split):
    dec = draw_decoys(toy_split, 3, "popularity", popularity=POP, rng=5)
    pool = np.arange(2, N_TOY)
    p = POP[pool] / POP[pool].sum()
    counts = np.bincount(dec[:, 0], minlength=N_TOY)[pool]
    keep = p > 0
    assert counts[~keep].sum() == 0
    chi = stats.chisquare(counts[keep], p[keep] * counts.sum())
    assert chi.pvalue > 1e-3
    # inclusion probability of a draw of two without replacement, exact by enumeration:
    # P(i in S) = p_i + sum_{j != i} p_j p_i / (1 - p_j)
    dec2 = draw_decoys(toy_split, 2, "popularity", popularity=POP, rng=6)
    pp = p[keep]
    incl = pp + np.array([sum(pp[j] * pp[i] / (1 - pp[j]) for j in range(pp.size) if j != i) for i in range(pp.size)])
    freq = np.bincount(dec2.ravel(), minlength=N_TOY)[pool][keep] / dec2.shape[0]
    se = np.sqrt(incl * (1 - incl) / dec2.shape[0])
    assert np.all(np.abs(freq - incl) < 5 * se)
    assert not np.allclose(incl, 2 * pp, atol=0.01)  # inclusion is not proportional: the test can tell


def test_uniform_decoys_uniform(toy_split):
    dec = draw_decoys(toy_split, 4, "uniform", rng=7)
    pool = np.arange(2, N_TOY)
    first = np.bincount(dec[:, 0], minlength=N_TOY)[pool]
    assert stats.chisquare(first).pvalue > 1e-3
    incl = np.bincount(dec.ravel(), minlength=N_TOY)[pool] / dec.shape[0]
    se = np.sqrt(0.4 * 0.6 / dec.shape[0])
    assert np.all(np.abs(incl - 4 / pool.size) < 5 * se)


@pytest.mark.parametrize("strategy", ["uniform", "popularity"])
def test_decoys_never_training_or_test_items_and_distinct(sim_split, strategy):
    _, split = sim_split
    dec = draw_decoys(split, 40, strategy, rng=8)
    assert dec.shape == (split.users.size, 40)
    seen = (split.train_matrix[split.users] + split.test_matrix[split.users]).toarray() > 0
    assert not np.any(np.take_along_axis(seen, dec, axis=1))
    assert all(np.unique(row).size == 40 for row in dec)
    if strategy == "popularity":
        assert np.all(item_popularity(split.train, split.n_items)[dec] > 0)
    # candidate masks: test items plus decoys; full = every non-training item
    cs = draw_candidates(split, strategy, 40, rng=8)
    np.testing.assert_array_equal(cs.decoys, dec)
    m = cs.mask(split)
    assert np.all(m.sum(axis=1) == 40 + np.diff(split.test_matrix[split.users].indptr))
    full = draw_candidates(split, "full").mask(split)
    np.testing.assert_array_equal(full, split.train_matrix[split.users].toarray() == 0)


class _ZeroOnce:
    """A generator whose first uniform block holds one 0 (where ``Generator.gumbel`` draws again)."""

    def __init__(self, seed):
        self.gen = np.random.default_rng(seed)
        self.bit_generator = self.gen.bit_generator
        self.first = True

    def random(self, out):
        self.gen.random(out=out)
        if self.first:
            out.flat[3] = 0.0
            self.first = False
        return out

    def gumbel(self, size):
        return self.gen.gumbel(size=size)


@pytest.mark.parametrize("strategy", ["uniform", "popularity"])
def test_decoys_are_the_full_gumbel_top_d_bit_for_bit(sim_split, toy_split, strategy, monkeypatch):
    """draw_decoys' threshold draw (_gumbel_top) returns the decoys of the reference that computes
    and partitions every user x item key, from the same generator: over several blocks, decoy sizes
    up to the whole pool, users that keep their whole pool, the exact-key path for near ties, and a
    block redrawn by the reference where a uniform is 0."""
    from itemsampling import candidates as C

    _, split = sim_split
    for sp_, kw in ((split, {}), (toy_split, {"popularity": POP} if strategy == "popularity" else {})):
        counts, logw, seen = C._pool_counts(sp_, strategy, kw.get("popularity"))
        for d in sorted(v for v in {1, 2, 40, int(counts.min()) // 2, int(counts.min())} if 1 <= v <= counts.min()):
            for block in (7, 256):
                ref = C._gumbel_top_reference(logw, seen, d, np.random.default_rng(d))
                got = C._gumbel_top(logw, seen, d, np.random.default_rng(d), block=block)
                assert np.array_equal(got, ref), (d, block)
        ref = C._gumbel_top_reference(logw, seen, 3, np.random.default_rng(9))
        assert np.array_equal(C._gumbel_top(logw, seen, 3, _ZeroOnce(9), block=5), ref)
    counts, logw, seen = C._pool_counts(split, strategy)
    d = 30
    ref = C._gumbel_top_reference(logw, seen, d, np.random.default_rng(4))
    with monkeypatch.context() as m:  # a threshold too high: users with too few candidates keep their pool
        m.setattr(C, "_CAND_SD", -4.0)
        m.setattr(C, "_CAND_ADD", 0.0)
        assert np.array_equal(C._gumbel_top(logw, seen, d, np.random.default_rng(4), block=50), ref)
    with monkeypatch.context() as m:  # every user through the exact keys
        m.setattr(C, "_NEAR_TIE", 10.0)
        assert np.array_equal(C._gumbel_top(logw, seen, d, np.random.default_rng(4), block=50), ref)
    # the exact keys are Generator.gumbel's, bit for bit
    x = np.random.default_rng(2).random(20_000)
    assert np.array_equal(C._exact_gumbel(x), np.random.default_rng(2).gumbel(size=20_000))
    # and draw_decoys is _gumbel_top
    np.testing.assert_array_equal(draw_decoys(split, 40, strategy, rng=8),
                                  C._gumbel_top_reference(logw, seen, 40, np.random.default_rng(8)))


def test_item_popularity_counts_distinct_users():
    df = pd.DataFrame({"user": [0, 0, 1, 2, 2], "item": [0, 1, 1, 1, 1]})
    df.attrs["n_items"] = 3
    np.testing.assert_array_equal(item_popularity(df), [1, 3, 0])  # user 2 twice counts once


@pytest.mark.parametrize("kwargs, match", [
    ({"n_decoys": 11, "strategy": "uniform"}, r"n_decoys must be <= 10, the smallest candidate pool"),
    ({"n_decoys": 9, "strategy": "popularity", "popularity": POP}, r"n_decoys must be <= 8"),
    ({"n_decoys": 0, "strategy": "uniform"}, "n_decoys"),
    ({"n_decoys": 2, "strategy": "popular"}, "strategy must be one of"),
    ({"n_decoys": 2, "strategy": "full"}, "strategy 'full'"),
    ({"n_decoys": 2, "strategy": "popularity", "popularity": -POP}, "popularity must be non-negative"),
    ({"n_decoys": 2, "strategy": "popularity", "popularity": np.zeros(N_TOY)}, "popularity must not be all zero"),
    ({"n_decoys": 2, "strategy": "popularity", "popularity": POP[:5]}, "popularity must have one weight per item"),
    ({"n_decoys": 2, "strategy": "popularity", "popularity": np.full(N_TOY, np.nan)}, "popularity must not contain NaN"),
    ({"n_decoys": 2, "strategy": "uniform", "popularity": POP}, "popularity is only used"),
])
def test_bad_input_names_the_argument(toy_split, kwargs, match):
    with pytest.raises(ValueError, match=match):
        draw_decoys(toy_split, rng=0, **kwargs)


def test_largest_pools_fit(toy_split):
    assert max_decoys(toy_split, "uniform") == 10
    assert max_decoys(toy_split, "popularity", popularity=POP) == 8
    # items 2..11 form the pool: 10 uniform decoys fit, and the 8 of positive popularity
    assert np.all(np.sort(draw_decoys(toy_split, 10, "uniform", rng=0), axis=1) == np.arange(2, 12))
    got = np.sort(draw_decoys(toy_split, 8, "popularity", popularity=POP, rng=0), axis=1)
    assert np.all(got == np.flatnonzero(POP[2:] > 0) + 2)


def test_draw_candidates_bad_input(toy_split):
    with pytest.raises(ValueError, match="n_decoys must be None"):
        draw_candidates(toy_split, "full", 5)
    with pytest.raises(ValueError, match="n_decoys"):
        draw_candidates(toy_split, "uniform")
    with pytest.raises(ValueError, match="strategy"):
        draw_candidates(toy_split, "random", 3)
    with pytest.raises(ValueError, match="split"):
        draw_decoys("data", 3)


def test_full_candidates_match_global_ranks_with_one_test_item():
    """One held-out item per user: the full candidate set's metrics are those of the global ranks
    among non-training items (itemsampling.ranking, an independent implementation)."""
    sim = simulate(SimulationConfig(n_users=120, n_items=200, true_profile_mean=100, profile_median=6, min_profile=4,
                                    seed=2))
    split = split_holdout(sim.observed, 0.001, rng=3)  # round(0.001 * size) -> at least 1
    assert split.test.groupby("user").size().max() == 1
    model = EASE(lam=50.0).fit(split.train, n_items=split.n_items, n_users=split.n_users)
    R = global_ranks(model, split.train, split.test, exclude_train=True, rng=0)
    res = evaluate_candidates(model, split, draw_candidates(split, "full"), k=10, metrics=("ndcg", "rr", "recall"),
                              rng=0).set_index("metric")["value"]
    assert res["ndcg"] == pytest.approx(evaluate(R, "ndcg", 10), abs=1e-12)
    assert res["recall"] == pytest.approx(evaluate(R, "recall", 10), abs=1e-12)
    assert res["rr"] == pytest.approx(evaluate(R, "rr", 10), abs=1e-12)


def test_sampled_candidates_against_brute_force(sim_split):
    _, split = sim_split
    model = EASE(lam=50.0).fit(split.train, n_items=split.n_items, n_users=split.n_users)
    cs = draw_candidates(split, "popularity", 30, rng=2)
    res = evaluate_candidates(model, split, cs, k=5, metrics=("ndcg", "precision"), rng=0).set_index("metric")["value"]
    S = model.score(split.users)
    m = cs.mask(split)
    nd, pr, tops = [], [], []
    for b, u in enumerate(split.users):
        cand = np.flatnonzero(m[b])
        ranked = cand[np.argsort(-S[b, cand], kind="stable")]
        rel = set(split.test_matrix[u].indices)
        gains = [1 / np.log2(i + 2) for i, it in enumerate(ranked[:5]) if it in rel]
        nd.append(sum(gains) / sum(1 / np.log2(i + 2) for i in range(min(len(rel), 5))))
        pr.append(len(gains) / 5)
        tops.append(ranked[:5])
    assert res["ndcg"] == pytest.approx(np.mean(nd), abs=1e-12)
    assert res["precision"] == pytest.approx(np.mean(pr), abs=1e-12)
    pop = item_popularity(split.train, split.n_items)
    assert res["popularity_score"] == pytest.approx(popularity_score(np.array(tops), pop), abs=1e-9)


def test_popularity_score_hand_computed():
    pop = [5, 1, 3, 3]
    np.testing.assert_array_equal(popularity_ranks(pop), [4, 1, 2.5, 2.5])
    assert popularity_score(np.array([[0, 1], [2, -1]]), pop) == pytest.approx(((4 + 1) / 2 + 2.5) / 2)
    assert popularity_score(np.array([[0, 1], [2, -1]]), pop, normalize=True) == pytest.approx(2.5 / 4)
    assert popularity_prone({"a": 3.0, "b": 1.0, "c": 2.5}, 2.0) == ["a", "c"]
    with pytest.raises(ValueError, match="lists"):
        popularity_score(np.array([[4]]), pop)
    with pytest.raises(ValueError, match="reference"):
        popularity_prone({"a": 1.0}, float("nan"))


def test_popularity_prone_margin_and_relative_rules():
    scores = {"a": 10.0, "b": 4.0, "c": 2.6, "d": 1.0}   # excess over the reference 2: 8, 2, 0.6, -1
    assert popularity_prone(scores, 2.0) == ["a", "b", "c"]
    assert popularity_prone(scores, 2.0, margin=1.0) == ["a", "b"]          # an excess above 1
    assert popularity_prone(scores, 2.0, margin=2.0) == ["a"]               # 2 is not above 2
    assert popularity_prone(scores, 2.0, relative=0.25) == ["a", "b"]       # at least 0.25 * 8 = 2
    assert popularity_prone(scores, 2.0, relative=0.3) == ["a"]
    assert popularity_prone(scores, 2.0, margin=0.5, relative=0.05) == ["a", "b", "c"]
    assert popularity_prone({"d": 1.0}, 2.0, relative=1.0) == []            # no excess, nothing prone
    with pytest.raises(ValueError, match="margin"):
        popularity_prone(scores, 2.0, margin=-1.0)
    with pytest.raises(ValueError, match="relative"):
        popularity_prone(scores, 2.0, relative=0.0)


def test_popular_is_popularity_prone_and_random_is_not(sim_split):
    _, split = sim_split
    ref = popularity_score(split.test.groupby("user")["item"].apply(lambda s: list(s)[:1]).explode()
                           .to_numpy(np.int64)[:, None], item_popularity(split.train, split.n_items))
    scores = {}
    for model in (Popular(), Random(rng=0)):
        model.fit(split.train, n_items=split.n_items, n_users=split.n_users)
        res = evaluate_candidates(model, split, draw_candidates(split, "full"), k=10, rng=0)
        scores[model.name] = float(res.loc[res.metric == "popularity_score", "value"].iloc[0])
    assert popularity_prone(scores, ref) == ["popular"]


def test_truth_experiment_oracle_best_and_bias_everywhere():
    cfg = SimulationConfig(n_users=120, n_items=250, true_profile_mean=120, profile_median=15, seed=3)
    models = ("random", "popular", "itemknn", "userknn", "als", "bpr", "ease", "oracle")
    df = truth_experiment(cfg, models=models, n_decoys=40, k=20, metrics=("ndcg", "rr"), n_repeats=2, rng=1)
    assert set(df["model"]) == set(models)
    assert set(df["candidates"]) == {"full", "uniform 40", "popularity 40"}
    assert len(df) == 2 * len(models) * 3 * 2
    assert np.all(np.isfinite(df[["M_obs", "M_truth", "bias"]].to_numpy()))
    np.testing.assert_allclose(df["bias"], df["M_obs"] - df["M_truth"], atol=1e-15)
    truth = df[df.candidates == "full"].groupby(["repeat", "metric", "model"])["M_truth"].first().unstack()
    assert (truth.idxmax(axis=1) == "oracle").all()
    assert np.allclose(truth["oracle"], 1.0)  # the Oracle's top-k lists hold only true preferences
    # repeats differ (a fresh simulation each), and the run is reproducible from its parameters
    assert df[df.repeat == 0]["M_obs"].to_numpy().tolist() != df[df.repeat == 1]["M_obs"].to_numpy().tolist()
    again = truth_experiment(cfg, models=("popular",), n_decoys=40, k=20, metrics=("ndcg",), n_repeats=1, rng=1)
    mine = df[(df.model == "popular") & (df.metric == "ndcg") & (df.repeat == 0)].reset_index(drop=True)
    np.testing.assert_allclose(again["M_obs"], mine["M_obs"], rtol=0, atol=0)


def test_decoy_experiment_shapes_and_reproducible(sim_split):
    sim, _ = sim_split
    a = decoy_experiment(sim.observed, models=("popular", "itemknn"), decoy_sizes=(10, 30), k=5, rng=2)
    b = decoy_experiment(sim.observed, models=("popular", "itemknn"), decoy_sizes=(10, 30), k=5, rng=2)
    pd.testing.assert_frame_equal(a, b)
    assert set(a["candidates"]) == {"full", "uniform 10", "uniform 30", "popularity 10", "popularity 30"}
    # more decoys can only push a test item down a candidate list
    v = a[(a.metric == "recall") & (a.model == "itemknn")].set_index("candidates")["value"]
    assert v["uniform 10"] >= v["uniform 30"] >= v["full"] - 1e-12
    with pytest.raises(ValueError, match="n_decoys must be <="):
        decoy_experiment(sim.observed, models=("popular",), decoy_sizes=(10_000,), rng=2)
    c = decoy_experiment(sim.observed, models=("popular",), decoy_sizes=(10, 10_000), k=5, rng=2, on_oversized="drop")
    assert c.attrs["dropped_sizes"] == {"uniform": [10_000], "popularity": [10_000]}
    assert set(c["candidates"]) == {"full", "uniform 10", "popularity 10"}
    _, split = sim_split
    assert 0 < c.attrs["max_decoys"]["popularity"] <= c.attrs["max_decoys"]["uniform"] < 300
    # the reference popularity score lies between the least and most popular items' ranks
    assert 1 < c.attrs["test_popularity_score"] < 300
    with pytest.raises(ValueError, match="on_oversized"):
        decoy_experiment(sim.observed, models=("popular",), decoy_sizes=(10,), rng=2, on_oversized="clip")
    with pytest.raises(ValueError, match="strategies"):
        decoy_experiment(sim.observed, models=("popular",), strategies=("full",), decoy_sizes=(10,), rng=2)


def test_make_recommender_and_bpr():
    with pytest.raises(ValueError, match="model must be one of"):
        make_recommender("svd")
    with pytest.raises(ValueError, match="truth"):
        make_recommender("oracle")
    sim = simulate(SimulationConfig(n_users=200, n_items=150, true_profile_mean=80, profile_median=20, seed=9))
    split = split_holdout(sim.observed, 0.2, rng=0)
    a = BPR(factors=8, iterations=30, rng=1).fit(split.train, n_items=150, n_users=200)
    b = BPR(factors=8, iterations=30, rng=1).fit(split.train, n_items=150, n_users=200)
    np.testing.assert_array_equal(a.item_factors_, b.item_factors_)
    items = np.tile(np.arange(5), (3, 1))
    np.testing.assert_allclose(a.score_items([0, 1, 2], items), a.score([0, 1, 2])[:, :5], rtol=1e-12)
    full = draw_candidates(split, "full")
    bpr = evaluate_candidates(a, split, full, rng=0).set_index("metric")["value"]["ndcg"]
    rnd = evaluate_candidates(Random(rng=0).fit(split.train, n_items=150, n_users=200), split, full,
                              rng=0).set_index("metric")["value"]["ndcg"]
    assert bpr > 1.5 * rnd
    with pytest.raises(ValueError, match="lr"):
        BPR(lr=0)


def test_evaluate_candidates_bad_input(sim_split):
    _, split = sim_split
    model = Popular().fit(split.train, n_items=split.n_items, n_users=split.n_users)
    with pytest.raises(ValueError, match="candidate_sets"):
        evaluate_candidates(model, split, [])
    with pytest.raises(ValueError, match="candidate_sets must be drawn"):
        evaluate_candidates(model, split, CandidateSets("full", None, split.users[:3], None))
    with pytest.raises(ValueError, match="metric"):
        evaluate_candidates(model, split, draw_candidates(split, "full"), metrics=("dcg",))
    with pytest.raises(ValueError, match="relevance"):
        evaluate_candidates(model, split, draw_candidates(split, "full"), relevance={"x": np.ones(3)})


@pytest.mark.parametrize("strategy", ["uniform", "popularity"])
def test_target_ranks_are_those_of_the_every_key_draw(strategy):
    """target_ranks' decoys (the threshold draw) are the every-key Gumbel draw's, from the same
    generator: the loop it replaced, written out here, gives the same global and sampled ranks."""
    from itemsampling.data import leave_last_out
    from itemsampling.ranking import _above_target_batches, _train_csr

    sim = simulate(SimulationConfig(n_users=500, n_items=1500, true_profile_mean=120, profile_median=15, seed=6))
    train, test = leave_last_out(sim.observed, rng=0)
    for model in (Popular().fit(train, n_items=1500, n_users=500), EASE(lam=50.0).fit(train, n_items=1500, n_users=500)):
        for n in (2, 30, 200):
            R, r = target_ranks(model, train, test, n, strategy, rng=11, batch_size=128)
            X = _train_csr(train, model.n_users_, 1500)
            w = item_popularity(train, 1500)
            logw = np.log(w, out=np.full(1500, -np.inf), where=w > 0) if strategy == "popularity" else np.zeros(1500)
            gen = np.random.default_rng(11)
            tu, ti = test["user"].to_numpy(), test["item"].to_numpy()
            R0, r0 = np.empty(tu.size, dtype=np.int64), np.empty(tu.size, dtype=np.int64)
            for s, b, t, blocked, above in _above_target_batches(model, X, tu, ti, 128, gen):
                R0[s:s + b.size] = 1 + above.sum(axis=1)
                keys = logw[None, :] + gen.gumbel(size=above.shape)
                keys[blocked] = -np.inf
                keys[b, t] = -np.inf
                dec = np.argpartition(-keys, n - 2, axis=1)[:, :n - 1]
                r0[s:s + b.size] = 1 + np.take_along_axis(above, dec, axis=1).sum(axis=1)
            assert np.array_equal(R, R0) and np.array_equal(r, r0), (model.name, n)


def test_target_ranks_uniform_follow_the_hypergeometric_kernel():
    from itemsampling.data import leave_last_out
    from itemsampling.ranking import pool_sizes

    sim = simulate(SimulationConfig(n_users=600, n_items=200, true_profile_mean=100, profile_median=10, seed=5))
    train, test = leave_last_out(sim.observed, rng=0)
    model = Popular().fit(train, n_items=200, n_users=600)
    R, r, P = target_ranks(model, train, test, 20, "uniform", rng=3, return_pool=True)
    # the pool is I minus the user's training items: N_u as ranking.pool_sizes, R in 1..N_u
    np.testing.assert_array_equal(P, pool_sizes(train, test, 200))
    assert P.min() < 200 and np.all((R >= 1) & (R <= P))
    # R has the distribution of ranking.global_ranks (training items excluded, random tie-breaks)
    R2 = global_ranks(model, train, test, exclude_train=True, rng=4)
    assert abs(R.mean() - R2.mean()) < 6 * np.sqrt(R.var() / R.size)
    # r - 1 | R ~ Hypergeometric(N_u - 1, R - 1, n - 1) with each user's own pool: mean and variance
    mean = 19 * (R - 1) / (P - 1)
    var = mean * (1 - (R - 1) / (P - 1)) * (P - 20) / (P - 2)
    z = ((r - 1) - mean).sum() / np.sqrt(var.sum())
    assert abs(z) < 5
    assert np.all((r >= 1) & (r <= 20) & (r <= R))
    # popularity-weighted decoys are more popular, so the target's sampled rank is worse
    _, rp = target_ranks(model, train, test, 20, "popularity", rng=3)
    assert rp.mean() > r.mean() + 3 * np.sqrt(r.var() / r.size)
    with pytest.raises(ValueError, match="sample_size"):
        target_ranks(model, train, test, int(P.min()) + 1, "uniform")
    target_ranks(model, train, test, int(P.min()), "uniform", rng=0)  # the largest size every pool allows
    with pytest.raises(ValueError, match="one row"):
        target_ranks(model, train, pd.concat([test, test]), 20, "uniform")
    with pytest.raises(ValueError, match="strategy"):
        target_ranks(model, train, test, 20, "full")
    with pytest.raises(ValueError, match="return_pool"):
        target_ranks(model, train, test, 20, "uniform", return_pool="yes")


class _TrainFirst(Random):
    """Scores every training item of the user above every other item; among the others, the target
    (item ``user % 7``) first, then items by decreasing id: without training items the target has
    rank 1 in any candidate set."""

    def __init__(self, train, n_items, n_users):
        super().__init__()
        self.fit(train, n_items=n_items, n_users=n_users)
        self._X = train

    def score(self, users):
        users = np.asarray(users)
        S = np.tile(np.arange(self.n_items_, dtype=np.float64), (users.size, 1))
        S[np.arange(users.size), users % 7] = self.n_items_ + 1.0
        tr = self._X[self._X["user"].isin(users)]
        row = {u: i for i, u in enumerate(users)}
        S[tr["user"].map(row).to_numpy(), tr["item"].to_numpy()] = 10.0 * self.n_items_
        return S


@pytest.mark.parametrize("strategy", ["uniform", "popularity"])
def test_target_ranks_never_rank_or_draw_training_items(strategy):
    """Training items are scored above everything and, with popularity decoys, carry almost all the
    popularity: one of them counted in R or drawn as a decoy would push the target below rank 1."""
    M, N = 300, 40
    g = np.random.default_rng(0)
    rows = []
    for u in range(M):
        t = u % 7
        others = np.setdiff1d(np.arange(7, N), [t])
        rows += [(u, int(i)) for i in g.choice(others, size=int(g.integers(3, 20)), replace=False)]
    train = pd.DataFrame(rows, columns=["user", "item"])
    test = pd.DataFrame({"user": np.arange(M), "item": np.arange(M) % 7})
    model = _TrainFirst(train, N, M)
    pop = np.ones(N)
    pop[7:] = 1e9  # the items users train on are by far the most popular
    kw = {"popularity": pop} if strategy == "popularity" else {}
    R, r, P = target_ranks(model, train, test, 15, strategy, rng=1, return_pool=True, **kw)
    assert np.all(R == 1) and np.all(r == 1)
    np.testing.assert_array_equal(P, N - train.groupby("user").size().reindex(range(M)).to_numpy())
    # the same model without the guarantee: a user's pool is too small for more decoys than it holds
    with pytest.raises(ValueError, match="sample_size"):
        target_ranks(model, train, test, int(P.min()) + 1, strategy, **kw)


def test_gini_sweep_orders_concentration():
    base = SimulationConfig(n_users=150, n_items=200, true_profile_mean=120, profile_median=15, seed=1)
    df = gini_sweep(base, [0.0, 1.0], models=("popular",), n_decoys=20, k=5, rng=0)
    g = df.groupby("zipf")["gini"].first()
    assert g[1.0] > g[0.0]
    assert set(df["candidates"]) == {"full", "uniform 20", "popularity 20"}
    with pytest.raises(ValueError, match="zipfs"):
        gini_sweep(base, [-1.0])


def test_popularity_ranks_match_scipy_average_ranks():
    p = np.random.default_rng(0).integers(0, 20, size=500).astype(float)
    np.testing.assert_allclose(popularity_ranks(p), stats.rankdata(p, method="average"), rtol=0, atol=0)


def test_top_lists_equal_a_full_sort_with_ties():
    """The partition-based top-k equals a full lexicographic sort by (-score, tie) on tied scores,
    short candidate sets and scores closer together than the jitter."""
    from itemsampling.candidates import _top_lists

    g = np.random.default_rng(0)
    for scores in (np.floor(g.random((60, 80)) * 4),                         # heavy ties
                   (g.random((60, 80)) < 0.3).astype(float),                  # 0/1, like the Oracle
                   1.0 + 1e-9 * g.integers(0, 5, size=(60, 80)),               # distinct values within the jitter
                   g.normal(size=(60, 80))):
        tie = g.random(scores.shape)
        allowed = g.random(scores.shape) < 0.5
        allowed[:5] = False
        allowed[:5, :3] = True  # five rows with only 3 candidates: the list is padded with -1
        for k in (1, 10, 50):
            got = _top_lists(scores, allowed, tie, k)
            for b in range(scores.shape[0]):
                cand = np.flatnonzero(allowed[b])
                order = cand[np.lexsort((tie[b, cand], -scores[b, cand]))][:k]
                want = np.full(k, -1)
                want[:order.size] = order
                np.testing.assert_array_equal(got[b], want)


def test_truth_experiment_same_for_every_n_jobs():
    cfg = SimulationConfig(n_users=80, n_items=200, true_profile_mean=100, profile_median=12, seed=2)
    kw = dict(models=("popular", "itemknn", "oracle"), n_decoys=30, k=10, metrics=("ndcg", "rr"), n_repeats=3, rng=5)
    a = truth_experiment(cfg, n_jobs=1, **kw)
    b = truth_experiment(cfg, n_jobs=2, **kw)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    with pytest.raises(ValueError, match="n_jobs"):
        truth_experiment(cfg, n_jobs=0, **kw)


def test_evaluate_candidates_per_user_values(sim_split):
    sim, split = sim_split
    model = Popular().fit(split.train, n_items=split.n_items, n_users=split.n_users)
    cs = [draw_candidates(split, "full"), draw_candidates(split, "uniform", 20, rng=3)]
    res = evaluate_candidates(model, split, cs, k=5, metrics=("recall",), rng=1, per_user=True)
    for c in cs:
        v = res.attrs["per_user"][(c.label, "obs", "recall")]
        assert v.shape == (split.users.size,)
        got = res[(res.candidates == c.label) & (res.metric == "recall")]["value"].iloc[0]
        assert got == pytest.approx(np.nanmean(v), rel=1e-12)


# --- Chapter 11's coverage study (issue 31, part 4) and the memory-budget swap of chapters 9-11 -------------
def _coverage_cases():
    """Two synthetic 'models' on N = 120 items and 150 users: the items above each target (skewed to the
    popular items, as a recommender's are), the target itself excluded, and the exact NDCG@10 of R."""
    from itemsampling.metrics import evaluate

    g = np.random.default_rng(0)
    M, NN = 150, 120
    w = 1.0 / np.arange(1, NN + 1)
    cases = {}
    for name, scale in (("good", 0.1), ("weak", 0.5)):
        excluded = np.zeros((M, NN), dtype=bool)
        excluded[np.arange(M), g.integers(0, NN, M)] = True
        above = (g.random((M, NN)) < g.random((M, 1)) * scale * (w / w.max()) ** 0.3) & ~excluded
        cases[name] = (above, excluded, NN, evaluate(1 + above.sum(axis=1), "ndcg", 10))
    return cases, w


def _chapter_loop(cases, w, d, reps, n_boot, seed):
    """The loop chapter 11 ran before the port, verbatim: for model i and repeat rep a new sample of users
    and decoys from default_rng([seed, 5, i, rep]), the bootstrap from default_rng([seed, 6, i, rep])."""
    from itemsampling.candidates import draw_weighted_decoys
    from itemsampling.estimators import estimate_metric_weighted
    from itemsampling.estimators.weighted import weighted_bounds

    out = {}
    for i, (m, (above, excluded, NN, exact)) in enumerate(cases.items()):
        rows = []
        for rep in range(reps):
            g_ = np.random.default_rng([seed, 5, i, rep])
            idx = g_.integers(0, above.shape[0], size=above.shape[0])
            p, a = draw_weighted_decoys(above[idx], excluded[idx], w, d, rng=g_)
            e = estimate_metric_weighted(p, a, NN, "ndcg", 10, ci=0.95, n_boot=n_boot,
                                         rng=np.random.default_rng([seed, 6, i, rep]), interval="bootstrap")
            b = weighted_bounds(p, a, NN, "ndcg", 10, ci=0.95)
            rows.append((e.estimate, e.low, e.high, b.low["ndcg"], b.high["ndcg"]))
        out[m] = np.array(rows)
    return out


def test_weighted_coverage_is_the_chapter_loop_here_in_workers_and_on_a_local_cluster(monkeypatch):
    from distributed import LocalCluster

    from itemsampling._parallel import SCHEDULER_ENV
    from itemsampling.candidates import COVERAGE_COLUMNS, weighted_coverage

    monkeypatch.delenv(SCHEDULER_ENV, raising=False)
    cases, w = _coverage_cases()
    kw = dict(n_decoys=12, metric="ndcg", k=10, n_repeats=4, n_boot=20, rng=3)
    loop = _chapter_loop(cases, w, 12, 4, 20, 3)
    local = weighted_coverage(cases, w, **kw)
    assert list(local.table.index) == ["good", "weak"] and list(local.table.columns) == list(COVERAGE_COLUMNS)
    for m, (_, _, _, exact) in cases.items():
        np.testing.assert_array_equal(local.estimates[m], loop[m][:, 0])
        np.testing.assert_array_equal(local.low[m], loop[m][:, 1])
        np.testing.assert_array_equal(local.high[m], loop[m][:, 2])
        hits = (loop[m][:, 1] <= exact) & (exact <= loop[m][:, 2])
        np.testing.assert_array_equal(local.hits[m], hits)
        # the identification bounds of the same draws (the default interval below the rule)
        np.testing.assert_array_equal(local.bounds_low[m], loop[m][:, 3])
        np.testing.assert_array_equal(local.bounds_high[m], loop[m][:, 4])
        np.testing.assert_array_equal(local.bounds_hits[m], (loop[m][:, 3] <= exact) & (exact <= loop[m][:, 4]))
        row = local.table.loc[m]
        h, c = int(hits.sum()), hits.mean()
        assert row["coverage"] == c and row["MC s.e."] == pytest.approx(np.sqrt(c * (1 - c) / 4), abs=1e-15)
        # the one-sided 95% Clopper-Pearson bound: P(at least h hits | coverage = bound) = 0.05
        if h > 0:
            assert stats.binom.sf(h - 1, 4, row["lowest coverage compatible"]) == pytest.approx(0.05, rel=1e-9)
        else:
            assert row["lowest coverage compatible"] == 0.0
        sd = np.std(loop[m][:, 0], ddof=1)
        assert row["exact"] == exact and row["s.d. of estimates"] == pytest.approx(sd, rel=1e-12)
        assert row["bias %"] == pytest.approx(100 * (loop[m][:, 0].mean() / exact - 1), rel=1e-12)
        assert row["width / (2 z s.d.)"] == pytest.approx(
            (loop[m][:, 2] - loop[m][:, 1]).mean() / (2 * stats.norm.ppf(0.975) * sd), rel=1e-12)
    # identical in two joblib workers and on a Dask cluster of two workers (the runner's --scheduler)
    two = weighted_coverage(cases, w, n_jobs=2, **kw)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=None) as cluster:
        monkeypatch.setenv(SCHEDULER_ENV, cluster.scheduler_address)
        remote = weighted_coverage(cases, w, **kw)
    for other in (two, remote):
        for m in cases:
            for field in ("estimates", "low", "high", "hits", "bounds_low", "bounds_high", "bounds_hits"):
                np.testing.assert_array_equal(getattr(other, field)[m], getattr(local, field)[m])
        pd.testing.assert_frame_equal(other.table, local.table, check_exact=True)


@pytest.mark.parametrize("change, match", [
    ({"cases": {}}, "^cases must be a non-empty dict"),
    ({"n_repeats": 1}, r"^n_repeats must be .*>= 2|^n_repeats must be"),
    ({"rng": -1}, "^rng"),
    ({"rng": 1.5}, "^rng"),
    ({"confidence": 1.0}, "^confidence"),
    ({"n_jobs": 0}, "^n_jobs must be >= 1 or -1"),
    ({"popularity": np.ones(5)}, "^popularity must hold 120 non-negative finite weights"),
])
def test_weighted_coverage_bad_input_names_the_argument(change, match):
    from itemsampling.candidates import weighted_coverage

    cases, w = _coverage_cases()
    kw = dict(cases=cases, popularity=w, n_decoys=5, metric="ndcg", k=10, n_repeats=2, n_boot=5, rng=0)
    with pytest.raises(ValueError, match=match):
        weighted_coverage(**{**kw, **change})
    above, excluded, NN, exact = cases["good"]
    with pytest.raises(ValueError, match="above and excluded must be boolean"):
        weighted_coverage(**{**kw, "cases": {"good": (above, excluded[:, :5], NN, exact)}})


def test_replace_models_follows_the_memory_budget(monkeypatch):
    """The rule compares each model's item-item state (the request its fit checks) with the budget: EASE's one
    N x N matrix and a block of its columns, the dense ItemKNN's four matrices (chapter 9's Y, no neighbourhood),
    the chapters' ItemKNN (k = 50) a sparse top-k similarity and one block of rows, which shrinks with the budget."""
    from itemsampling.candidates import dense_matrix_bytes, item_matrix_bytes, replace_models
    from itemsampling.experiments import MODEL_SPECS
    from itemsampling.models import EASE, ItemKNN

    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(2**34))
    # EASE keeps one dense N x N float64 matrix, ItemKNN without a neighbourhood four, with one none
    assert dense_matrix_bytes("ease", 1000) == 8e6 and dense_matrix_bytes("itemknn", 1000) == 0
    assert dense_matrix_bytes("Y", 1000, MODEL_SPECS) == 32e6  # chapter 9's names: Y is an ItemKNN without a cut
    assert dense_matrix_bytes("als", 1000) == 0 == dense_matrix_bytes("userknn", 1000)
    ease = 8e6 + 24 * 1000 * 63  # and 63 = ceil(1000 / 16) columns of the Gram matrix at 24 bytes a cell
    assert item_matrix_bytes("ease", 1000) == ease == EASE().item_matrix_bytes(1000)
    assert item_matrix_bytes("Y", 1000, MODEL_SPECS) == 32e6
    assert item_matrix_bytes("itemknn", 1000) == 64 * 1000 * 1000 + 48 * 1000 * 50  # all 1,000 rows in one block
    assert item_matrix_bytes("als", 1000) == 0 == item_matrix_bytes("userknn", 1000) == item_matrix_bytes("oracle", 9)
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(30_000_000))
    assert item_matrix_bytes("itemknn", 1000) == 64 * 1000 * 117 + 48 * 1000 * 50  # 7.5 MB of block: 117 rows
    assert replace_models(["ease", "als", "Y"], 1000, MODEL_SPECS) == (["ease", "als", "userknn"], {"Y": "userknn"})
    assert replace_models(["ease", "als", "itemknn"], 1000) == (["ease", "als", "itemknn"], {})
    # the budget is inclusive: EASE's request fits a budget of its own size
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(int(ease)))
    assert replace_models(["ease"], 1000) == (["ease"], {})
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(int(ease) - 1))
    assert replace_models(["ease"], 1000) == (["userknn"], {"ease": "userknn"})
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(9_000_000))
    # UserKNN once: a second model beyond the budget, or one beside UserKNN, is left out; the sparse ItemKNN fits
    assert replace_models(["ease", "popular", "Y", "itemknn"], 1000, MODEL_SPECS) == (
        ["userknn", "popular", "itemknn"], {"ease": "userknn", "Y": None})
    assert replace_models(["userknn", "ease"], 1000, MODEL_SPECS) == (["userknn"], {"ease": None})
    assert replace_models(["als", "popular"], 10**6) == (["als", "popular"], {})
    # the sparse ItemKNN too is replaced where even its smallest block and its kept entries exceed the budget
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(2_000_000))
    assert ItemKNN(k=50).item_matrix_bytes(1000) == 64 * 1000 * 7 + 48 * 1000 * 50 > 2_000_000
    assert replace_models(["itemknn", "popular"], 1000) == (["userknn", "popular"], {"itemknn": "userknn"})
    with pytest.raises(ValueError, match="^model must be one of"):
        replace_models(["nope"], 1000)
    with pytest.raises(ValueError, match="^substitute must be a model without an item-item matrix"):
        replace_models(["als"], 1000, substitute="ease")
    with pytest.raises(ValueError, match="^substitute must be a model without an item-item matrix"):
        replace_models(["als"], 1000, substitute="itemknn")
    with pytest.raises(ValueError, match="^n_items must be"):
        replace_models(["als"], 0)


def test_decoy_experiments_are_the_same_runs_in_workers():
    from itemsampling.candidates import decoy_experiments

    sim = simulate(SimulationConfig(n_users=120, n_items=150, true_profile_mean=60, profile_median=10, seed=5))
    kw = dict(models=("popular", "itemknn", "als"), decoy_sizes=(10, 30), k=10, metrics=("ndcg",))
    one = [decoy_experiment(sim.observed, rng=r, **kw) for r in (3, 4)]
    for n_jobs in (1, 2):
        runs = decoy_experiments(sim.observed, [3, 4], n_jobs=n_jobs, **kw)
        for a, b in zip(runs, one):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
            assert a.attrs["test_popularity_score"] == b.attrs["test_popularity_score"]
            assert a.attrs["dropped_sizes"] == b.attrs["dropped_sizes"]
    assert not one[0]["value"].equals(one[1]["value"])  # two seeds, two different runs
    with pytest.raises(ValueError, match="^decoy_experiments takes the seeds in rngs"):
        decoy_experiments(sim.observed, [3], rng=1, **kw)
    with pytest.raises(ValueError, match="^rngs must be"):
        decoy_experiments(sim.observed, [-1], **kw)


def test_truth_decoy_pools_are_the_largest_sizes_truth_experiment_accepts():
    """Each repeat's pools are those of truth_experiment's own simulation and split (same config, fraction and
    seed): its smaller pool runs, one decoy more is refused, naming the popularity pool when that is the smaller."""
    cfg = SimulationConfig(n_users=25, n_items=600, true_profile_mean=60, profile_median=8, seed=5)
    pools = truth_decoy_pools(cfg, fraction=0.2, n_repeats=2, rng=3)
    assert list(pools.columns) == ["repeat", "uniform", "popularity"] and pools["repeat"].tolist() == [0, 1]
    assert (pools["popularity"] < pools["uniform"]).all()  # 25 users leave many items without training popularity
    assert (pools["uniform"] < 600).all() and (pools["popularity"] >= 1).all()
    smallest = int(pools["popularity"].min())
    kw = dict(models=("popular",), k=5, metrics=("ndcg",), fraction=0.2, n_repeats=2, rng=3)
    df = truth_experiment(cfg, n_decoys=smallest, **kw)
    assert set(df["candidates"]) == {"full", f"uniform {smallest}", f"popularity {smallest}"}
    with pytest.raises(ValueError, match=f"n_decoys must be <= {smallest}, .*positive popularity"):
        truth_experiment(cfg, n_decoys=smallest + 1, **kw)
    # the same pools in worker processes
    assert truth_decoy_pools(cfg, fraction=0.2, n_repeats=2, rng=3, n_jobs=2).equals(pools)
    with pytest.raises(ValueError, match="n_repeats"):
        truth_decoy_pools(cfg, n_repeats=0)


def test_replace_models_above_max_items_and_its_sentence(monkeypatch):
    """Models with a dense item-item matrix (EASE, ItemKNN without a neighbourhood) are replaced above max_items (or
    beyond the memory budget); the others, the sparse ItemKNN among them, are kept whatever N; the sentence names the
    bytes, what they hold and the reason."""
    from itemsampling.candidates import replace_models, replacement_text
    from itemsampling.experiments import MODEL_SPECS

    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(2**34))
    models = ["ease", "als", "itemknn", "popular"]
    assert replace_models(models, 1000, max_items=1000) == (models, {})
    kept, swaps = replace_models(models, 1001, max_items=1000)
    assert kept == ["userknn", "als", "itemknn", "popular"] and swaps == {"ease": "userknn"}
    assert replace_models(models, 1001) == (models, {})  # no max_items: only the memory budget counts
    assert replace_models(models, 10**6, max_items=1000) == (["userknn", "als", "itemknn", "popular"], swaps)
    text = replacement_text(swaps, 1001, max_items=1000)
    assert text == ("At this catalogue size (*N* = 1,001) ease needs 10 MB for one dense *N* × *N* matrix and a block "
                    "of its columns, and *N* is above the 1,000 items (`dense_max_items`) up to which the chapters fit "
                    "a model with a dense item-item matrix (one such matrix is 8 MB there, and EASE factorises and "
                    "inverts it, in a time that grows as *N*³), and is replaced by userknn (the rule of chapter 8's "
                    "TORS-shaped catalogues).")
    kept, swaps = replace_models(["ease", "Y", "Z", "als"], 1001, MODEL_SPECS, max_items=1000)
    assert kept == ["userknn", "Z", "als"] and swaps == {"ease": "userknn", "Y": None}  # Z: ItemKNN with k' = 10
    text = replacement_text(swaps, 1001, MODEL_SPECS, max_items=1000)
    assert "replaced by userknn; Y needs 32 MB for 4 dense *N* × *N* matrices, and *N* is above the 1,000" in text
    assert text.endswith("and is left out (the rule of chapter 8's TORS-shaped catalogues).")
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(2_000_000))
    text = replacement_text({"itemknn": "userknn"}, 1000, max_items=1000)
    assert text == ("At this catalogue size (*N* = 1,000) itemknn needs 3 MB for a sparse top-*k* similarity and a "
                    "block of its rows, more than the memory budget of 2 MB, and is replaced by userknn (the rule of "
                    "chapter 8's TORS-shaped catalogues).")
    assert replacement_text({}, 1001, max_items=1000) == ""
    with pytest.raises(ValueError, match="max_items"):
        replace_models(models, 10, max_items=0)


def test_truth_repeats_rule():
    """100 simulations unless item-kNN (dense N x N matrices) runs on more than 7,000 items; then 100 (7,000/N)^2,
    rounded up, at least 20."""
    from itemsampling.candidates import truth_repeats_rule

    five = ["random", "popular", "itemknn", "als", "oracle"]
    assert truth_repeats_rule(3706, five) == truth_repeats_rule(7000, five) == 100
    assert truth_repeats_rule(16_980, five, repeats=10) == 10  # never more than asked
    assert truth_repeats_rule(9000, five) == 61  # ceil(60.49)
    assert truth_repeats_rule(16_980, five) == 20  # ceil(17.0) raised to 20
    assert truth_repeats_rule(16_980, ["random", "popular", "userknn", "als", "oracle"]) == 100  # no dense model
    assert truth_repeats_rule(9000, five, repeats=30) == 20 and truth_repeats_rule(9000, "ease") == 61
    with pytest.raises(ValueError, match="model"):
        truth_repeats_rule(9000, ["nope"])


def _per_user_before(model, split, csets, rels, k, metrics, gen, batch_size):
    """Per-user values of the candidate-set evaluation as the package computed them before (version 0.x):
    each batch gathers the candidates' scores by fancy indexing, counts the relevant candidates per model and
    partitions a copy of the jittered keys. Returns ``{(label, relevance, metric): array}``."""
    n_u = split.users.size
    dense = {r: mat[split.users].toarray() > 0 for r, mat in rels.items()}

    def top_lists(S, allowed, tie):
        b = S.shape[0]
        kk = min(k, S.shape[1])
        scale = np.max(np.abs(np.where(allowed, S, 0.0)), axis=1, keepdims=True)
        delta = np.where(scale > 0, 1e-7 * scale, 1.0)
        key = np.where(allowed, S + delta * tie, -np.inf)
        q = np.partition(key, S.shape[1] - kk, axis=1)[:, S.shape[1] - kk][:, None]
        rows, cols = np.nonzero(allowed & (S >= q - 2 * delta))
        o = np.lexsort((tie[rows, cols], -S[rows, cols], rows))
        rows, cols = rows[o], cols[o]
        pos = np.arange(rows.size) - np.searchsorted(rows, np.arange(b))[rows]
        out = np.full((b, k), -1, dtype=np.int64)
        out[rows[pos < kk], pos[pos < kk]] = cols[pos < kk]
        return out

    cands = {}
    for c in csets:
        if c.strategy == "full":
            cands[c.label] = c.mask(split)
        else:
            T = split.test_matrix[c.users]
            t = int(np.diff(T.indptr).max())
            ids = np.full((n_u, t + c.n_decoys), -1)
            for b in range(n_u):
                h = T.indices[T.indptr[b]:T.indptr[b + 1]]
                ids[b, :h.size] = h
            ids[:, t:] = c.decoys
            cands[c.label] = ids
    per = {(c.label, r, m): np.full(n_u, np.nan) for c in csets for r in dense for m in metrics}
    for s in range(0, n_u, batch_size):
        rows = slice(s, s + batch_size)
        S = model.score(split.users[rows])
        tie = gen.random(S.shape)
        bidx = np.arange(S.shape[0])[:, None]
        for c in csets:
            cand = cands[c.label][rows]
            if c.strategy == "full":
                allowed = cand
                L = top_lists(S, allowed, tie)
            else:
                allowed = cand >= 0
                cz = np.where(allowed, cand, 0)
                pos = top_lists(S[bidx, cz], allowed, tie[bidx, cz])
                L = np.where(pos >= 0, cz[bidx, np.maximum(pos, 0)], -1)
            valid = L >= 0
            Lz = np.where(valid, L, 0)
            for r, rel in dense.items():
                relb = rel[rows]
                n_rel = (relb & allowed).sum(axis=1) if c.strategy == "full" else (relb[bidx, cz] & allowed).sum(axis=1)
                ok = n_rel > 0
                hits = (relb[bidx, Lz] & valid)[ok]
                for m in metrics:
                    v = per[(c.label, r, m)][rows]
                    v[ok] = topk_metric_values(hits, n_rel[ok], m)
    return per


@pytest.mark.parametrize("model_name", ["random", "popular", "itemknn", "oracle"])
def test_evaluation_equals_the_previous_implementation(sim_split, model_name):
    """The evaluation of chapter 10's simulations (candidate ids, masks and relevant counts prepared once, scores
    gathered from the flat array, keys partitioned in place) gives the previous implementation's per-user values
    bit for bit: full, uniform and popularity-weighted sets, two relevances, batches of 64 users (the last one
    short), ties (Popular, Oracle) and item-kNN's scores."""
    from itemsampling.candidates import make_recommender

    sim, split = sim_split
    model = make_recommender(model_name, truth=sim.truth, rng=0).fit(split.train, n_items=split.n_items,
                                                                     n_users=split.n_users)
    csets = [draw_candidates(split, "full"), draw_candidates(split, "uniform", 40, rng=1),
             draw_candidates(split, "popularity", 40, rng=2)]
    rels = {"obs": split.test_matrix, "truth": sim.truth}
    metrics = ("ndcg", "rr", "precision", "recall")
    res = evaluate_candidates(model, split, csets, k=10, metrics=metrics, relevance=rels, rng=np.random.default_rng(7),
                              batch_size=64, per_user=True)
    truth = M.interaction_matrix(sim.truth, int(sim.truth['user'].max()) + 1, split.n_items)[:split.n_users]
    # a second model from the same seed: Random draws its scores at every call
    model = make_recommender(model_name, truth=sim.truth, rng=0).fit(split.train, n_items=split.n_items,
                                                                     n_users=split.n_users)
    before = _per_user_before(model, split, csets, {"obs": split.test_matrix, "truth": truth - truth.multiply(
        split.train_matrix)}, 10, metrics, np.random.default_rng(7), 64)
    assert split.users.size % 64 and before.keys() == res.attrs["per_user"].keys()
    for key, v in before.items():
        np.testing.assert_array_equal(res.attrs["per_user"][key], v, err_msg=str(key))
    assert np.isfinite(before[("full", "truth", "ndcg")]).sum() > 100
