"""Tests of itemsampling.theory: rank distributions, the Sampling Theorem, kernel distance,
Poisson binomial deviations. Expected values are hand-computed, closed forms, or computed by an
independent route (scipy.stats distributions, brute-force enumeration, Monte Carlo)."""

import itertools

import numpy as np
import pytest
from scipy import stats

from itemsampling import sampling, theory as th


# ----------------------------------------------------------------- rank distributions

def test_beta_rank_distribution_closed_form():
    N = 1000
    for a in (0.25, 0.5, 1.0, 2.0):
        p = th.beta_rank_distribution(N, a)
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        assert p[0] == 0.0  # x = (R-1)/(N-1) = 0 at R = 1
        K = np.array([1, 2, 10, 100, 999, 1000])
        # b = 1: the Recall curve is ((K-1)/(N-1))^a exactly (Li et al. 2020 Sec. 3.2)
        np.testing.assert_allclose(th.recall_curve(p, K), ((K - 1) / (N - 1)) ** a, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(th.beta_rank_cdf(K, N, a), ((K - 1) / (N - 1)) ** a, rtol=1e-15)
    # a = b = 1: uniform over R = 2..N
    np.testing.assert_allclose(th.beta_rank_distribution(7, 1.0), [0] + [1 / 6] * 6, rtol=1e-12, atol=1e-15)
    # general b against scipy's Beta CDF at (K-1)/(N-1)
    p = th.beta_rank_distribution(50, 1.0, 20.0)
    np.testing.assert_allclose(np.cumsum(p), stats.beta.cdf(np.arange(50) / 49, 1.0, 20.0), atol=1e-12)


def test_beta_model_is_implemented_once():
    # mapping's Beta rank model is theory's: same CDF, and its sampler follows the same pmf
    from itemsampling import mapping as mp
    N, a = 300, 0.35
    K = np.arange(1, N + 1)
    np.testing.assert_array_equal(mp.beta_rank_cdf(K, N, a), th.beta_rank_cdf(K, N, a))
    np.testing.assert_array_equal(mp.sample_beta_ranks(a, N, 1000, rng=5),
                                  th.sample_global_ranks(th.beta_rank_distribution(N, a), 1000, rng=5))


def test_geometric_and_mixture_by_hand():
    p = th.geometric_rank_distribution(3, 0.5)
    np.testing.assert_allclose(p, np.array([0.5, 0.25, 0.125]) / 0.875, rtol=1e-12)
    # huge N, tiny q stays finite and normalised
    big = th.geometric_rank_distribution(1_000_000, 1e-7)
    assert np.all(np.isfinite(big)) and big.sum() == pytest.approx(1.0, abs=1e-9)
    mix = th.mixture_rank_distribution([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]], [0.25, 0.75])
    np.testing.assert_allclose(mix, [0.25, 0.375, 0.375])


def test_sample_global_ranks_frequencies_and_coupling():
    N = 50
    p = th.beta_rank_distribution(N, 0.5)
    R = th.sample_global_ranks(p, 200_000, rng=3)
    assert R.min() >= 1 and R.max() <= N
    freq = np.bincount(R, minlength=N + 1)[1:] / R.size
    assert freq[0] == 0.0 and p[0] == 0.0  # rank 1 has probability 0 under the Beta model
    se = np.sqrt(p[1:] * (1 - p[1:]) / R.size)
    assert np.max(np.abs(freq[1:] - p[1:]) / se) < 5  # 49 cells, 5 standard errors
    # coupling: same seed, a dominating distribution gives a smaller rank for every user
    R1 = th.sample_global_ranks(th.beta_rank_distribution(N, 0.3), 5000, rng=7)
    R2 = th.sample_global_ranks(th.beta_rank_distribution(N, 0.6), 5000, rng=7)
    assert np.all(R1 <= R2) and np.any(R1 < R2)
    # zero-probability ranks are never drawn
    q = np.zeros(10)
    q[[2, 7]] = 0.5
    assert set(np.unique(th.sample_global_ranks(q, 1000, rng=0))) == {3, 8}


