"""Helpers for the notebooks: recording values and tie-aware orders."""

import json

import numpy as np
import pytest

from itemsampling import book


def test_order_string_ties_and_strict():
    assert book.order_string({"A": 0.0, "B": 0.0, "C": 0.2}) == "C > A = B"
    assert book.order_string({"A": 1.0, "B": 0.9999999999999998, "C": 1.0}) in ("A = B = C", "A = C = B", "C = A = B")
    assert book.order_string({"A": 3, "B": 1, "C": 2}) == "A > C > B"
    assert book.order_string({"A": 3, "B": 1}, higher_is_better=False) == "B < A"


def test_order_string_bad_input():
    with pytest.raises(ValueError, match="values"):
        book.order_string({})
    with pytest.raises(ValueError, match="atol"):
        book.order_string({"A": 1}, atol=-1)
    with pytest.raises(ValueError, match="not finite"):
        book.order_string({"A": 1.0, "B": np.nan})


def test_record_writes_json(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    monkeypatch.setenv(book.RESULTS_ENV, str(path))
    book.record("x", np.float64(0.5))
    book.record("arr", np.arange(3))
    book.record("nested", {"a": (1, 2.5), "b": np.int64(4)})
    assert json.loads(path.read_text()) == {"x": 0.5, "arr": [0, 1, 2], "nested": {"a": [1, 2.5], "b": 4}}
    assert book.recorded()["x"] == 0.5


def test_record_refuses_nan_and_bad_names():
    with pytest.raises(ValueError, match="not finite"):
        book.record("bad", float("nan"))
    with pytest.raises(ValueError, match="name"):
        book.record("", 1)
    with pytest.raises(ValueError, match="cannot record"):
        book.record("obj", object())


def test_record_text(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    monkeypatch.setenv(book.RESULTS_ENV, str(path))
    assert book.record_text("sentence", "A beats *B*") == "A beats *B*"
    assert json.loads(path.read_text()) == {"sentence": "A beats *B*"}
    with pytest.raises(ValueError, match="text must be a string"):
        book.record_text("bad", 3)
