"""Speed of reading and validating a rank file (`python -m itemsampling estimate`): 1,000,000 rows
(five models x 200,000 users), vectorised column checks against a straightforward row-by-row
reader with the csv module. Run with `make bench`."""

import csv

import numpy as np
import pandas as pd
import pytest

from itemsampling.cli import read_rank_file

N, n, M, MODELS = 25_815, 100, 200_000, 5


@pytest.fixture(scope="module")
def rank_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    p = tmp_path_factory.mktemp("bench") / "ranks.csv"
    pd.DataFrame({"user": np.tile(np.arange(M), MODELS), "model": np.repeat([f"m{i}" for i in range(MODELS)], M),
                  "rank": rng.integers(1, n + 1, M * MODELS)}).to_csv(p, index=False)
    return p


def row_by_row(path, n_items, sample_size):
    """The straightforward reader: one Python check per cell, first error raised with its line."""
    ranks, seen = {}, set()
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        for line, row in enumerate(reader, start=2):
            text = row["rank"]
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"{path}, line {line}, column 'rank': {text!r} is not a number") from None
            if not value.is_integer() or not 1 <= value <= sample_size:
                raise ValueError(f"{path}, line {line}, column 'rank': {text!r} out of range")
            key = (row["model"], row["user"])
            if key in seen:
                raise ValueError(f"{path}, line {line}: duplicate user")
            seen.add(key)
            ranks.setdefault(row["model"], []).append(int(value))
    return {m: np.array(v) for m, v in ranks.items()}


def test_bench_read_rank_file(benchmark, rank_file):
    table = benchmark.pedantic(read_rank_file, args=(rank_file, N, n), rounds=3, iterations=1)
    assert len(table.models) == MODELS and table.ranks["m0"].size == M


def test_bench_read_row_by_row(benchmark, rank_file):
    ranks = benchmark.pedantic(row_by_row, args=(rank_file, N, n), rounds=3, iterations=1)
    assert len(ranks) == MODELS and ranks["m0"].size == M
