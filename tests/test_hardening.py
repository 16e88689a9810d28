"""Issue 19, the edges of the public API: each class of input the last round left alone is refused
with a ValueError naming the argument (or file, line and field), or documented and tested as the
intended result."""

from __future__ import annotations

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