# ----------------------------------------------------------------- expected sampled curves

@pytest.mark.parametrize("replacement", [True, False])
def test_expected_sampled_curve_matches_shr_moments_and_scipy(replacement):
    N, n = 300, 20
    R = th.sample_global_ranks(th.beta_rank_distribution(N, 0.4), 700, rng=1)
    emp = np.bincount(R, minlength=N + 1)[1:] / R.size
    curve = th.expected_sampled_recall_curve(emp, N, n, replacement=replacement, chunk_size=7)
    mean, _ = sampling.shr_moments(R, N, n, replacement=replacement)
    np.testing.assert_allclose(curve, mean, rtol=1e-10, atol=1e-13)
    # independent: scipy's binomial / hypergeometric CDF per user
    k = np.arange(1, n + 1)
    if replacement:
        cdf = stats.binom.cdf(k[None, :] - 1, n - 1, ((R - 1) / (N - 1))[:, None])
    else:
        cdf = stats.hypergeom.cdf(k[None, :] - 1, N - 1, (R - 1)[:, None], n - 1)
    np.testing.assert_allclose(curve, cdf.mean(axis=0), rtol=1e-9, atol=1e-12)


def test_sampling_theorem_on_dominating_pairs():
    """TORS Theorem 3.1: dominance of global curves carries over to expected sampled curves,
    for both kernels and any n; checked on random dominating pairs (majorised mass moves)."""
    rng = np.random.default_rng(5)
    N = 400
    for _ in range(20):
        p2 = rng.dirichlet(np.full(N, 0.3))
        # move a random share of each rank's mass to a uniformly chosen better rank
        p1 = np.zeros(N)
        share = rng.uniform(0, 1, N)
        target = np.array([rng.integers(0, i + 1) for i in range(N)])
        np.add.at(p1, target, share * p2)
        p1 += (1 - share) * p2
        assert th.dominates(th.recall_curve(p1), th.recall_curve(p2), atol=1e-12)
        for n in (2, 5, 50, 400):
            for repl in (True, False):
                e1 = th.expected_sampled_recall_curve(p1, N, n, replacement=repl)
                e2 = th.expected_sampled_recall_curve(p2, N, n, replacement=repl)
                assert th.dominates(e1, e2, atol=1e-12)


def test_crossing_pair_flips_with_sample_size():
    N = 2000
    top_heavy = th.mixture_rank_distribution([th.geometric_rank_distribution(N, 0.05),
                                              np.full(N, 1 / N)], [0.35, 0.65])
    steady = th.beta_rank_distribution(N, 1.0, 20.0)
    assert th.crossings(th.recall_curve(top_heavy), th.recall_curve(steady)).size >= 1
    d = [th.expected_sampled_recall_curve(top_heavy, N, n, ks=[1])[0]
         - th.expected_sampled_recall_curve(steady, N, n, ks=[1])[0] for n in (2, 200)]
    # one decoy: Recall@1 is the mean AUC, where the steady model wins; many decoys: top-heavy wins
    assert d[0] < 0 < d[1]


def test_dominates_and_crossings_by_hand():
    assert th.dominates([0.2, 0.5, 1.0], [0.1, 0.5, 1.0])
    assert not th.dominates([0.2, 0.4, 1.0], [0.1, 0.5, 1.0])
    assert th.dominates([0.2, 0.4999, 1.0], [0.1, 0.5, 1.0], atol=1e-3)
    np.testing.assert_array_equal(th.crossings([0.2, 0.4, 1.0], [0.1, 0.5, 1.0]), [2])
    np.testing.assert_array_equal(th.crossings([1, 0, 0, -1, 1], [0, 0, 0, 0, 0]), [4, 5])
    assert th.crossings([0.3, 0.5], [0.1, 0.2]).size == 0


