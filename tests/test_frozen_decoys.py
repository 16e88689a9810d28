"""Several models on the same decoys, frozen and published decoys (issues 44 item 4, 46 item 2):
`sampled_ranks` with a dict of scorers draws the same decoys for every model (the fixed design: the same
items; the adaptive design: every model's decoys a prefix of one sequence per row) and keeps each model's
law; `return_decoys` / `decoys=` round-trip; the law of given decoys (with or without replacement) is
inferred or stated, and refused where no kernel fits; tables concatenate; `write_decoys` / `read_decoys`
round-trip the NCF and Elliot files; two models on frozen decoys go through `estimate` paired."""

import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

from test_evaluation import _adaptive_law  # the exact Algorithm 1 law of the evaluation tests

from itemsampling.data import map_ids, read_decoys, write_decoys
from itemsampling.evaluation import sampled_ranks
from itemsampling.inputs import InputError, read_rank_file

N = 8
A = np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]] * 3)
B = np.array([[0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]] * 3)
EXCL = sp.csr_matrix(([1, 1], ([0, 1], [7, 0])), shape=(3, N))


class Recorder:
    def __init__(self, table):
        self.table = table
        self.calls = []

    def __call__(self, users, items):
        self.calls.append((users.copy(), np.array(items)))
        return self.table[users[:, None], items]


def test_fixed_design_every_model_ranks_against_the_same_items():
    """The dict's models see exactly the same (user, items) calls; model a's ranks are those of a run of a
    alone with the same seed; each model's rank is brute force over the shared decoys."""
    users, targets = np.array([0, 1, 2, 2]), np.array([3, 4, 5, 0])
    a, b = Recorder(A), Recorder(B)
    tab = sampled_ranks({"a": a, "b": b}, users, targets, exclude=EXCL, n_items=N, sample_size=4, rng=3)
    assert list(tab.columns) == ["model", "user", "item", "rank", "sample_size", "n_items"]
    assert tab["model"].tolist() == ["a"] * 4 + ["b"] * 4 and tab.index.tolist() == [0, 1, 2, 3] * 2
    assert len(a.calls) == len(b.calls) == 1
    assert np.array_equal(a.calls[0][1], b.calls[0][1]) and np.array_equal(a.calls[0][0], b.calls[0][0])
    items = a.calls[0][1]
    for k, (name, S) in enumerate((("a", A), ("b", B))):
        got = tab[tab["model"] == name]["rank"].to_numpy()
        want = [1 + np.sum(S[u, items[r, 1:]] > S[u, t]) for r, (u, t) in enumerate(zip(users, targets))]
        assert got.tolist() == want
    alone = sampled_ranks(Recorder(A), users, targets, exclude=EXCL, n_items=N, sample_size=4, rng=3)
    assert alone["rank"].tolist() == tab[tab["model"] == "a"]["rank"].tolist()
    assert tab.attrs["models"] == 2 and tab.attrs["scorings"] == 2 * 4 * 4



