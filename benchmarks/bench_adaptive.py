"""Benchmarks of adaptive item sampling plus adaptive EM (TORS Sec. 6, Algorithm 1, Appendix H).

One repeat = draw the adaptive sampled ranks (:func:`itemsampling.sampling.adaptive_sample_ranks`)
and fit P(R) by EM on the distinct (n_u, r_u) pairs (``fit_rank_distribution(..., "mle")``, the
default EM with tol 1e-6), kernel columns included (nothing cached).

Scales:
* MovieLens-1M: N = 3,706, M = 6,040, n_0 = 100, n_max = 3,200;
* yelp (Jin et al. 2021, Table 5): N = 25,815, M = 25,677, n_max = 3,200 with n_0 = 400 (3,200 is
  not 500 * 2^j, which Algorithm 1's doubling needs), and n_0 = 500 with n_max = 4,000;
* real-data size (issue 45, ``bench_real_sizes.py``): N = 10^5, M = 10^5, n_0 = 100, n_max = 12,800.

Global ranks: theta = (R - 1)/(N - 1) ~ Beta(0.35, 1.2), as in ``bench_distribution.py``.

The straightforward implementation compared against is the per-user EM of TORS Appendix H
(Eq. 61-62, what the authors' code does with a Python loop, here vectorised over users): an
N x M matrix of P(r_u | R; n_u) (log space), then per pass the posterior of every user and its
mean, for the same number of passes as our EM; both must agree to max |dP| < 1e-10. At yelp scale
the N x M matrix (5.3 GB) does not fit the CI machine, so the baseline recomputes it in chunks of
users each pass; its time is measured for a few passes and reported per pass.

At the real-data size the per-user EM's N x M matrix is 80 GB and one chunked pass about a minute and a
half, so ``test_per_user_em_real_size`` times one pass on a random 2,000 of the users (its cost is linear
in the users: one chunk of kernel columns per 1,024 users) and scales it to all M; the same pass of our
EM on those users must agree to max |dP| < 1e-10. It records, in ``extra_info``, the speed-up of one
repeat (sampling and EM to convergence, dense and cold) over the per-user EM for the same number of
passes, and the time of ``estimate_metrics`` at its defaults on the same ranks (the grid above
``AUTO_GRID_BYTES``). The speed-ups of the other scales are the ratio of ``test_per_user_em_*`` (times
``iterations`` passes at yelp) to ``test_adaptive_repeat``.

Run with ``make bench`` (or ``pytest benchmarks/bench_adaptive.py --benchmark-only``).
"""

import time
import warnings

import numpy as np
import pytest
from scipy.special import gammaln

from itemsampling.estimators import estimate_metrics
from itemsampling.estimators.distribution import ConvergenceWarning, fit_rank_distribution
from itemsampling.sampling import adaptive_sample_ranks

SCALES = {
    "ml1m": (3_706, 6_040, 100, 3_200),
    "yelp-400": (25_815, 25_677, 400, 3_200),
    "yelp-500": (25_815, 25_677, 500, 4_000),
    "real-1e5": (100_000, 100_000, 100, 12_800),
}


def _ranks(N, M, seed=0):
    rng = np.random.default_rng(seed)
    return np.minimum(N, 1 + np.floor((N - 1) * rng.beta(0.35, 1.2, size=M))).astype(np.int64)


def one_repeat(R, N, n0, nmax, rng=1, **em):
    r, s = adaptive_sample_ranks(R, N, n0, nmax, rng=rng)
    return r, s, fit_rank_distribution(r, N, s, "mle", **em)


