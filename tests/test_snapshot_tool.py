"""tools/snapshot_results.py: the comparison finds every moved number, string, shape and missing
value, honours rtol/atol, and ignores timings."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("snapshot_results", ROOT / "tools" / "snapshot_results.py")
snap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(snap)


def _write(folder: Path, values) -> Path:
    folder.mkdir()
    (folder / "snapshot.json").write_text(json.dumps({"ch/results.json": values}))
    return folder


def test_compare_reports_each_difference(tmp_path, capsys):
    a = _write(tmp_path / "a", {"x": 1.0, "v": [1, 2.0], "s": "A", "run_seconds": 3.0, "fit_ms": 1.0, "sample_s": 2.0, "d": {"e": 1}, "n": None})
    b = _write(tmp_path / "b", {"x": 1.0 + 1e-12, "v": [1, 2.2], "s": "B", "run_seconds": 9.0, "fit_ms": 5.0, "sample_s": 7.0, "d": {"f": 1},
                                "n": None})
    assert snap.main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "/ch/results.json/v[1]: 2.0 -> 2.2" in out           # relative difference 0.2/2.2
    assert "rel 9.09e-02" in out
    assert "/ch/results.json/s: A -> B (differs)" in out
    assert "d/e: 1 -> <absent> (only in one)" in out and "d/f: <absent> -> 1 (only in one)" in out
    assert "run_seconds" not in out and "fit_ms" not in out and "sample_s" not in out and "/x:" not in out        # timings ignored; 1e-12 is within rtol
    assert "4 of 9 recorded values differ" in out


def test_compare_tolerances_and_identity(tmp_path, capsys):
    a = _write(tmp_path / "a", {"x": [1.0, 0.0, float("nan")]})
    b = _write(tmp_path / "b", {"x": [1.001, 1e-13, float("nan")]})
    assert snap.main(["compare", str(a), str(a)]) == 0
    assert snap.main(["compare", str(a), str(b)]) == 1          # 1e-3 relative > 1e-9
    assert snap.main(["compare", str(a), str(b), "--rtol", "2e-3"]) == 0   # 1e-13 within atol 1e-12
    assert snap.main(["compare", str(a), str(b), "--rtol", "2e-3", "--atol", "0"]) == 1
    c = _write(tmp_path / "c", {"x": [1.0, 0.0]})
    assert snap.main(["compare", str(a), str(c), "--rtol", "1"]) == 1      # shape
    assert "length 3 -> length 2 (shape)" in capsys.readouterr().out


def test_compare_refuses_bad_tolerance(tmp_path, capsys):
    a = _write(tmp_path / "a", {"x": 1.0})
    with pytest.raises(SystemExit) as e:
        snap.main(["compare", str(a), str(a), "--rtol", "-1"])
    assert e.value.code == 2
    assert "--rtol must be a finite number >= 0" in capsys.readouterr().err