def test_adaptive_design_every_model_consumes_a_prefix_of_one_sequence_and_keeps_its_law():
    """Two models that stop at different sizes: for every row the shorter of the two decoy sequences is a
    prefix of the longer (the same decoys at every stage both models reach), and each model's joint law of
    (n_u, r_u) is the exact one of Algorithm 1 (chi-square), pairing notwithstanding."""
    M, ladder = 4000, [2, 4, 8]
    targets = np.full(M, 6)  # model a: R = 2 of 8; model b: R = 3 of 8
    seen = {}

    def recorder(name, S):
        def score(u, items):
            seen.setdefault(name, []).append((u.copy(), np.array(items)))
            return S[u[:, None], items]
        return score

    # rows are told apart by their user id: one user per row
    users = np.arange(M)
    SA = np.tile(A[0], (M, 1))
    SB = np.tile(np.array([0.9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]), (M, 1))
    tab = sampled_ranks({"a": recorder("a", SA), "b": recorder("b", SB)}, users, targets, n_items=N,
                        design="adaptive", initial_size=2, max_size=8, rng=5)
    seq = {}
    for name, calls in seen.items():
        s = {r: [] for r in range(M)}
        for j, (u, items) in enumerate(calls):
            for r, row in zip(u, items):
                s[int(r)] += (row[1:] if j == 0 else row).tolist()
        seq[name] = s
    for r in range(M):
        x, y = seq["a"][r], seq["b"][r]
        short, long_ = (x, y) if len(x) <= len(y) else (y, x)
        assert long_[:len(short)] == short
    for name, R in (("a", 2), ("b", 3)):
        part = tab[tab["model"] == name]
        assert (part["sample_size"] - 1).tolist() == [len(seq[name][r]) for r in range(M)]
        law = _adaptive_law(R, N, ladder)
        obs = part.groupby(["sample_size", "rank"]).size()
        observed = {(int(a), int(b)): int(c) for (a, b), c in obs.items()}
        assert set(observed) <= {c for c, p in law.items() if p > 0}
        cells = [c for c, p in law.items() if p * M >= 5]
        o = np.array([observed.get(c, 0) for c in cells] + [M - sum(observed.get(c, 0) for c in cells)])
        e = np.array([law[c] * M for c in cells] + [M - sum(law[c] * M for c in cells)])
        keep = e > 0
        assert stats.chisquare(o[keep], e[keep] * o[keep].sum() / e[keep].sum()).pvalue > 1e-3