def test_crossings_ignore_roundoff_at_one():
    # both curves equal 1 up to the last bit: no crossing there (was reported as one)
    np.testing.assert_array_equal(th.crossings([0.1, 0.5, 1.0], [0.2, 0.4, np.nextafter(1.0, 0.0)]), [2])
    assert th.crossings([0.5, 1.0], [0.4, np.nextafter(1.0, 2.0)]).size == 0
    # a real difference of 1e-9 is still a crossing
    np.testing.assert_array_equal(th.crossings([0.5, 1.0], [0.4, 1.0 + 1e-9]), [2])


def test_crossings_of_sampled_curves_end_tied():
    # two expected sampled Recall curves both reach 1 at K = n; only the interior crossing counts
    N, n = 2000, 200
    top = th.mixture_rank_distribution([th.geometric_rank_distribution(N, 0.05), np.full(N, 1 / N)], [0.35, 0.65])
    steady = th.beta_rank_distribution(N, 1.0, 20.0)
    e = th.expected_sampled_recall_curve(np.vstack([top, steady]), N, n)
    c = th.crossings(e[0], e[1])
    assert c.size >= 1 and np.all(c < n)


# ----------------------------------------------------------------- with vs without replacement

def test_kernel_tv_distance_against_scipy_and_bounds():
    N, n = 60, 8
    tv = th.kernel_tv_distance(N, n)
    R = np.arange(1, N + 1)
    j = np.arange(n)
    pb = stats.binom.pmf(j[None, :], n - 1, ((R - 1) / (N - 1))[:, None])
    ph = stats.hypergeom.pmf(j[None, :], N - 1, (R - 1)[:, None], n - 1)
    np.testing.assert_allclose(tv, 0.5 * np.abs(pb - ph).sum(axis=1), atol=1e-12)
    assert tv[0] == pytest.approx(0, abs=1e-12) and tv[-1] == pytest.approx(0, abs=1e-12)  # R = 1, N
    assert tv.max() <= th.repeat_probability(N, n)
    # one decoy: both kernels are Bernoulli(theta), identical
    assert th.kernel_tv_distance(N, 2).max() == pytest.approx(0, abs=1e-12)
    # TV shrinks like 1/N for fixed n
    grid = lambda N_: np.unique(np.linspace(1, N_, 401).round().astype(int))  # noqa: E731
    t1 = th.kernel_tv_distance(10_000, 20, grid(10_000)).max()
    t2 = th.kernel_tv_distance(100_000, 20, grid(100_000)).max()
    assert 8 < t1 / t2 < 12


def test_repeat_probability_by_hand():
    assert th.repeat_probability(100, 2) == 0.0
    assert th.repeat_probability(100, 3) == pytest.approx(1 / 99)
    assert th.repeat_probability(11, 4) == pytest.approx(1 - 0.9 * 0.8)
    assert th.repeat_probability(10_000, 100) <= 99 * 98 / 2 / 9_999


# ----------------------------------------------------------------- Poisson binomial and Hoeffding

def test_poisson_binomial_against_scipy_and_binomial():
    rng = np.random.default_rng(2)
    p = np.r_[rng.uniform(0, 1, 300), np.full(200, 0.3), [0.0, 1.0, 1.0]]
    np.testing.assert_allclose(th.poisson_binomial_pmf(p), stats.poisson_binom(p).pmf(np.arange(p.size + 1)),
                               atol=1e-15)
    np.testing.assert_allclose(th.poisson_binomial_pmf(np.full(40, 0.2)), stats.binom.pmf(np.arange(41), 40, 0.2),
                               rtol=1e-10)
    # deep tail keeps relative precision: P(S = M) = prod p
    q = np.full(60, 0.01)
    assert th.poisson_binomial_pmf(q)[-1] == pytest.approx(1e-120, rel=1e-8)


def test_deviation_probability_brute_force():
    p = np.array([0.1, 0.5, 0.8])
    mu = p.mean()
    for t in (0.05, 0.2, 0.4):
        brute = 0.0
        for z in itertools.product([0, 1], repeat=3):
            z = np.array(z)
            if abs(z.mean() - mu) >= t:
                brute += np.prod(np.where(z == 1, p, 1 - p))
        assert th.deviation_probability(p, t) == pytest.approx(brute, abs=1e-15)


