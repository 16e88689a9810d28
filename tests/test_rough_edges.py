"""The last rough edges found by trying bad input (issue 39, point 4): each case is refused naming
the argument, file or flag, or gives the right value where the input is valid."""

import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling import candidates, metrics, users
from itemsampling.cli import main
from itemsampling.data import fetch_movielens
from itemsampling.data.__main__ import _main as data_main
from itemsampling.estimators import estimate_metric
from itemsampling.inputs import InputError, read_rank_file


def test_estimate_refuses_a_fifo(tmp_path):
    fifo = tmp_path / "ranks.csv"
    os.mkfifo(fifo)  # no writer: opening it for reading would block forever
    with pytest.raises(InputError, match=r"ranks.csv: not a regular file \(a named pipe"):
        read_rank_file(fifo, 100, 10)


def test_estimate_cli_fifo_one_error_line(tmp_path, capsys):
    fifo = tmp_path / "ranks.csv"
    os.mkfifo(fifo)
    code = main(["estimate", str(fifo), "--n-items", "100", "--sample-size", "10"])
    err = capsys.readouterr().err
    assert code == 2 and "not a regular file" in err and err.count("\n") == 1


def test_model_column_cannot_be_the_rank_column(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("rank,model\n1,a\n2,b\n")
    with pytest.raises(InputError, match=r"column 'rank' cannot be both the rank column and the model column "
                                         r"\(named by --model-column\)"):
        read_rank_file(f, 100, 10, model_column="rank")
    t = read_rank_file(f, 100, 10)  # the valid file reads as before
    assert {m: r.tolist() for m, r in t.ranks.items()} == {"a": [1], "b": [2]}


def test_bootstrap_memory_checked_before_allocating(monkeypatch):
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(10**6))
    with pytest.raises(ValueError, match=r"resampled means needs .* of memory .*reduce n_boot"):
        users.confidence_interval([0, 1, 1], method="bootstrap", n_boot=10**9)
    lo, hi = users.confidence_interval([0, 1, 1, 0], method="bootstrap", n_boot=1000, rng=3)
    assert 0 <= lo < 0.5 < hi <= 1


def test_bootstrap_interval_same_draws_as_one_multinomial(monkeypatch):
    """The block-wise draws are the draws of one multinomial call (the same stream): the interval is
    the percentile interval of those means, whatever the block size."""
    x = np.array([0.3, 0.0, 1.0, 0.5, 0.5])
    g = np.random.default_rng(7)
    v, c = np.unique(x, return_counts=True)
    means = g.multinomial(x.size, c / x.size, size=500) @ v / x.size
    want = tuple(np.quantile(means, [(1 - 0.9) / 2, 1 - (1 - 0.9) / 2]))
    assert users.confidence_interval(x, 0.9, method="bootstrap", n_boot=500, rng=np.random.default_rng(7)) == want
    monkeypatch.setattr(users, "_BOOT_BLOCK", 12)  # blocks of 3 replicates of the 4 distinct values
    assert users.confidence_interval(x, 0.9, method="bootstrap", n_boot=500, rng=np.random.default_rng(7)) == want


def test_bootstrap_interval_of_values_near_the_float_limit():
    lo, hi = users.confidence_interval([1e308, -1e308], method="bootstrap", n_boot=200, rng=0)
    # two values: every resampled mean is -1e308, 0 or 1e308
    assert (lo, hi) == (-1e308, 1e308)
    assert users.confidence_interval([1e308] * 3, method="bootstrap", n_boot=50) == (1e308, 1e308)


def test_critical_value_in_the_far_tail():
    assert users.critical_value(1 - 1e-16) == pytest.approx(8.2924, abs=1e-4)
    # 1 - 1e-16 is the float 1 - 2**-53, so alpha / 2 = 2**-54
    assert users.critical_value(1 - 1e-16) == pytest.approx(stats.norm.isf(2.0**-54), rel=1e-12)
    assert users.critical_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    lo, hi = users.confidence_interval([0.2, 0.4, 0.6], confidence=1 - 1e-16, method="t")
    h = stats.t.isf(2.0**-54, 2) * 0.2 / np.sqrt(3)
    assert (lo, hi) == pytest.approx((0.4 - h, 0.4 + h))


