"""Property tests (hypothesis): invariants of the kernel and of sampled metrics for random sizes."""

import numpy as np
from hypothesis import given, settings, strategies as st

from itemsampling.kernel import kernel
from itemsampling.metrics import evaluate
from itemsampling.sampling import expected_metric_given_rank, expected_sampled_metric


@st.composite
def sizes_and_ranks(draw):
    N = draw(st.integers(2, 3000))
    n = draw(st.integers(2, min(N, 300)))
    R = draw(st.lists(st.integers(1, N), min_size=1, max_size=30))
    return N, n, np.array(R)


@settings(max_examples=60, deadline=None)
@given(sizes_and_ranks(), st.booleans())
def test_kernel_rows_are_distributions_with_linear_mean(case, replacement):
    N, n, R = case
    P = kernel(N, n, replacement, R)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(P @ np.arange(1, n + 1), 1 + (n - 1) * (R - 1) / (N - 1), rtol=1e-9, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(sizes_and_ranks(), st.booleans())
def test_sampled_auc_unbiased(case, replacement):
    N, n, R = case
    assert abs(expected_sampled_metric(R, N, n, "auc", replacement=replacement) - evaluate(R, "auc", n_items=N)) < 1e-9


@settings(max_examples=40, deadline=None)
@given(sizes_and_ranks(), st.integers(1, 50), st.booleans())
def test_expected_sampled_recall_decreases_in_R(case, k, replacement):
    # a better global rank never lowers the expected sampled recall (stochastic monotonicity)
    N, n, _ = case
    k = min(k, n)
    Rs = np.arange(1, N + 1)
    e = expected_metric_given_rank(Rs, N, n, "recall", k, replacement)
    assert np.all(np.diff(e) <= 1e-10)
    if not replacement:
        # without replacement r <= R always, so E[1[r <= k] | R] >= 1[R <= k]; with replacement a
        # decoy above the target can be drawn repeatedly and this fails for small R
        assert np.all(e + 1e-10 >= (Rs <= k))
