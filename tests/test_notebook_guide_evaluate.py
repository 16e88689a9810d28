"""The guide page "Evaluate your own model" at small parameters: each design's cost is the count its
definition gives, the user-sampling size is the plan's worst-case size, the calls run the designs, and the
errors and verdicts are those of the recorded runs."""

from pathlib import Path

import numpy as np
import pytest

from itemsampling.plan import worst_case_users
from itemsampling.run import run_notebook

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "guide-evaluate-your-model.md"
PARAMS = {"dataset": "sim-ml100k", "factors": 8, "sample_size": 50, "initial_size": 25, "max_size": 400,
          "margin": 0.05, "k_max": 20, "repeats": 3, "seed": 1}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_notebook(NOTEBOOK, PARAMS, out=tmp_path_factory.mktemp("evaluate"), progress=False)["results"]


def test_costs_sizes_and_calls(results):
    M, N = results["eval_dataset_users"], results["eval_N"]
    assert results["eval_full_scorings"] == M * N and results["eval_repeats"] == PARAMS["repeats"]
    m = worst_case_users("recall", 10, M, PARAMS["margin"])
    assert results["eval_m_users"] == m < M
    fixed, adaptive, users, full = results["eval_table"]
    assert fixed["item scorings"] == M * PARAMS["sample_size"]  # n per user, every draw
    assert M * PARAMS["initial_size"] <= adaptive["item scorings"] <= M * PARAMS["max_size"]
    assert users["item scorings"] == m * N  # one row per user in a leave-one-out split
    assert full["item scorings"] == M * N and full["share of full ranking"] == 1.0
    for row in (fixed, adaptive, users):
        assert row["share of full ranking"] == pytest.approx(row["item scorings"] / (M * N), rel=1e-12)
        assert 0 <= row["avg relative error of Recall@1..K"] and row["sd over draws"] > 0
    assert 'design="fixed", sample_size=50' in fixed["sampled_ranks call"]
    assert 'design="adaptive", initial_size=25, max_size=400' in adaptive["sampled_ranks call"]
    assert f'design="full", n_users={m}' in users["sampled_ranks call"]
    assert results["eval_calls"].count("sampled_ranks(score, users, targets, exclude=exclude") == 3


def test_verdicts_are_the_t_tests_of_the_recorded_errors(results):
    fixed, adaptive = results["eval_table"][:2]
    diff = adaptive["avg relative error of Recall@1..K"] - fixed["avg relative error of Recall@1..K"]
    text = results["eval_verdict_error"]
    assert "3 repeats" in text and ("cannot be told apart" in text or ("smaller" in text) == (diff < 0))
    assert results["eval_verdict_bias"].count("Recall@10 error") == 3
    assert 0 <= results["eval_truth_10"] <= 1 and np.isfinite(results["eval_seconds"])


def test_the_libraries_section_pairs_two_models_and_freezes_the_decoys(results):
    """implicit's ALS and Cornac's BPR through the adapters: one row per model and test user; the decoys
    written, read back and given again rank as the decoys returned."""
    assert results["eval_lib_rows"] == 2 * results["eval_dataset_users"]
    assert results["eval_lib_same"] == "the same"