def test_hoeffding_dominates_exact_and_radius():
    rng = np.random.default_rng(4)
    for M in (50, 500, 3000):
        p = rng.uniform(0, 1, M)
        for t in (0.01, 0.03, 0.1):
            assert th.deviation_probability(p, t) <= sampling.hoeffding_bound(M, t) + 1e-15
    # the paper's example: M = 30,000, t = 0.01 gives 2 exp(-6), printed as 0.005
    assert th.hoeffding_radius(30_000, 2 * np.exp(-6)) == pytest.approx(0.01, rel=1e-12)
    # worst case p = 1/2: exact radius is below Hoeffding's and is attained
    M, delta = 2000, 0.01
    p = np.full(M, 0.5)
    r = th.deviation_radius(p, delta)
    assert r < th.hoeffding_radius(M, delta)
    assert th.deviation_probability(p, r) <= delta < th.deviation_probability(p, r - 1 / M)
    # against scipy's binomial two-sided tail
    s = np.arange(M + 1)
    assert th.deviation_probability(p, 0.03) == pytest.approx(
        stats.binom.pmf(s, M, 0.5)[np.abs(s / M - 0.5) >= 0.03 - 1e-12].sum(), rel=1e-10)
    # normal approximation is close for large M
    assert th.deviation_probability(p, 0.03, "normal") == pytest.approx(th.deviation_probability(p, 0.03), rel=0.1)


# ----------------------------------------------------------------- Monte Carlo

@pytest.mark.parametrize("replacement", [True, False])
def test_simulation_agrees_with_exact_moments(replacement):
    N, n, B = 500, 30, 400
    R = th.sample_global_ranks(th.beta_rank_distribution(N, 0.4), 300, rng=8)
    ks = [1, 3, 10, 29]
    sims = th.simulate_sampled_recall_curves(R, N, n, B, ks=ks, rng=9, replacement=replacement)
    assert sims.shape == (B, len(ks))
    mean, var = sampling.shr_moments(R, N, n, ks=ks, replacement=replacement)
    z = th.standard_errors_from(sims, mean, var)
    assert np.max(np.abs(z)) < 4  # 4 comparisons, 4 standard errors
    # sample variance within 25 % of TORS Eq. 15 (B = 400: sd of the ratio about 7 %)
    np.testing.assert_allclose(sims.var(axis=0, ddof=1), var, rtol=0.25)
    # reproducible from the seed
    again = th.simulate_sampled_recall_curves(R, N, n, B, ks=ks, rng=9, replacement=replacement)
    np.testing.assert_array_equal(sims, again)


def test_standard_errors_by_hand():
    x = np.array([[1.0, 0.5], [0.0, 0.5], [1.0, 0.5], [0.0, 0.5]])
    z = th.standard_errors_from(x, [0.25, 0.5], [0.25, 0.0])
    np.testing.assert_allclose(z, [(0.5 - 0.25) / np.sqrt(0.25 / 4), 0.0])
    with pytest.raises(ValueError, match="zero exact variance"):
        th.standard_errors_from(x, [0.25, 0.4], [0.25, 0.0])


