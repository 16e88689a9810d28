"""The sampling kernel P(r | R): hand-computed cases, invariants, and agreement with scipy."""

import numpy as np
import pytest
from scipy import stats

from itemsampling.kernel import kernel, kernel_cdf, kernel_row, log_kernel, theta


def test_hand_computed_binomial():
    # N = 5, n = 3 (2 decoys), R = 3: theta = 2/4 = 1/2, r - 1 ~ Bin(2, 1/2) -> 1/4, 1/2, 1/4
    np.testing.assert_allclose(kernel_row(3, 5, 3), [0.25, 0.5, 0.25], atol=1e-15)
    # R = 1: the target is never outranked
    np.testing.assert_allclose(kernel_row(1, 5, 3), [1.0, 0.0, 0.0], atol=0)
    # R = N: every decoy outranks it
    np.testing.assert_allclose(kernel_row(5, 5, 3), [0.0, 0.0, 1.0], atol=0)


def test_hand_computed_hypergeometric():
    # N = 5, n = 3, R = 3: pool of 4 others, 2 above; draw 2 without replacement.
    # P(0 above) = C(2,0)C(2,2)/C(4,2) = 1/6, P(1) = 4/6, P(2) = 1/6
    np.testing.assert_allclose(kernel_row(3, 5, 3, replacement=False), [1 / 6, 4 / 6, 1 / 6], atol=1e-14)
    # R = 2: one item above; r is 1 or 2 only: P(r=2) = C(1,1)C(3,1)/C(4,2) = 3/6
    np.testing.assert_allclose(kernel_row(2, 5, 3, replacement=False), [0.5, 0.5, 0.0], atol=1e-14)


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("N,n", [(10, 2), (50, 50), (1000, 100), (25815, 500)])
def test_rows_sum_to_one(N, n, replacement):
    P = kernel(N, n, replacement)
    assert P.shape == (N, n)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-10)
    assert np.all(P >= 0)


@pytest.mark.parametrize("N,n", [(30, 7), (1000, 100)])
def test_agrees_with_scipy(N, n):
    R = np.arange(1, N + 1)
    j = np.arange(n)
    ref_b = stats.binom.pmf(j[None, :], n - 1, ((R - 1) / (N - 1))[:, None])
    ref_h = stats.hypergeom.pmf(j[None, :], N - 1, (R - 1)[:, None], n - 1)
    np.testing.assert_allclose(kernel(N, n, True), ref_b, atol=1e-12)
    np.testing.assert_allclose(kernel(N, n, False), ref_h, atol=1e-12)


def test_mean_of_sampled_rank_is_linear_in_R():
    # E[r | R] = 1 + (n - 1) theta_R for both kernels (Krichene & Rendle Sec. 4.4.1)
    N, n = 500, 40
    r = np.arange(1, n + 1)
    for repl in (True, False):
        mean = kernel(N, n, repl) @ r
        np.testing.assert_allclose(mean, 1 + (n - 1) * theta(np.arange(1, N + 1), N), atol=1e-9)


def test_hypergeometric_with_n_equal_N_is_identity():
    # sampling every other item without replacement reproduces the global rank
    P = kernel(20, 20, replacement=False)
    np.testing.assert_allclose(P, np.eye(20), atol=1e-12)


def test_kernels_converge_as_N_grows():
    n = 20
    tv = []
    for N in (100, 1000, 10000, 100000):
        R = np.unique(np.linspace(1, N, 200).astype(int))
        tv.append(0.5 * np.abs(kernel(N, n, True, R) - kernel(N, n, False, R)).sum(axis=1).max())
    assert all(a > b for a, b in zip(tv, tv[1:]))
    assert tv[-1] < 1e-3


def test_no_underflow_in_log_space():
    # plain pmfs underflow for large n, N; the log kernel keeps finite values where P > 0
    lk = log_kernel(100000, 5000, True, np.array([50000]))
    assert np.all(np.isfinite(lk))
    assert lk.max() > -10


def test_cdf():
    c = kernel_cdf(5, 3, True, [3])[0]
    np.testing.assert_allclose(c, [0.25, 0.75, 1.0])


@pytest.mark.parametrize("kw,msg", [
    (dict(n_items=1, sample_size=1), "n_items"),
    (dict(n_items=10, sample_size=1), "sample_size"),
    (dict(n_items=10, sample_size=11), "sample_size"),
    (dict(n_items=10, sample_size=5, global_ranks=[0]), "global_ranks"),
    (dict(n_items=10, sample_size=5, global_ranks=[11]), "global_ranks"),
    (dict(n_items=10, sample_size=5, global_ranks=[2.5]), "global_ranks"),
    (dict(n_items=10, sample_size=5, global_ranks=[np.nan]), "global_ranks"),
    (dict(n_items=10.5, sample_size=5), "n_items"),
])
def test_bad_input(kw, msg):
    with pytest.raises(ValueError, match=msg):
        log_kernel(**kw)