@pytest.mark.parametrize("design,kw", [("fixed", dict(sample_size=5)), ("adaptive", dict(initial_size=2, max_size=4))])
def test_returned_decoys_give_the_same_table_back_and_pair_later_models(design, kw):
    """A run's decoys, given back, reproduce its table; two models run together on given decoys get the
    tables of two separate runs on them (nothing is drawn); the adaptive decoys are the rows' whole sequences
    (n_max - 1 columns) and each row's rank is brute force over the prefix its size says."""
    rng = np.random.default_rng(0)
    M = 200
    users = rng.integers(0, 3, M)
    targets = np.array([rng.choice([j for j in range(N) if EXCL[u, j] == 0]) for u in users])
    SA = np.vstack([A[0] + 0.05 * rng.standard_normal(N) for _ in range(3)])
    fa = lambda u, i: SA[u[:, None], i]  # noqa: E731
    fb = lambda u, i: B[u[:, None], i]  # noqa: E731
    tab, D = sampled_ranks(fa, users, targets, exclude=EXCL, n_items=N, design=design, rng=4, return_decoys=True, **kw)
    width = kw.get("sample_size", kw.get("max_size")) - 1
    assert D.shape == (M, width) and D.dtype == np.int64
    assert not np.any(D == targets[:, None]) and not np.any(np.asarray(EXCL[users[:, None], D].todense()))
    again = sampled_ranks(fa, users, targets, exclude=EXCL, n_items=N, design=design, decoys=D, replacement=True, **kw)
    pd.testing.assert_frame_equal(tab, again, check_like=False)
    both = sampled_ranks({"a": fa, "b": fb}, users, targets, exclude=EXCL, n_items=N, design=design, decoys=D,
                         replacement=True, **kw)
    only_b = sampled_ranks(fb, users, targets, exclude=EXCL, n_items=N, design=design, decoys=D, replacement=True, **kw)
    assert both[both["model"] == "a"]["rank"].tolist() == tab["rank"].tolist()
    assert both[both["model"] == "b"]["rank"].tolist() == only_b["rank"].tolist()
    for r in range(0, M, 9):
        n_u = int(tab["sample_size"].iloc[r])
        u, t = users[r], targets[r]
        last = D[r, :n_u - 1] if design == "fixed" or n_u == kw["initial_size"] else D[r, n_u // 2 - 1:n_u - 1]
        assert tab["rank"].iloc[r] == 1 + np.sum(SA[u, last] > SA[u, t])


def test_the_law_of_given_decoys_is_inferred_or_refused():
    users, targets = np.array([0, 1, 2]), np.array([1, 2, 3])
    f = Recorder(A)
    distinct = np.array([[0, 2, 3], [1, 3, 4], [0, 1, 2]])
    tab = sampled_ranks(f, users, targets, n_items=N, decoys=distinct)
    assert tab.attrs["replacement"] is False and tab["replacement"].tolist() == [False] * 3
    assert "without replacement" in tab.attrs["decoys"] and tab["sample_size"].tolist() == [4] * 3
    repeated = np.array([[0, 0, 3], [1, 3, 4], [0, 1, 2]])
    tab = sampled_ranks(f, users, targets, n_items=N, decoys=repeated)
    assert tab.attrs["replacement"] is True and "replacement" not in tab.columns
    drawn = sampled_ranks(f, users, targets, n_items=N, sample_size=3, rng=0)
    assert drawn.attrs["decoys"].startswith("drawn: uniform with replacement")

    def bad(match, **kw):
        args = dict(n_items=N, decoys=distinct) | kw
        with pytest.raises(ValueError, match=match):
            sampled_ranks(Recorder(A), users, targets, **args)

    bad("replacement=False .* row 0 .* repeats a decoy", decoys=repeated, replacement=False)
    bad("without replacement .* cannot run the adaptive design", design="adaptive", initial_size=2, max_size=4)
    bad(r"at least max_size - 1 = 7 columns", design="adaptive", initial_size=2, max_size=8, replacement=True)
    bad(r"sample_size - 1 = 4 columns .* got 3", sample_size=5)
    bad("must not hold the row's target: row 1 .* target 2 in column 1", decoys=np.array([[0, 2, 3], [1, 2, 4],
                                                                                             [0, 1, 2]]))
    bad(r"from the row's pool: row 0 \(user 0\) has the excluded item 7 in column 2",
        decoys=np.array([[0, 2, 7], [1, 3, 4], [0, 1, 2]]), exclude=EXCL)
    bad(r"shape \(len\(users\), n - 1\) = \(3, n - 1\)", decoys=distinct[:2])
    bad("decoys must lie in 0..n_items - 1 = 7, got 8", decoys=np.array([[0, 2, 8], [1, 3, 4], [0, 1, 2]]))
    bad("decoys must hold integer item ids", decoys=distinct.astype(float))
    bad("design \"full\" ranks every item", design="full")
    bad("replacement=False describes given decoys", decoys=None, replacement=False, sample_size=3)
    bad("return_decoys must be", decoys=None, return_decoys="yes", sample_size=3)
    with pytest.raises(ValueError, match=r"score\['b'\] must be a function"):
        sampled_ranks({"a": f, "b": 3}, users, targets, n_items=N, sample_size=3)
    with pytest.raises(ValueError, match="non-empty dict"):
        sampled_ranks({}, users, targets, n_items=N, sample_size=3)
    with pytest.raises(ValueError, match="model names must be non-empty strings"):
        sampled_ranks({" a": f}, users, targets, n_items=N, sample_size=3)
    with pytest.raises(ValueError, match=r"score\['b'\] returned NaN for row 0"):
        sampled_ranks({"a": f, "b": lambda u, i: np.full(i.shape, np.nan)}, users, targets, n_items=N, sample_size=3)


def test_tables_concatenate_and_read_back_as_models(tmp_path):
    """Tables of separate runs concatenate (attrs hold numbers and text: kept where equal, dropped otherwise),
    and the CSV of the concatenation reads back as two models with users, and the replacement column."""
    users, targets = np.array([0, 1, 2]), np.array([1, 2, 3])
    distinct = np.array([[0, 2, 3], [1, 3, 4], [0, 1, 2]])
    ta = sampled_ranks({"a": Recorder(A)}, users, targets, n_items=N, decoys=distinct)
    tb = sampled_ranks({"b": Recorder(B)}, users, targets, n_items=N, decoys=distinct)
    both = pd.concat([ta, tb])
    assert len(both) == 6 and both.attrs == {}
    same = pd.concat([ta, ta])
    assert same.attrs == ta.attrs and all(isinstance(v, (int, float, str, bool)) for v in ta.attrs.values())
    path = tmp_path / "ranks.csv"
    both.to_csv(path, index=False)
    got = read_rank_file(path, None, None)
    assert got.models == ["a", "b"] and got.replacement == {"a": False, "b": False}
    assert got.ranks["b"].tolist() == tb["rank"].tolist() and got.users["a"].tolist() == ["0", "1", "2"]
    bad = both.assign(n_items=[8, 7, 8, 8, 7, 8])
    bad.to_csv(path, index=False)
    with pytest.raises(InputError, match="without replacement .* from per-user pools"):
        read_rank_file(path, None, None)
    both.assign(replacement=[False, True, False, False, False, False]).to_csv(path, index=False)
    with pytest.raises(InputError, match="line 3, column 'replacement': model 'a' mixes rows"):
        read_rank_file(path, None, None)
    both.assign(replacement="maybe").to_csv(path, index=False)
    with pytest.raises(InputError, match="line 2, column 'replacement': 'maybe' is not true/false"):
        read_rank_file(path, None, None)
    plain = read_rank_file(_write(tmp_path, sampled_ranks(Recorder(A), users, targets, n_items=N, sample_size=3,
                                                          rng=0)), None, None)
    assert plain.replacement == {"model": None}


def _write(tmp_path, tab):
    p = tmp_path / "plain.csv"
    tab.to_csv(p, index=False)
    return p


def test_decoys_files_round_trip_ncf_and_elliot(tmp_path):
    """write_decoys -> read_decoys gives the arrays back (integer ids: NCF's '(u,i)'; string ids: the quoted
    tuple Elliot reads); a hand-written Elliot line '(u, i)' reads; ids map to a frame's 0-based ids; bad
    files are refused naming the line and field."""
    U, T = np.array([3, 5]), np.array([10, 11])
    D = np.array([[1, 2, 12], [10, 2, 7]])
    p = write_decoys(tmp_path / "ml.test.negative", U, T, D)
    assert p.read_text().splitlines()[0] == "(3,10)\t1\t2\t12"
    u, t, d = read_decoys(p)
    assert u.tolist() == [3, 5] and t.tolist() == [10, 11] and d.tolist() == D.tolist() and d.dtype == np.int64
    item_ids = np.array([1, 2, 7, 10, 11, 12])
    _, t0, d0 = read_decoys(p, item_ids=item_ids)
    assert t0.tolist() == [3, 4] and d0.tolist() == [[0, 1, 5], [3, 1, 2]]
    q = write_decoys(tmp_path / "elliot.tsv", np.array(["u1", "u2"]), np.array(["i9", "i8"]),
                     np.array([["i1", "i2"], ["i3", "i9"]]))
    assert q.read_text().splitlines()[0] == "('u1', 'i9')\ti1\ti2"
    u, t, d = read_decoys(q)
    assert u.tolist() == ["u1", "u2"] and t.tolist() == ["i9", "i8"] and d.tolist() == [["i1", "i2"], ["i3", "i9"]]
    h = tmp_path / "by_hand.tsv"
    h.write_text("(0, 4)\t1\t2\n(1, 2)\t3\t0\n")
    assert read_decoys(h)[2].tolist() == [[1, 2], [3, 0]]
    assert map_ids(np.array(["b", "a"]), np.array(["a", "b", "c"])).tolist() == [1, 0]
    for text, match in [("(0,4)\t1\t2\n(1,2)\t3\n", "line 2 has 1 decoys, line 1 has 2"),
                        ("0,4\t1\t2\n", r"line 1, field 1 must be '\(user,test_item\)'"),
                        ("(0,4)\t1\t4\n", r"line 1, field 3 \(decoy\) equals the test item 4"),
                        ("(0,4)\t1\tx\n", r"line 1, field 3 \(decoy\) is not an integer item id"),
                        ("\n", "no lines")]:
        h.write_text(text)
        with pytest.raises(ValueError, match=match):
            read_decoys(h)
    with pytest.raises(ValueError, match="item id 12 is not in the data's items"):
        read_decoys(p, item_ids=np.array([1, 2, 7, 10, 11]))
    with pytest.raises(ValueError, match="must not hold the row's target: row 1"):
        write_decoys(tmp_path / "x", U, T, D.copy() * 0 + np.array([[1], [11]]))


def test_two_models_on_frozen_decoys_give_the_paired_comparison(tmp_path, capsys):
    """Published decoys drawn without replacement (99 a row, no repeats), written and read back, rank two
    models of clearly different quality; the table (model, user, replacement columns) goes through
    `estimate --without-replacement` and its comparison is paired and decides; the ranks are brute force."""
    from itemsampling.cli import main

    rng = np.random.default_rng(2)
    Nc, M = 400, 600
    targets = rng.integers(0, Nc, M)
    q = rng.standard_normal(Nc)
    bonus_a, bonus_b = rng.exponential(3.0, M), rng.exponential(0.3, M)

    def model(bonus):
        return lambda u, i: q[i] + bonus[u][:, None] * (i == targets[u][:, None])

    D = np.empty((M, 99), dtype=np.int64)
    for r in range(M):
        D[r] = rng.choice(np.setdiff1d(np.arange(Nc), [targets[r]]), 99, replace=False)
    f = write_decoys(tmp_path / "data.test.negative", np.arange(M), targets, D)
    users, tg, dec = read_decoys(f)
    tab = sampled_ranks({"good": model(bonus_a), "weak": model(bonus_b)}, users, tg, n_items=Nc, decoys=dec)
    assert tab.attrs["replacement"] is False
    for name, bonus in (("good", bonus_a), ("weak", bonus_b)):
        got = tab[tab["model"] == name]["rank"].to_numpy()
        s_t = q[targets] + bonus
        assert got.tolist() == (1 + np.sum(q[D] > s_t[:, None], axis=1)).tolist()
    path = tmp_path / "ranks.csv"
    tab.to_csv(path, index=False)
    assert main(["estimate", str(path), "--metric", "recall", "--k", "20", "--without-replacement", "--json",
                 "--n-boot", "200", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    (cmp,) = out["comparisons"]
    assert cmp["paired"] is True and cmp["told_apart"] is True


def test_the_file_s_replacement_column_chooses_the_kernel(tmp_path, capsys):
    """A table whose `replacement` column is false is read with the without-replacement kernel without the flag
    (the same numbers as with `--without-replacement`); a contradicting flag and a mix of laws are refused."""
    from itemsampling.cli import main

    rng = np.random.default_rng(5)
    rows = [{"model": m, "user": u, "rank": int(rng.integers(1, 30)), "sample_size": 100, "n_items": 500,
             "replacement": False} for m in ("a", "b") for u in range(300)]
    path = tmp_path / "ranks.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    args = ["estimate", str(path), "--metric", "recall", "--k", "20", "--json", "--n-boot", "50", "--quiet"]
    assert main(args) == 0
    by_column = json.loads(capsys.readouterr().out)
    assert main(args + ["--without-replacement"]) == 0
    by_flag = json.loads(capsys.readouterr().out)
    assert [r["estimate"] for r in by_column["estimates"]] == [r["estimate"] for r in by_flag["estimates"]]
    # the with-replacement kernel gives other numbers on the same ranks: the column was read
    pd.DataFrame([{**r, "replacement": True} for r in rows]).to_csv(path, index=False)
    assert main(args) == 0
    with_repl = json.loads(capsys.readouterr().out)
    assert [r["estimate"] for r in with_repl["estimates"]] != [r["estimate"] for r in by_column["estimates"]]
    assert main(args + ["--without-replacement"]) != 0
    assert "drawn with replacement, but --without-replacement was given" in capsys.readouterr().err
    pd.DataFrame([{**r, "replacement": r["model"] == "a"} for r in rows]).to_csv(path, index=False)
    assert main(args) != 0
    assert "one run reads one kernel" in capsys.readouterr().err