def test_catalogue_beyond_64_bits_named():
    with pytest.raises(ValueError, match=r"n_items must fit in a 64-bit integer"):
        estimate_metric([1, 2], 2**63 + 10, 20, "recall", 10, method="mn_mes")


def test_popularity_prone_names_the_scores():
    with pytest.raises(ValueError, match=r"scores\['a'\] must be a finite number \(a popularity score\), got 'x'"):
        candidates.popularity_prone({"a": "x"}, 0.5)
    with pytest.raises(ValueError, match=r"scores\['a'\] must be a finite number .*got nan"):
        candidates.popularity_prone({"a": float("nan"), "b": 0.9}, 0.5)
    with pytest.raises(ValueError, match=r"reference must be"):
        candidates.popularity_prone({"a": 0.9}, float("nan"))
    assert candidates.popularity_prone({"a": 0.9, "b": 0.4, "c": 0.7}, 0.5) == ["a", "c"]


def test_popularity_score_refuses_a_repeated_item():
    with pytest.raises(ValueError, match=r"list 0 holds item 1 more than once"):
        candidates.popularity_score([[1, 1, 1]], [5, 1, 3])
    # popularity ranks of [5, 1, 3]: items 0, 1, 2 -> 3, 1, 2; padding -1 may repeat
    assert candidates.popularity_score([[1, 2, -1, -1], [0, -1, -1, -1]], [5, 1, 3]) == pytest.approx((1.5 + 3) / 2)


def test_set_metric_values_names_users_and_refuses_auc_cutoff():
    with pytest.raises(ValueError, match=r"users must hold user indices >= 0, got -1"):
        metrics.set_metric_values([1], [-1], "recall", 5)
    with pytest.raises(ValueError, match=r"k must be None for metric 'auc'"):
        metrics.set_metric_values([1, 3], [0, 0], "auc", k=5, n_items=10)
    # AUC of ranks {1, 3} in a list of 10: (10 - 1/2 - 2) / 8
    assert metrics.set_metric_values([1, 3], [0, 0], "auc", n_items=10)[0] == pytest.approx(7.5 / 8)


def test_fetch_without_network_and_a_corrupt_archive(tmp_path, monkeypatch, capsys):
    (tmp_path / "ml-100k.zip").write_bytes(b"not a zip")

    def offline(*a, **k):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(ValueError, match=r"cannot download .*ml-100k.zip \(Temporary failure in name resolution\), "
                                         r"and the archive .* fails its MD5 checksum"):
        fetch_movielens("ml-100k", tmp_path, progress=False)
    assert data_main(["fetch", "ml-100k", "--dest", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot download") and err.count("\n") == 1
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["ml-100k.zip"]  # no partial file left
    assert sys.modules["urllib.request"].urlopen is offline


def test_fractional_breaks_refused_and_integral_floats_accepted():
    from itemsampling.estimators.grid import rank_grid

    with pytest.raises(ValueError, match="breaks"):
        rank_grid(10_000, 100, breaks=[5000.7])
    a, b = rank_grid(10_000, 100, breaks=[5000.0]), rank_grid(10_000, 100, breaks=[5000])
    assert np.array_equal(a.starts, b.starts) if hasattr(a, "starts") else repr(a) == repr(b)


def test_bootstrap_memory_checked_before_drawing():
    from itemsampling.estimators import estimate_metric

    r = np.arange(1, 101)
    with pytest.raises(ValueError, match="reduce n_boot"):
        estimate_metric(r, 1000, 100, "recall", 500, "mle", ci=0.9, n_boot=10**12)