# ----------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, match", [
    (lambda: th.beta_rank_distribution(1, 0.5), "n_items"),
    (lambda: th.beta_rank_distribution(10, 0.0), "a must be a positive"),
    (lambda: th.beta_rank_distribution(10, 0.5, np.nan), "b must be a positive"),
    (lambda: th.geometric_rank_distribution(10, 1.0), r"q must lie in \(0, 1\)"),
    (lambda: th.geometric_rank_distribution(10, -0.1), "q must be a positive"),
    (lambda: th.mixture_rank_distribution([[0.5, 0.5], [1.0, 0, 0]], [0.5, 0.5]), "same length"),
    (lambda: th.mixture_rank_distribution([[0.5, 0.5]], [0.5, 0.5]), "weights must have length 1"),
    (lambda: th.mixture_rank_distribution([], []), "at least one"),
    (lambda: th.sample_global_ranks([0.5, 0.6], 10), "rank_pmf must sum to 1"),
    (lambda: th.sample_global_ranks([0.5, 0.5], 0), "n_users must be >= 1"),
    (lambda: th.sample_global_ranks([0.5, np.nan], 3), "NaN"),
    (lambda: th.recall_curve([0.5, 0.5], ks=[3]), "k must be <= 2"),
    (lambda: th.expected_sampled_recall_curve([0.5, 0.5], 3, 2), "length n_items = 3"),
    (lambda: th.expected_sampled_recall_curve([0.5, 0.5], 2, 3), "sample_size must be <= 2"),
    (lambda: th.expected_sampled_recall_curve([0.5, 0.5], 2, 2, ks=[0]), "k must be >= 1"),
    (lambda: th.dominates([1.0, 2.0], [1.0]), "curve_b must have the shape"),
    (lambda: th.dominates([1.0, np.nan], [1.0, 1.0]), "NaN"),
    (lambda: th.crossings([1.0], [0.5], atol=-1), "atol"),
    (lambda: th.kernel_tv_distance(10, 11), "sample_size"),
    (lambda: th.kernel_tv_distance(10, 5, [0, 3]), "global_ranks must lie in 1..10"),
    (lambda: th.repeat_probability(10, 1), "sample_size must be >= 2"),
    (lambda: th.poisson_binomial_pmf([0.2, 1.2]), r"probs must lie in \[0, 1\]"),
    (lambda: th.poisson_binomial_pmf([]), "non-empty"),
    (lambda: th.deviation_probability([0.5], 0.0), "t must be a positive"),
    (lambda: th.deviation_probability([0.5], 0.1, "bogus"), "method must be"),
    (lambda: th.deviation_radius([0.5], 1.0), r"delta must lie in \(0, 1\)"),
    (lambda: th.hoeffding_radius(0, 0.1), "n_users must be >= 1"),
    (lambda: th.simulate_sampled_recall_curves([1, 2], 10, 5, 0), "n_repeats must be >= 1"),
    (lambda: th.simulate_sampled_recall_curves([1, 2.5], 10, 5, 3), "integer ranks"),
    (lambda: th.standard_errors_from(np.ones((3, 2)), [0.5], [0.1]), "samples must have shape"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_expected_sampled_curve_many_models_at_once():
    N, n = 200, 15
    P = np.vstack([th.beta_rank_distribution(N, a) for a in (0.3, 0.7)] + [th.geometric_rank_distribution(N, 0.1)])
    both = th.expected_sampled_recall_curve(P, N, n, ks=[1, 4, 15], replacement=False, chunk_size=33)
    assert both.shape == (3, 3)
    for row, p in zip(both, P):
        np.testing.assert_allclose(row, th.expected_sampled_recall_curve(p, N, n, ks=[1, 4, 15], replacement=False),
                                   rtol=1e-12)
    with pytest.raises(ValueError, match=r"rank_pmf\[1\] must sum to 1"):
        th.expected_sampled_recall_curve(np.vstack([P[0], P[1] * 2]), N, n)
    with pytest.raises(ValueError, match="1-d or 2-d"):
        th.expected_sampled_recall_curve(P[None], N, n)


def test_shared_pmf_gives_same_answers():
    p = np.random.default_rng(0).uniform(0, 1, 400)
    pmf = th.poisson_binomial_pmf(p)
    assert th.deviation_probability(p, 0.05, pmf=pmf) == th.deviation_probability(p, 0.05)
    assert th.deviation_radius(p, 0.01, pmf=pmf) == th.deviation_radius(p, 0.01)
    with pytest.raises(ValueError, match="pmf must be the Poisson binomial pmf"):
        th.deviation_probability(p, 0.05, pmf=pmf[:-1])
