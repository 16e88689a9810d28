"""Chapter 2 through the runner at small parameters; recorded numbers checked against
independent computations (closed forms, scipy.stats distributions)."""

import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling.run import run_notebook

NB = Path(__file__).resolve().parents[1] / "notebooks" / "02-sampling-theorem.md"

PARAMS = {
    "n_items": 2000, "n_users": 1500, "sample_size": 50, "beta_shapes": [0.3, 0.5],
    "n_repeats": 60, "hoeffding_users": 3000, "hoeffding_t": 0.02, "hoeffding_ks": [1, 10],
    "tv_catalog_sizes": [200, 1000, 2000], "tv_sample_sizes": [10, 50],
    "theorem_sample_sizes": [2, 20, 50], "crossing_sample_sizes": [2, 5, 20, 50, 200], "seed": 3,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ch02")
    return out, run_notebook(NB, PARAMS, out, progress=False, html=True)


@pytest.fixture(scope="module")
def results(run):
    return run[1]["results"]


def test_rendered_page_shows_the_rerun_values(run):
    """Rerun with another N, M, n and Hoeffding example: the rendered page's prose and captions carry
    the new values, with no glue markup left, and none of the defaults where the run's values belong."""
    from rendered import rendered_prose

    out, payload = run
    assert payload["html"] == "02-sampling-theorem.html"
    prose = rendered_prose(out / payload["html"])
    assert "glue:" not in prose and "{glue" not in prose
    # Section 6 and Figure 2.4: the run's N, M and n
    assert "3 recommenders with N = 2,000 items, M = 1,500 users and n = 50" in prose
    assert "3 synthetic recommenders at N = 2,000, M = 1,500, n = 50" in prose
    assert "25,815 items" not in prose and "25,677 users" not in prose and "yelp scale)" not in prose
    # Section 3: the run's M and t in the normal-tail remark, the Hoeffding sentence and the summary
    assert "for \\(M\\) = 3,000 and \\(t\\) = 0.02" in prose
    assert "With this run\u2019s M = 3,000 and t = 0.02 the bound is 0.181" in prose
    assert "about 1/9 for" not in prose and not re.search(r"deviation of 0\.01(?!\d)", prose)
    # the Monte Carlo check quotes the run's number of comparisons: 2 (n - 1) = 98, the cut-off K = n (no
    # variance: every user hits) left out, and tests the standard deviations too
    assert "both kernels (98 comparisons; at K = 50 every user hits" in prose
    assert "Among 98 independent comparisons" in prose and "for 100 comparisons" not in prose
    assert re.search(r"differ from Eq\. 15 in \d+ of 98 comparisons \(Holm-corrected at 5 %\) \(chi-square test", prose)
    assert "over 200 repetitions" not in prose and "n_repeats" not in prose
    # the box names TORS and reports an independent rerun of the same tests beside the first run
    assert re.search(r"TORS Eqs\. 14-15 against 60 simulated evaluations: \d+ of 98 means differ", prose)
    assert re.search(r"a rerun with another seed: \d+ and \d+ of 98", prose)
    assert "Section 6 measures the actual difference" in prose
    assert "This run uses N = 2,000 and n = 50 in place of the paper\u2019s yelp catalog" in prose


def test_parameters_reached_the_notebook(results):
    assert results["n_items"] == PARAMS["n_items"]
    assert results["sample_size"] == PARAMS["sample_size"]
    assert results["n_repeats"] == PARAMS["n_repeats"]
    assert results["hoeffding_users"] == PARAMS["hoeffding_users"]


def test_kernel_distance(results):
    N, n = PARAMS["n_items"], PARAMS["sample_size"]
    R = np.arange(1, N + 1)
    j = np.arange(n)
    pb = stats.binom.pmf(j[None, :], n - 1, ((R - 1) / (N - 1))[:, None])
    ph = stats.hypergeom.pmf(j[None, :], N - 1, (R - 1)[:, None], n - 1)
    assert results["tv_max_at_setting"] == pytest.approx(0.5 * np.abs(pb - ph).sum(axis=1).max(), rel=1e-8)
    rho = 1 - np.prod(1 - np.arange(1, n - 1) / (N - 1))
    assert results["repeat_bound_at_setting"] == pytest.approx(rho, rel=1e-10)
    assert results["tv_max_at_setting"] <= results["repeat_bound_at_setting"]
    # with vs without replacement on whole curves: bounded by the kernel distance
    assert results["bin_vs_hyp_max_diff"] <= results["tv_max_at_setting"] + 1e-12


def test_shr_moments_and_monte_carlo(results):
    N, n, M, a = PARAMS["n_items"], PARAMS["sample_size"], PARAMS["n_users"], PARAMS["beta_shapes"][0]
    # regenerate the users independently: inverse of the closed-form CDF ((K-1)/(N-1))^a
    u = np.random.default_rng(results["user_seed"]).random(M)
    cdf = (np.arange(N) / (N - 1)) ** a
    R = np.searchsorted(cdf, u, side="right") + 1
    p = stats.binom.cdf(9, n - 1, (R - 1) / (N - 1))  # Pr(r <= 10 | R), TORS Eq. 14-15
    assert results["shr_mean_k10"] == pytest.approx(p.mean(), rel=1e-9)
    assert results["shr_var_k10"] == pytest.approx(np.sum(p * (1 - p)) / M**2, rel=1e-8)
    # Monte Carlo means within 4 standard errors of the exact means (2 x 50 cut-offs)
    assert results["mc_max_abs_z"] < 4
    assert results["realised_max_z"] < 5
    # Eqs. 14-15 are exact: the rerun, like the first run, rejects at most a family-wise false alarm's few
    assert results["mc_rejections"] <= 2 and results["mc_rejections_rerun"] <= 2


def test_hoeffding(results):
    M, t = PARAMS["hoeffding_users"], PARAMS["hoeffding_t"]
    bound = 2 * np.exp(-2 * M * t**2)
    assert results["hoeffding_bound"] == pytest.approx(bound, rel=1e-12)
    assert results["hoeffding_bound_paper"] == 0.005
    assert results["hoeffding_radius"] == pytest.approx(np.sqrt(np.log(2 / bound) / (2 * M)), rel=1e-12)
    assert results["hoeffding_radius"] == pytest.approx(t, rel=1e-9)
    # worst case p_u = 1/2: the number of hits is Binomial(M, 1/2)
    s = np.arange(M + 1)
    exact = stats.binom.pmf(s, M, 0.5)[np.abs(s / M - 0.5) >= t - 1e-12].sum()
    assert results["exact_prob_worst_case"] == pytest.approx(exact, rel=1e-9)
    assert results["exact_prob_worst_case"] < bound
    assert results["exact_radius_worst_case"] < results["hoeffding_radius"]
    for prob in results["exact_prob_synthetic"].values():
        assert 0 <= prob <= results["exact_prob_worst_case"] + 1e-15
    assert results["mc_largest_dev_synthetic"] < t


def test_sampling_theorem_and_crossing(results):
    assert results["dominance_violations"] == 0
    assert results["min_sampled_gap"] > 0  # strict: Beta curves with different shapes never touch below K = n
    assert results["max_increase_pK"] < 1e-12
    assert results["empirical_sampled_dominance"] is True
    N = PARAMS["n_items"]
    K = np.arange(1, N + 1)
    # the crossing pair in closed form
    q = 0.05
    top = 0.35 * (1 - (1 - q) ** K) / (1 - (1 - q) ** N) + 0.65 * K / N
    steady = 1 - (1 - (K - 1) / (N - 1)) ** 20
    d = np.sign(top - steady)
    idx = np.flatnonzero(d != 0)
    cross = idx[1:][d[idx][1:] != d[idx][:-1]] + 1
    assert results["global_crossings"] == cross.tolist()
    # E[sampled Recall@1] = sum_R P(R) (1 - theta_R)^(n - 1): first n where the winner changes
    pmf_top, pmf_steady = np.diff(np.r_[0, top]), np.diff(np.r_[0, steady])
    theta = (K - 1) / (N - 1)
    ns = PARAMS["crossing_sample_sizes"]
    diff = [np.sum((pmf_top - pmf_steady) * (1 - theta) ** (n - 1)) for n in ns]
    flips = [n for n, x in zip(ns, diff) if np.sign(x) != np.sign(diff[0])]
    assert results["flip_n"]["1"] == (flips[0] if flips else None)
    assert results["flip_n"]["1"] is not None