def _user_log_kernel(r, s, N):
    """log P(r_u | R; n_u) for every R (rows) and user (columns): log Binomial(r_u - 1; n_u - 1, theta_R)."""
    R = np.arange(1, N + 1, dtype=np.float64)
    theta = (R - 1) / (N - 1)
    j = (r - 1).astype(np.float64)
    m = (s - 1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        lt, l1 = np.log(theta)[:, None], np.log1p(-theta)[:, None]
        out = np.where(j == 0, 0.0, j * lt) + np.where(m - j == 0, 0.0, (m - j) * l1)
    return out + (gammaln(m + 1) - gammaln(j + 1) - gammaln(m - j + 1))[None, :]


def per_user_em(r, s, N, iterations, chunk=None):
    """The straightforward EM of TORS Appendix H: Eq. 61 (posterior of every user), Eq. 62 (mean)."""
    pi = np.full(N, 1.0 / N)
    M = r.size
    if chunk is None:
        L = np.exp(_user_log_kernel(r, s, N))
        for _ in range(iterations):
            q = pi @ L  # p(r_u | pi) for every user
            pi = pi * (L @ (1.0 / q)) / M  # (1/M) sum_u phi_uR
        return pi
    for _ in range(iterations):
        acc = np.zeros(N)
        for lo in range(0, M, chunk):
            L = np.exp(_user_log_kernel(r[lo:lo + chunk], s[lo:lo + chunk], N))
            acc += L @ (1.0 / (pi @ L))
        pi = pi * acc / M
    return pi


@pytest.mark.parametrize("scale", list(SCALES))
def test_adaptive_repeat(benchmark, scale):
    """One repeat: adaptive sampling + adaptive EM, kernel columns computed (cold)."""
    N, M, n0, nmax = SCALES[scale]
    R = _ranks(N, M)
    one_repeat(R, N, n0, nmax)  # warm-up (imports, BLAS threads)
    r, s, fit = benchmark.pedantic(one_repeat, args=(R, N, n0, nmax), rounds=5, iterations=1)
    benchmark.extra_info.update({"iterations": fit.iterations, "mean_size": float(s.mean()),
                                 "distinct_pairs": int(len(np.unique(np.stack([s, r]), axis=1).T))})
    assert fit.stopped_by_tol


def test_per_user_em_ml1m_same_result(benchmark):
    """The straightforward per-user EM at MovieLens-1M scale, as many passes as our EM, same result."""
    N, M, n0, nmax = SCALES["ml1m"]
    R = _ranks(N, M)
    r, s, fit = one_repeat(R, N, n0, nmax)
    pi = benchmark.pedantic(per_user_em, args=(r, s, N, fit.iterations), rounds=2, iterations=1)
    benchmark.extra_info["iterations"] = fit.iterations
    assert np.max(np.abs(pi - fit.distribution)) < 1e-10


@pytest.mark.parametrize("scale", ["yelp-400", "yelp-500"])
def test_per_user_em_yelp_same_result(benchmark, scale):
    """The per-user EM at yelp scale, chunked, for 3 passes (time per pass in extra_info); checked
    against our EM stopped after the same 3 passes."""
    N, M, n0, nmax = SCALES[scale]
    R = _ranks(N, M)
    r, s = adaptive_sample_ranks(R, N, n0, nmax, rng=1)
    passes = 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = fit_rank_distribution(r, N, s, "mle", max_iter=passes).distribution
    start = time.perf_counter()
    pi = benchmark.pedantic(per_user_em, args=(r, s, N, passes), kwargs={"chunk": 1024}, rounds=1, iterations=1)
    benchmark.extra_info["seconds_per_pass"] = (time.perf_counter() - start) / passes
    assert np.max(np.abs(pi - ours)) < 1e-10


def test_per_user_em_real_size(benchmark):
    """The per-user EM at N = M = 10^5 (n_0 = 100, n_max = 12,800): one pass on 2,000 users, scaled to
    all M; checked against our EM's first pass on those users; the speed-up of one repeat recorded."""
    N, M, n0, nmax = SCALES["real-1e5"]
    R = _ranks(N, M)
    one_repeat(R, N, n0, nmax)  # warm-up (imports, BLAS threads)
    ours = []
    for _ in range(3):
        start = time.perf_counter()
        r, s, fit = one_repeat(R, N, n0, nmax)
        ours.append(time.perf_counter() - start)
    sub = np.random.default_rng(3).choice(M, size=2_000, replace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        first = fit_rank_distribution(r[sub], N, s[sub], "mle", max_iter=1).distribution
    start = time.perf_counter()
    pi = benchmark.pedantic(per_user_em, args=(r[sub], s[sub], N, 1), kwargs={"chunk": 1024}, rounds=1,
                            iterations=1)
    per_pass = (time.perf_counter() - start) * M / sub.size
    assert np.max(np.abs(pi - first)) < 1e-10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        est = estimate_metrics(r, N, s, ["recall"], [1_000, 5_000], ["mle"])["mle"]["recall"]
        default = time.perf_counter() - start
    benchmark.extra_info.update({"iterations": fit.iterations, "seconds_per_pass_all_users": per_pass,
                                 "our_repeat_seconds": float(np.median(ours)),
                                 "speedup": per_pass * fit.iterations / float(np.median(ours)),
                                 "default_estimate_seconds": default, "default_recall": np.asarray(est).tolist(),
                                 "true_recall": [float(np.mean(R <= k)) for k in (1_000, 5_000)]})
