"""Tests of itemsampling.experiments: cached global ranks and the resumable runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from itemsampling import experiments as E
from itemsampling.metrics import evaluate
from itemsampling.ranking import global_ranks
from itemsampling.sampling import sampled_metric_moments

DS = "sim-ml100k"
NAMES = ["X", "Z", "popular"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ITEMSAMPLING_CACHE", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="module")
def gr(cache):
    return E.load_global_ranks(DS, NAMES, progress=False)


def test_load_global_ranks_matches_direct_computation(gr, cache):
    assert list(gr) == NAMES and len(gr) == 3
    assert gr.n_items == 1682 and gr.n_users == 943
    train, test = E.load_split(DS, 0)
    assert np.array_equal(gr.users, test.user.to_numpy()) and np.array_equal(gr.test_items, test.item.to_numpy())
    for name in NAMES:
        model = E.make_model(name, 0, DS).fit(train)
        R, P = global_ranks(model, train, test, rng=np.random.default_rng(E._model_seed(0, "ties-" + name)),
                            return_pool=True)
        assert np.array_equal(gr[name], R)
        assert np.array_equal(gr.pool_sizes, P)
        assert np.all((1 <= R) & (R <= P) & (P <= gr.n_items))
    # popularity beats chance (rank median well below the middle of the pool)
    assert np.median(gr["popular"] / gr.pool_sizes) < 0.25


def test_second_call_is_cached(gr, cache):
    files = sorted((cache / "ranks" / DS).glob("*.npz"))
    assert len(files) == 3
    again = E.load_global_ranks(DS, ["Z", "X"], progress=False)  # a subset, another order
    assert list(again) == ["Z", "X"]
    assert np.array_equal(again["X"], gr["X"])
    stamp = [f.stat().st_mtime_ns for f in files]
    E.load_global_ranks(DS, NAMES, progress=False)
    assert [f.stat().st_mtime_ns for f in files] == stamp  # nothing recomputed
    # exclude_train=False is a different cache entry, with ranks among all N items
    full = E.load_global_ranks(DS, ["popular"], exclude_train=False, progress=False)
    assert np.all(full.pool_sizes == 1682)
    assert np.all(full["popular"] >= 1) and full["popular"].max() <= 1682


def test_bad_arguments(cache):
    with pytest.raises(ValueError, match="dataset must be one of"):
        E.load_global_ranks("ml-1m")
    with pytest.raises(ValueError, match="unknown model"):
        E.load_global_ranks(DS, ["svd"])
    with pytest.raises(ValueError, match="rng"):
        E.load_global_ranks(DS, ["popular"], rng=-1)
    with pytest.raises(ValueError, match="oracle"):
        E.make_model("oracle", 0, None)


def test_default_model_set():
    assert E.DEFAULT_MODELS == ("itemknn", "userknn", "ease", "als", "popular", "X", "Y", "Z")
    assert E.MODEL_SPECS["X"] == ("ALS", {"factors": 16, "lam": 10.0, "alpha": 0.2, "iterations": 15})
    assert E.MODEL_SPECS["Y"] == ("ItemKNN", {"q": 3.0})
    assert E.MODEL_SPECS["Z"] == ("ItemKNN", {"q": 1.0, "k_prime": 10})


def test_runner_agrees_with_exact_moments(gr, tmp_path):
    """Monte Carlo mean of the sampled metric over repeats vs its exact expectation (catalog pool):
    within 4 standard errors. With per-user pools the expectation is the pool-size-weighted mix of
    the kernels with N_u; smaller pools make a decoy likelier to outrank the target, so Recall drops."""
    reps = 60
    res = E.run_experiment(gr, sample_sizes=(50,), n_repeats=reps, pool="catalog", cache=tmp_path / "a",
                           progress=False)
    s = res.summary().set_index(["model", "metric"])
    for name in NAMES:
        for metric, k in (("recall", 10), ("ndcg", 10), ("auc", None)):
            mean, sd = sampled_metric_moments(gr[name], gr.n_items, 50, metric, k)
            label = metric if k is None else f"{metric}@{k}"
            got = s.loc[(name, label), "mean"]
            assert abs(got - mean) < 4 * sd / np.sqrt(reps) + 1e-12
            assert s.loc[(name, label), "std"] == pytest.approx(sd, rel=0.35)
            assert s.loc[(name, label), "exact"] == pytest.approx(evaluate(gr[name], metric, k, gr.n_items))
    user = E.run_experiment(gr, sample_sizes=(50,), n_repeats=reps, pool="user", cache=False, progress=False)
    su = user.summary().set_index(["model", "metric"])
    for name in NAMES:
        R, P = gr[name], gr.pool_sizes
        exp_user = sum(sampled_metric_moments(R[P == N_u], int(N_u), 50, "recall", 10)[0] * np.sum(P == N_u)
                       for N_u in np.unique(P)) / R.size
        sd = s.loc[(name, "recall@10"), "std"]
        assert abs(su.loc[(name, "recall@10"), "mean"] - exp_user) < 4 * sd / np.sqrt(reps) * 1.5
        assert su.loc[(name, "recall@10"), "mean"] < s.loc[(name, "recall@10"), "mean"]


def test_sample_pool_ranks_distribution():
    R = np.full(4000, 20)
    P = np.where(np.arange(4000) < 2000, 100, 400)
    r = E.sample_pool_ranks(R, P, 10, rng=0)
    # E[r - 1] = (n - 1)(R - 1)/(N_u - 1)
    for N_u in (100, 400):
        x = r[P == N_u] - 1
        p = 19 / (N_u - 1)
        assert abs(x.mean() - 9 * p) < 4 * np.sqrt(9 * p * (1 - p) / x.size)


class Flaky:
    """An estimator that raises on its ``fail_at``-th call and counts its calls."""

    def __init__(self, fail_at=None):
        self.calls = 0
        self.fail_at = fail_at

    #: the values are those of ``evaluate`` whatever the counters: one cache key for every instance
    cache_token = "evaluate"

    def __call__(self, r, N, n, metric, k):
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            raise KeyboardInterrupt("interrupted")
        return evaluate(r, metric, k, n)


def test_runner_resumes_after_interruption(gr, tmp_path):
    metrics = (("recall", 10),)
    kw = dict(sample_sizes=(100,), n_repeats=10, metrics=metrics, rng=3, progress=False)
    ref = E.run_experiment(gr, cache=False, estimators={"sampled": Flaky()}, **kw)
    # interrupt during repeat 6 (3 models x 1 metric = 3 calls per repeat)
    flaky = Flaky(fail_at=3 * 6 + 2)
    with pytest.raises(KeyboardInterrupt):
        E.run_experiment(gr, cache=tmp_path / "run", estimators={"sampled": flaky}, **kw)
    (folder,) = (tmp_path / "run").iterdir()  # one sub-folder per cache key
    done = sorted(p.name for p in folder.glob("repeat-*.npz"))
    assert done == [f"repeat-{i:05d}.npz" for i in range(6)]
    assert not list(folder.glob(".*"))  # no half-written file
    again = Flaky()
    res = E.run_experiment(gr, cache=tmp_path / "run", estimators={"sampled": again}, **kw)
    assert Path(res.cache_path) == folder
    assert again.calls == 3 * 4  # only the 4 missing repeats were computed
    assert np.array_equal(res.values, ref.values)
    # a third run computes nothing
    third = Flaky()
    E.run_experiment(gr, cache=tmp_path / "run", estimators={"sampled": third}, **kw)
    assert third.calls == 0


def test_runner_parallel_is_deterministic(gr):
    kw = dict(sample_sizes=(20, 100), n_repeats=6, rng=5, cache=False, progress=False)
    a = E.run_experiment(gr, n_jobs=1, **kw)
    b = E.run_experiment(gr, n_jobs=2, **kw)
    assert np.array_equal(a.values, b.values)
    assert a.values.shape == (6, 3, 2, 4, 1)


def test_summaries_hand_case():
    # 2 repeats, 2 models, 1 size, 1 metric, 1 estimator; exact: model 0 better
    values = np.array([0.5, 0.4, 0.3, 0.6]).reshape(2, 2, 1, 1, 1)
    res = E.ExperimentResult(values, np.array([[0.2], [0.1]]), ["a", "b"], [100], [("recall", 10)], ["s"])
    po = res.pairwise_order()
    assert po.percent_correct.tolist() == [50.0]
    wa = res.winner_accuracy()
    assert wa.accuracy.tolist() == [0.5] and wa.true_winner.tolist() == ["a"]
    s = res.summary().set_index("model")
    assert s.loc["a", "mean"] == pytest.approx(0.4) and s.loc["a", "bias"] == pytest.approx(0.2)
    assert s.loc["a", "rel_error"] == pytest.approx(np.mean([0.3, 0.1]) / 0.2)
    assert len(res.records()) == 4


def test_explicit_sampler_agrees_with_kernel(cache):
    """Sampled ranks from explicit decoys scored by the model vs kernel draws from the global
    ranks: the same distribution, so the mean sampled Recall@10 agrees within 4 standard errors."""
    train, test, fitted, _ = E.fit_models(DS, ["popular"], 0)
    gr_pop = E.load_global_ranks(DS, ["popular"], progress=False)
    sampler = E.ExplicitSampler(fitted, train, test)
    reps = 8
    ex = E.run_experiment(gr_pop, sample_sizes=(30,), n_repeats=reps, sampler=sampler, cache=False,
                          metrics=(("recall", 10),), progress=False)
    ker = E.run_experiment(gr_pop, sample_sizes=(30,), n_repeats=reps, cache=False, metrics=(("recall", 10),),
                           progress=False)
    a, b = ex.values.ravel(), ker.values.ravel()
    se = np.sqrt(a.var(ddof=1) / reps + b.var(ddof=1) / reps)
    assert abs(a.mean() - b.mean()) < 4 * se + 0.01


def test_runner_bad_input(gr):
    with pytest.raises(ValueError, match="ranks must be"):
        E.run_experiment({"a": np.array([1])})
    with pytest.raises(ValueError, match="pool"):
        E.run_experiment(gr, pool="items", cache=False, progress=False)
    with pytest.raises(ValueError, match="sample_size"):
        E.run_experiment(gr, sample_sizes=(1,), cache=False, progress=False)
    with pytest.raises(ValueError, match="n_repeats"):
        E.run_experiment(gr, n_repeats=0, cache=False, progress=False)
    with pytest.raises(ValueError, match="metric"):
        E.run_experiment(gr, metrics=(("hits", 3),), cache=False, progress=False)
