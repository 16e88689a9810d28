"""The guide page "Evaluate your own model" at small parameters: the plan's choice is the cheapest identified
design meeting the margin among the designs it lists, the sampled tables cost what the design's definition
allows, the counts in the prose (identified, covering, decided) are those of the recorded tables, the coverage
verdict is the exact binomial test of those counts, and no glued number is a bare float."""

import math
from pathlib import Path

import pytest
from scipy import stats

from itemsampling.run import run_notebook

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "guide-evaluate-your-model.md"
PARAMS = {"dataset": "sim-ml100k", "factors_a": 8, "factors_b": 2, "pilot_users": 300, "pilot_size": 50,
          "margin": 0.05, "n_sim": 5, "seed": 1}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_notebook(NOTEBOOK, PARAMS, out=tmp_path_factory.mktemp("evaluate"), progress=False)["results"]


def test_the_plan_chooses_the_cheapest_identified_design_meeting_the_margin(results):
    designs, chosen = results["own_designs"], results["own_chosen"]
    meet = [d for d in designs if d["identified"] and d["half_width"] <= PARAMS["margin"]]
    best = min(meet, key=lambda d: (d["cost"], d["half_width"]))
    assert chosen["label"] == best["label"] and chosen["cost"] == best["cost"]
    N, M = results["own_N"], results["own_M"]
    assert results["own_predicted_cost_pct"] == pytest.approx(100 * chosen["cost"] / (M * N), rel=1e-12)
    assert results["own_predicted_half_width"] == chosen["half_width"] <= PARAMS["margin"]
    # the chosen design resolves K = 10 (2 N/(n - 1) <= 10 at its largest size) or ranks everything
    if chosen["sample_size"] is not None:
        assert 10 >= 2 * N / (chosen["sample_size"] - 1)
    assert chosen["call"].startswith("sampled_ranks(score, users, targets, exclude=exclude, ")
    assert f"table = {chosen['call']}" in results["own_chosen_call"]


def test_the_tables_cost_what_the_design_allows(results):
    chosen, N, M = results["own_chosen"], results["own_N"], results["own_M"]
    users = chosen["users"]
    for name, scorings in results["own_scorings"].items():
        if chosen["initial_size"] is not None:  # adaptive: n0 to n_max per row
            assert users * chosen["initial_size"] <= scorings <= users * chosen["sample_size"]
        elif chosen["sample_size"] is not None:
            assert scorings == users * chosen["sample_size"]
        else:
            assert scorings == users * N
        assert results["own_realised_cost_pct"][name] == pytest.approx(100 * scorings / (M * N), rel=1e-12)


def test_counts_and_verdicts_are_those_of_the_recorded_tables(results):
    table = results["own_table"]
    assert len(table) == results["own_rows"] == 3 * 2 * 3  # three models, Recall and NDCG, K = 10, 20, 50
    assert results["own_identified"] == sum(r["identified"] for r in table)
    hits = sum(r["covers"] for r in table)
    assert results["own_covered"] == hits
    for r in table:
        lo, hi = (float(x) for x in r["95 % interval"].strip("[]").split(","))
        tv = r["truth (full ranking)"]
        if lo + 5e-5 < tv < hi - 5e-5:  # inside the printed (4-decimal) interval by more than its rounding
            assert r["covers"] is True
        elif tv < lo - 5e-5 or tv > hi + 5e-5:
            assert r["covers"] is False
    p = stats.binomtest(hits, len(table), 0.95).pvalue
    assert f"p = {p:.2g}" in results["own_cover_text"] and "exact binomial test" in results["own_cover_text"]
    dec = results["own_decision_table"]
    assert len(dec) == results["own_decisions"] == 6
    assert results["own_decided"] == sum(r["decided (interval excludes 0)"] for r in dec)
    assert f"decides {results['own_decided']} of the 6" in results["own_decision_text"]
    # "beats" only where Recall@10's interval of the difference excludes 0
    r10 = next(r for r in dec if r["metric"] == "recall@10")
    for key in ("own_decision_text", "own_decision_finding"):
        assert ("beats" in results[key]) == bool(r10["decided (interval excludes 0)"]), results[key]
        assert ("not told apart" in results[key]) == (not r10["decided (interval excludes 0)"]), results[key]


def test_prose_numbers_are_formatted(results):
    """Issue 47 item 40: no bare float with many digits, thousands separators, percentages beside percentages."""
    import re

    for key in ("own_dataset", "own_estimate_text", "own_decision_text", "own_plan_finding", "own_rule_text"):
        text = results[key]
        assert not re.search(r"\d\.\d{6,}", text), (key, text)
        assert not re.search(r"(?<![\d,.])\d{5,}(?![\d,])", text), (key, text)  # 5+ digits without separators
    assert f"{results['own_M']:,} test users" in results["own_dataset"]
    assert math.isfinite(results["own_seconds"])


def test_the_libraries_section_pairs_two_models_and_freezes_the_decoys(results):
    """implicit's ALS and Cornac's BPR through the adapters: one row per model and test user; the decoys
    written, read back and given again rank as the decoys returned."""
    assert results["eval_lib_rows"] == 2 * results["own_M"]
    assert results["eval_lib_same"] == "the same"
