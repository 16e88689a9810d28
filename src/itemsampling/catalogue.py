r"""Global ranks at catalogue scale (the TORS-shaped datasets ``sim-pinterest20``, ``sim-yelp``,
``sim-ml20m``; :mod:`itemsampling.data.simulator`) without the book's full model zoo.

At :math:`N` = 20,720 items EASE's :math:`N\times N` Gram matrix (3.4 GB) and the dense item-kNN
similarities do not fit the book's budget, and fitting iALS on ten million interactions takes
minutes on two cores. The models here need no iterative training:

* ``popular``: the training count of each item (:class:`itemsampling.models.Popular`);
* ``svd<d>`` (e.g. ``svd16``): PureSVD (Cremonesi, Koren & Turrin 2010) of rank :math:`d`: item
  factors :math:`V` = the top :math:`d` right singular vectors of the binary training matrix
  :math:`X` (randomised range finder with two power iterations, Halko, Martinsson & Tropp 2011,
  Alg. 4.4), scores :math:`x_u V V^\top`. The rank :math:`d` sets how personal, and how
  accurate, the model is.

The split is :func:`itemsampling.data.leave_last_out` (each user's last event held out); ranks are
among the items outside the user's training set (``exclude_train=True`` of
:func:`itemsampling.ranking.global_ranks`), ties broken at random. Scores are computed in chunks of
users (float32 products, memory ``chunk x N``), never the :math:`M\times N` matrix. Results are
cached under ``data/cache/ranks/<dataset>/`` keyed on the dataset's configuration, the model,
``rng`` and the source of the functions that compute them.
"""

from __future__ import annotations

import inspect
import re
import time

import numpy as np
import scipy.sparse as sp

from . import estimators as est
from ._parallel import parallel_map
from ._validation import ResolutionWarning, check_bool, check_int, check_real
from .data import CACHE_VERSION, DATASETS, atomic_save_npz, cache_dir, load_dataset, load_npz, stable_hash
from .estimators.corrected import _metric_matrix
from .estimators.grid import _single_blas_thread
from .metrics import metric_curve
from .ranking import _take_training_off
from .sampling import adaptive_sample_ranks, sample_ranks

__all__ = ["catalogue_ranks", "catalogue_split", "user_against_item", "estimate_draws", "adaptive_seed",
           "CATALOGUE_MODELS"]

#: The default models at catalogue scale.
CATALOGUE_MODELS = ("popular", "svd4", "svd16", "svd64", "svd128")
_SVD = re.compile(r"^svd([1-9][0-9]*)$")


def _check_model(name) -> str:
    if not isinstance(name, str) or not (name == "popular" or _SVD.match(name)):
        raise ValueError(f"model must be 'popular' or 'svd<d>' (d a positive integer, e.g. 'svd16'), got {name!r}")
    return name


def catalogue_split(dataset: str):
    """``(X, users, targets)``: the binary training matrix (CSR, users x items) after holding out each
    user's last event, and the held-out item of every user (users ``0..M-1``)."""
    if not isinstance(dataset, str) or dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {dataset!r}")
    df = load_dataset(dataset)
    u = df["user"].to_numpy(np.int64)
    i = df["item"].to_numpy(np.int64)
    ts = df["timestamp"].to_numpy(np.int64)
    order = np.lexsort((ts, u))
    u, i = u[order], i[order]
    M, N = int(df.attrs["n_users"]), int(df.attrs["n_items"])
    last = np.ones(u.size, dtype=bool)
    last[:-1] = u[1:] != u[:-1]
    counts = np.bincount(u, minlength=M)
    if counts.min() < 2:
        raise ValueError(f"every user of {dataset} needs >= 2 interactions to hold one out")
    X = sp.csr_matrix((np.ones(int((~last).sum()), dtype=np.float32), (u[~last], i[~last])), shape=(M, N))
    X.sum_duplicates()
    X.data[:] = 1.0
    return X, np.arange(M, dtype=np.int64), i[last]


def _item_factors(X: sp.csr_matrix, d: int, rng: np.random.Generator) -> np.ndarray:
    """Top ``d`` right singular vectors of ``X`` (N x d), randomised range finder with oversampling
    10 and two power iterations (Halko et al. 2011, Alg. 4.4)."""
    N = X.shape[1]
    k = min(d + 10, N)
    Xt = X.T.tocsr()
    Q = np.linalg.qr(Xt @ (X @ rng.standard_normal((N, k)).astype(np.float32)))[0]
    for _ in range(2):
        Q = np.linalg.qr(Xt @ (X @ Q))[0]
    B = (X @ Q).astype(np.float64)  # M x k: X restricted to the range; its right vectors give V
    _, _, vt = np.linalg.svd(B.T @ B, hermitian=True)
    return (Q @ vt[:d].T).astype(np.float32)


def _ranks_from_scores(score_chunk, X: sp.csr_matrix, targets: np.ndarray, rng: np.random.Generator,
                       chunk: int, block: int = 256, item_scores=None) -> tuple[np.ndarray, np.ndarray]:
    """Ranks of the targets among the items outside each user's training set, ties at random;
    ``score_chunk(lo, hi)`` returns the scores of users ``lo..hi-1`` (hi - lo x N); or, with
    ``item_scores`` (``score_chunk`` then ``None``), every user's scores are those item scores.

    The items above and tied with the target are counted over all items, then the user's training
    items (other than the target) are taken out of the counts (:func:`itemsampling.ranking._take_training_off`):
    the same counts as leaving them out of the scores first. Scores are computed ``block`` users at
    a time (a block of scores stays in the processor's cache while it is counted); the ties are
    broken by one draw per ``chunk`` users, so the ranks do not depend on ``block``. A popularity
    score (``item_scores``) is the same for every user, so its counts come from the sorted scores (searchsorted),
    without a users x items matrix."""
    M, N = X.shape
    above = np.empty(M, dtype=np.int64)
    tied = np.empty(M, dtype=np.int64)
    pools = N - np.diff(X.indptr).astype(np.int64) + np.asarray(X[np.arange(M), targets]).ravel().astype(np.int64)
    if item_scores is not None:
        pop = np.asarray(item_scores)
        order = np.sort(pop)
        t = pop[targets]
        hi_ = np.searchsorted(order, t, side="right")
        above[:] = N - hi_
        tied[:] = hi_ - np.searchsorted(order, t, side="left") - 1
        _take_training_off(above, tied, lambda r, c: pop[c], t, X, targets)
    else:
        for lo in range(0, M, block):
            hi = min(lo + block, M)
            S = score_chunk(lo, hi)
            t = S[np.arange(hi - lo), targets[lo:hi]]
            above[lo:hi] = np.count_nonzero(S > t[:, None], axis=1)
            tied[lo:hi] = np.count_nonzero(S == t[:, None], axis=1) - 1
            _take_training_off(above[lo:hi], tied[lo:hi], S, t, X[lo:hi], targets[lo:hi])  # views: in place
    ranks = np.empty(M, dtype=np.int64)
    for lo in range(0, M, chunk):
        hi = min(lo + chunk, M)
        ranks[lo:hi] = 1 + above[lo:hi] + rng.integers(0, tied[lo:hi] + 1)
    return ranks, pools


def _model_ranks(name: str, X, targets, seed: int, chunk: int):
    rng = np.random.default_rng(np.random.SeedSequence([seed, sum(map(ord, name))]))
    if name == "popular":
        pop = np.asarray(X.sum(axis=0)).ravel().astype(np.float32)
        return _ranks_from_scores(None, X, targets, rng, chunk, item_scores=pop)
    d = int(_SVD.match(name).group(1))
    if d >= X.shape[1]:
        raise ValueError(f"model {name!r}: the rank d must be smaller than the catalogue ({X.shape[1]} items)")
    V = _item_factors(X, d, rng)
    P = np.asarray(X @ V, dtype=np.float32)  # M x d user profiles projected on the factors
    return _ranks_from_scores(lambda lo, hi: P[lo:hi] @ V.T, X, targets, rng, chunk)


def catalogue_ranks(dataset: str, models=CATALOGUE_MODELS, rng: int = 0, chunk: int = 2048,
                    progress: bool = False) -> dict:
    """Global ranks of every user's held-out item under the catalogue-scale ``models`` (module
    docstring) on a simulated ``dataset``; cached. Returns ``{"ranks": {model: int64 array},
    "pools": int64 array, "n_items": N, "seconds": {model: seconds}}``."""
    if isinstance(models, str):
        models = [models]
    names = [_check_model(m) for m in models]
    if not names or len(set(names)) != len(names):
        raise ValueError("models must name at least one model, without repeats")
    seed = check_int(rng, "rng", low=0)
    chunk = check_int(chunk, "chunk", low=1)
    progress = check_bool(progress, "progress")
    if not isinstance(dataset, str) or dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {dataset!r}")
    config = dict(DATASETS[dataset].__dict__)
    # keyed on the code that computes the ranks (not the whole module: the summaries below do not
    # change them)
    code = stable_hash([inspect.getsource(f) for f in (catalogue_split, _item_factors, _ranks_from_scores,
                                                        _take_training_off, _model_ranks, catalogue_ranks)])
    out, seconds, split, pools = {}, {}, None, None
    for name in names:
        key = stable_hash({"v": CACHE_VERSION, "code": code, "dataset": dataset, "config": config, "model": name,
                           "rng": seed})
        path = cache_dir("ranks", dataset) / f"catalogue-{name}-{key}.npz"
        z = load_npz(path, cache_key=key)
        if z is not None and z["ranks"].size and z["ranks"].min() >= 1 and np.all(z["ranks"] <= z["pools"]):
            out[name], pools, seconds[name] = z["ranks"], z["pools"], float(z["seconds"])
            continue
        if split is None:
            split = catalogue_split(dataset)
        if progress:
            print(f"ranks of {name} on {dataset} ...", flush=True)
        t = time.perf_counter()
        ranks, pools = _model_ranks(name, split[0], split[2], seed, chunk)
        seconds[name] = time.perf_counter() - t
        atomic_save_npz(path, cache_key=key, ranks=ranks, pools=pools, seconds=np.float64(seconds[name]))
        out[name] = ranks
    return {"ranks": out, "pools": pools, "n_items": int(DATASETS[dataset].n_items), "seconds": seconds}


#: The fixed-size estimators of TORS Table 5 (chapter 7), in the table's order.
TABLE5_FIXED = {"BV_MES": "bv_mes", "BV_MLE": "bv_mle", "MN_MES": "mn_mes", "MN_MLE": "mn_mle"}


def relative_error(estimates, truth) -> np.ndarray:
    """Per row of ``estimates`` (repeats x K): the mean over the cut-offs with ``truth > 0`` of
    ``|estimate - truth| / truth``, in percent (TORS Sec. 8.3, the measure of their Table 5)."""
    est = np.atleast_2d(np.asarray(estimates, dtype=np.float64))
    t = np.asarray(truth, dtype=np.float64)
    keep = t > 0
    return 100 * np.mean(np.abs(est[:, keep] - t[keep]) / t[keep], axis=1)


def adaptive_seed(seed: int, ranks, n_items: int, repeat: int) -> list[int]:
    """The seed of repeat ``repeat``'s adaptive draw (TORS Algorithm 1) on one model's global
    ``ranks`` in a catalogue of ``n_items``: ``[seed, d, repeat, 1]``, ``d`` a 62-bit digest of
    ``(n_items, ranks)``. It is keyed on the ranks, not on the model's position in a list, so
    :func:`adaptive_against_fixed` (chapter 8, Table 8.5) and :func:`user_against_item` (chapter 9,
    Tables 9.3-9.4) draw the *same* adaptive samples, and print the same adaptive MLE errors, for
    the same seed, ranks and sizes."""
    import hashlib

    R = np.ascontiguousarray(np.asarray(ranks, dtype="<i8"))
    h = hashlib.sha256(np.int64(n_items).tobytes() + R.tobytes()).digest()
    return [int(seed), int.from_bytes(h[:8], "little") >> 2, int(repeat), 1]


def _one_table5_repeat(R, N, n0, n_max, n_fix, ks, seed, gamma, eta, grid):
    """One repeat of :func:`adaptive_against_fixed` for one model: (adaptive Recall@K, {fixed
    estimator: Recall@K}, average adaptive size). ``seed`` is ``(adaptive seed, fixed-size seed)``."""
    ra, sa = adaptive_sample_ranks(R, N, n0, n_max, np.random.default_rng(seed[0]))
    ad = est.estimate_metric(ra, N, sa, "recall", ks, "mle", grid=grid)
    r = sample_ranks(R, N, n_fix, np.random.default_rng(seed[1]))
    res = est.estimate_metrics(r, N, n_fix, ["recall"], ks, list(TABLE5_FIXED.values()), gamma=gamma, eta=eta,
                               grid=grid)
    return ad, {lab: res[meth]["recall"] for lab, meth in TABLE5_FIXED.items()}, float(sa.mean())


def _blas1(fn, *args):
    with _single_blas_thread():  # many small products: one BLAS thread per worker is faster
        return fn(*args)


def adaptive_against_fixed(global_ranks, n_items: int, initial_size: int, max_size: int, fixed_size: int,
                           n_repeats: int, ks, rng=0, gamma: float = 0.01, eta: float = 0.01,
                           grid=None, n_jobs: int = 1) -> dict:
    r"""One row of TORS Table 5 per model: in each of ``n_repeats`` repeats, adaptive sampling
    (Algorithm 1, :math:`n_0` = ``initial_size`` to :math:`n_{max}` = ``max_size``) estimated by
    adaptive MLE (EM of Appendix H), and an independent fixed-size sample of ``fixed_size`` items
    estimated by BV_MES, BV_MLE, MN_MES and MN_MLE (priors learnt from the same sample, ``gamma``,
    ``eta``), decoys with replacement; Recall@K for ``ks``.

    ``grid`` is passed to :func:`itemsampling.estimators.estimate_metrics` (``None``: the dense
    estimators unless the kernel exceeds 2 GiB; ``True``: the catalogue-scale grid, which agrees
    with the dense estimators to about 1e-8 and is 10x faster at N = 25,815, n = 500).

    Repeat ``j`` of a model with ranks ``R`` draws its adaptive sample from
    ``numpy.random.default_rng(adaptive_seed(seed, R, N, j))`` and its fixed-size sample from
    ``default_rng(adaptive_seed(seed, R, N, j)[:3] + [0])``: keyed on the ranks, not on the model's
    position, so :func:`user_against_item` draws the same adaptive samples and two catalogues run
    with one seed draw independently (``rng``: a non-negative int seed, or a Generator from which
    one is drawn), so the result does
    not depend on ``n_jobs``, the number of worker processes (joblib; 1 runs in this process), nor on
    the Dask cluster that runs the repeats when ``$ITEMSAMPLING_SCHEDULER`` names one
    (:func:`itemsampling._parallel.parallel_map`; ``python -m itemsampling.run ... --scheduler``).

    Returns ``{model: {"adaptive": (repeats,) relative errors (%), "fixed": {name: (repeats,)},
    "mean_size": (repeats,) average adaptive size}}`` (:func:`relative_error` against the exact
    Recall@K of the ranks)."""
    N = check_int(n_items, "n_items", low=2)
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    n_jobs = check_int(n_jobs, "n_jobs", low=1)
    ks = np.asarray(ks, dtype=np.int64)
    seed = int(rng.integers(2**62)) if isinstance(rng, np.random.Generator) else check_int(rng, "rng", low=0)
    tasks = [(i, j) for i in range(len(global_ranks)) for j in range(n_repeats)]
    ranks = [np.asarray(R) for R in global_ranks.values()]
    keys = [adaptive_seed(seed, ranks[i], N, j) for i, j in tasks]
    args = [(ranks[i], N, int(initial_size), int(max_size), int(fixed_size), ks, (key, key[:3] + [0]), gamma, eta,
             grid) for (i, j), key in zip(tasks, keys)]
    done = parallel_map(_blas1, [(_one_table5_repeat, *a) for a in args], n_jobs)
    out = {}
    for i, m in enumerate(global_ranks):
        mine = done[i * n_repeats:(i + 1) * n_repeats]
        truth = metric_curve(ranks[i], "recall", ks, n_items=N)
        out[m] = {"adaptive": relative_error([d[0] for d in mine], truth),
                  "fixed": {lab: relative_error([d[1][lab] for d in mine], truth) for lab in TABLE5_FIXED},
                  "mean_size": np.array([d[2] for d in mine])}
    return out


def _estimate_draw(N, initial, adaptive, samples, ks, metrics, methods, gamma, eta, replacement):
    """The estimates of one drawn repeat of one model (:func:`estimate_draws`) and the seconds each took."""
    import warnings

    r0, n0 = initial
    ra, sa = adaptive
    out, secs = [], []
    with warnings.catch_warnings():
        # cut-offs below one kernel width: the chapter measures what that costs (the blind spot)
        warnings.simplefilter("ignore", ResolutionWarning)
        t0 = time.perf_counter()
        init = est.estimate_metric(r0, N, n0, metrics[0], ks, "mle", replacement=replacement)
        t1 = time.perf_counter()
        ad = est.estimate_metrics(ra, N, sa, metrics, ks, "mle", replacement=replacement)["mle"]
        t2 = time.perf_counter()
        for r, n in samples:
            t = time.perf_counter()
            out.append(est.estimate_metrics(r, N, n, metrics, ks, methods, gamma=gamma, eta=eta,
                                            replacement=replacement))
            secs.append(time.perf_counter() - t)
    return {"initial": init, "adaptive": ad, "samples": out, "seconds": [t1 - t0, t2 - t1, *secs]}


def estimate_draws(draws, n_items: int, ks, metrics, methods, gamma: float = 0.01, eta: float = 0.01,
                   replacement: bool = True, n_jobs: int = 1) -> list:
    r"""The estimates of chapter 8's main experiment for sampled ranks already drawn (so the draws
    keep the one random stream of the chapter, in its order): for every draw ``(initial, adaptive,
    samples)``, with ``initial = (r, n_0)``, ``adaptive = (r, n_u)`` (:func:`adaptive_sample_ranks`)
    and ``samples`` a list of fixed-size ``(r, n)``,

    * MLE (EM) of Recall@K (``metrics[0]``) at ``ks`` on the initial-size ranks,
    * adaptive MLE (TORS Appendix H) of every metric on the adaptive ranks,
    * every method of ``methods`` (``gamma``, ``eta``) of every metric on each fixed-size sample,

    exactly as :func:`itemsampling.estimators.estimate_metric(s)` compute them, decoys with or without
    ``replacement``. The draws are estimated in ``n_jobs`` worker processes (one BLAS thread each;
    :func:`itemsampling._parallel.parallel_map`, or the Dask cluster of ``$ITEMSAMPLING_SCHEDULER``);
    no estimate uses a random number, so the result does not depend on ``n_jobs`` nor on where it ran.

    Returns one dict per draw: ``"initial"`` (len(ks),), ``"adaptive"`` {metric: (len(ks),)},
    ``"samples"`` [{method: {metric: (len(ks),)}}] and ``"seconds"``: the time of the initial, the
    adaptive and each fixed-size estimate."""
    N = check_int(n_items, "n_items", low=2)
    n_jobs = check_int(n_jobs, "n_jobs", low=1)
    replacement = check_bool(replacement, "replacement")
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    methods = [methods] if isinstance(methods, str) else list(methods)
    if not metrics or not methods:
        raise ValueError("metrics and methods must not be empty")
    ks = np.asarray(ks, dtype=np.int64)
    tasks = [(_estimate_draw, N, tuple(d[0]), tuple(d[1]), [tuple(x) for x in d[2]], ks, metrics, methods, gamma,
              eta, replacement) for d in draws]
    return parallel_map(_blas1, tasks, n_jobs)


def paired_se(a, b) -> float:
    """Standard error of the mean of the paired differences ``a - b`` (same repeats); ``inf`` for
    fewer than two pairs."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("inf")


def table5_row(run: dict) -> dict:
    """Summary of one model's :func:`adaptive_against_fixed` run: adaptive MLE's mean error, the
    best fixed-size estimator (smallest mean error) and its mean, the average adaptive size, the
    paired SE of adaptive minus best fixed, and ``verdict``: ``"wins"`` / ``"loses"`` when the
    paired difference is beyond two SEs, else ``"tie"``."""
    best = min(run["fixed"], key=lambda lab: float(np.mean(run["fixed"][lab])))
    diff = float(np.mean(run["adaptive"] - run["fixed"][best]))
    se = paired_se(run["adaptive"], run["fixed"][best])
    verdict = "wins" if diff < -2 * se else "loses" if diff > 2 * se else "tie"
    return {"adaptive_mle": float(np.mean(run["adaptive"])), "best_fixed": float(np.mean(run["fixed"][best])),
            "best_fixed_name": best, "average_size": float(np.mean(run["mean_size"])), "se_paired": se,
            "difference": diff, "verdict": verdict}


#: TORS's terminal size n_max (Sec. 8.4, on all three of their catalogues).
TORS_MAX_SIZE = 3200
#: n_max / n_0 of the book's size rule: four doublings (:func:`initial_size_rule`).
LADDER_RATIO = 16


def initial_size_rule(max_size: int) -> int:
    r"""The book's :math:`n_0` for a given :math:`n_{max}`: :math:`n_{max}/16`, four doublings
    (halved further only while the result is an integer >= 2, for the smallest :math:`n_{max}`).

    Derivation, from TORS Table 5's average adaptive sizes: every user gets at least :math:`n_0`
    items, so :math:`n_0` is at most the smallest average size TORS print for a dataset, 259.77 on
    pinterest-20, 288.70 on yelp and 705.76 on ml-20m. With their :math:`n_{max}` = 3,200 =
    :math:`n_0 2^t`, yelp leaves :math:`n_0 \in \{200, 100, 50, \dots\}`; the rule takes the largest,
    200 = 3,200/16, which is also below the pinterest-20 and ml-20m bounds. The same ratio serves every
    :math:`n_{max}` (:func:`scaled_sizes`), so chapters 8 and 9 use one rule."""
    n = check_int(max_size, "max_size", low=2)
    steps = 0
    while n % 2 == 0 and n // 2 >= 2 and (1 << steps) < LADDER_RATIO:
        n //= 2
        steps += 1
    return n


def scaled_sizes(n_items: int) -> tuple[int, int, int]:
    r"""The book's size rule ``(n_0, n_max, n)`` for a catalogue of :math:`N` items, every size a
    share of :math:`N` as in TORS rather than an absolute number:

    * :math:`n_0 = \mathrm{round}(0.124 N/16)` (at least 2) and :math:`n_{max} = 16 n_0`, about 12.4%
      of :math:`N` (TORS Sec. 6.3: "when the sample reaches 12.4% ... the sampling efficiency will
      reduce quickly"; default 10-15%), with the ladder ratio of :func:`initial_size_rule`;
    * fixed :math:`n` = 3.93% of :math:`N`, the mean of TORS's three ratios 500/9,916, 500/25,815
      and 1,000/20,720 (Sec. 8.4).

    On yelp's :math:`N` = 25,815 the rule gives TORS's own :math:`n_{max}` = 3,200 (:math:`n_0` = 200).
    The first sample resolves global ranks to :math:`N/n_0 pprox 129` positions on any catalogue.
    Catalogues with :math:`16 n_0 > N` get :math:`n_0 = 2` and the largest power of two :math:`\le N`."""
    N = check_int(n_items, "n_items", low=2)
    n0 = max(2, int(round(0.124 * N / LADDER_RATIO)))
    n_max = LADDER_RATIO * n0
    if n_max > N:
        n0, n_max = 2, 1 << (N.bit_length() - 1)
    frac = float(np.mean([500 / 9_916, 500 / 25_815, 1_000 / 20_720]))
    return int(n0), int(n_max), int(max(2, min(N, round(frac * N))))


#: The catalogue size up to which chapter 8 runs TORS's 100 repeats (:func:`repeats_rule`).
REPEATS_REFERENCE_ITEMS = 30_000


def repeats_rule(n_items: int, repeats: int = 100, reference: int = REPEATS_REFERENCE_ITEMS,
                 least: int = 30) -> int:
    r"""Chapter 8's number of repeats on a catalogue of :math:`N` items: ``repeats`` (TORS's 100) up to
    :math:`N` = ``reference``, and :math:`\lceil \mathrm{repeats}\,(\mathrm{reference}/N)^2\rceil`
    above it, at least ``least`` (which keeps enough repeats for the paired :math:`t` tests).

    The estimators take the grid on these catalogues (:data:`~itemsampling.estimators.grid.AUTO_GRID_BYTES`),
    whose cells grow slowly with :math:`N`, so a repeat's cost no longer grows as :math:`N^2` (the reason
    the rule once cut the repeats above :math:`N` = 12,000). Measured at the chapter's defaults, 100
    repeats, 2 cores, the models' ranks computed afresh (``benchmarks/chapters_real.py``): CiteULike-a
    (:math:`N` = 16,980) 431 s, Amazon-book (:math:`N` = 24,915, 70,591 test users) 599 s; before, at
    50 and 30 repeats, 936-958 s and 995 s. ``reference`` = 30,000 covers these catalogues; above it,
    where nothing was measured, the rule still bounds the cost."""
    N = check_int(n_items, "n_items", low=2)
    repeats = check_int(repeats, "repeats", low=2)
    reference = check_int(reference, "reference", low=2)
    least = check_int(least, "least", low=2)
    if N <= reference:
        return repeats
    return int(min(repeats, max(least, int(np.ceil(repeats * (reference / N) ** 2)))))


def user_table_sizes(n_items: int, n_users: int) -> tuple[list[int], list[int]]:
    r"""Chapter 9's sizes for TORS Tables 8-9 on a catalogue of :math:`N` items and :math:`M` users:
    TORS's item-sampling sizes :math:`n` = 100 and 500 and user counts 1,000, 5,000 and 10,000
    (Sec. 8.6, on pinterest-20) as shares of pinterest-20's :math:`N` = 9,916 and :math:`M` = 55,187
    (TORS Table 2), so that a catalogue of pinterest-20's shape gets TORS's own sizes. Returns
    ``(item_sizes, user_counts)``; each size at least 2, each count at least 1 and at most
    :math:`M`."""
    N = check_int(n_items, "n_items", low=2)
    M = check_int(n_users, "n_users", low=1)
    items = [int(min(N, max(2, round(n * N / 9_916)))) for n in (100, 500)]
    users = [int(min(M, max(1, round(m * M / 55_187)))) for m in (1_000, 5_000, 10_000)]
    return items, users


# ---------------------------------------------------------------------------------------------
# TORS Tables 8-9: user sampling against item sampling (chapter 9)
# ---------------------------------------------------------------------------------------------
def _metric_table(metrics, ks, n_items: int) -> np.ndarray:
    r""":math:`F(R)` for every global rank :math:`R = 0..N` (row 0 unused, zero), every metric and
    cut-off: shape (N + 1, len(metrics) * len(ks)), the columns of
    :func:`itemsampling.estimators.corrected._metric_matrix` metric by metric. The metric of a set
    of users is the histogram of their ranks times this table (one row per distinct rank, however
    many users share it)."""
    F = np.zeros((n_items + 1, len(metrics) * len(ks)))
    F[1:] = np.hstack([_metric_matrix(met, [int(k) for k in ks], n_items)[0] for met in metrics])
    return F


def _item_column(R, N, column, seeds, metrics, ks, eta, grid):
    """One item-sampling column of :func:`user_against_item` for one model and a block of repeats
    (one seed each): ``(estimates (repeats, len(metrics), len(ks)), average sampled-set sizes)``.
    ``column`` is ``("item", n)``, ``("adaptive", n_0, n_max)`` or ``("combined", m, n)``. A block
    runs one column only, so the estimators' kernels (a small LRU cache per process) are computed
    once per block, not once per repeat."""
    import warnings

    kind = column[0]
    out = np.empty((len(seeds), len(metrics), len(ks)))
    sizes = np.empty(len(seeds))
    with warnings.catch_warnings():
        # cut-offs below one kernel width N/(n-1): the table measures what that costs
        warnings.simplefilter("ignore", ResolutionWarning)
        for b, seed in enumerate(seeds):
            gen = np.random.default_rng(seed)
            if kind == "adaptive":  # seed: adaptive_seed(...), the draws of adaptive_against_fixed
                r, n = adaptive_sample_ranks(R, N, column[1], column[2], gen)
                res = est.estimate_metrics(r, N, n, metrics, ks, ["mle"], grid=grid)["mle"]
                sizes[b] = float(np.mean(n))
            else:
                users = R if kind == "item" else R[gen.choice(R.size, size=column[1], replace=False)]
                n = column[-1]
                r = sample_ranks(users, N, n, gen)
                res = est.estimate_metrics(r, N, n, metrics, ks, ["mn_mes"], eta=eta, grid=grid)["mn_mes"]
                sizes[b] = n
            out[b] = np.array([res[m] for m in metrics])
    return out, sizes


def user_against_item(global_ranks, n_items: int, item_sizes, initial_size: int, max_size: int, user_counts,
                      combined_users: int, n_repeats: int, ks, metrics=("recall", "ndcg"), combined_size: int = 100,
                      rng=0, eta: float = 0.01, grid=True, n_jobs: int = 1) -> dict:
    r"""TORS Tables 8-9 (Sec. 8.6) per model: in each of ``n_repeats`` repeats, the relative error
    (:func:`relative_error`, %) of

    * ``"item n"``: MN_MES (prior by MES, ``eta``) on one fixed-size sample of ``n`` items per user
      for every ``n`` in ``item_sizes`` (decoys with replacement);
    * ``"adaptive MLE"``: adaptive sampling (TORS Algorithm 1, :math:`n_0` = ``initial_size`` to
      :math:`n_{max}` = ``max_size``) estimated by adaptive MLE (EM of Appendix H);
    * ``"user m"``: user sampling, ``m`` users drawn without replacement and every item ranked, the
      metric their plain mean (TORS Eq. 45), for every ``m`` in ``user_counts``;
    * ``"user m + item n"``: ``combined_users`` users drawn without replacement, then MN_MES on
      ``combined_size`` sampled items,

    for each metric in ``metrics`` at the cut-offs ``ks``, against the exact metric of all users.

    Speed: the item-sampling estimators run on the catalogue-scale grid (``grid=True``, passed to
    :func:`itemsampling.estimators.estimate_metrics`; ``None`` or ``False`` for the dense ones),
    column by column over blocks of repeats (so that the estimators' cached kernels are reused
    across repeats), in ``n_jobs`` worker processes (joblib, one BLAS thread each). User sampling
    needs no estimator: a sample's metric is the histogram of its users' global ranks times the
    table of :math:`F(R)`, so all repeats of a model are one bincount and one matrix product, and
    the truth is the same product on every user.

    Draws: column ``c`` (in the order above: item sizes, adaptive, combined) of repeat ``j`` of the
    ``i``-th model uses ``numpy.random.default_rng([seed, i, j, c])``, except the adaptive column,
    which uses :func:`adaptive_seed` ``(seed, R, N, j)`` as :func:`adaptive_against_fixed` does (the
    same seed, ranks and sizes give chapters 8 and 9 the same adaptive draws); the user samples of that
    repeat ``default_rng([seed, i, j, len(item_sizes) + 2])`` (one sample per count, in the order
    of ``user_counts``); ``rng`` is a non-negative int seed or a Generator from which one is drawn.
    The result does not depend on ``n_jobs``, nor on the Dask cluster that runs the blocks when
    ``$ITEMSAMPLING_SCHEDULER`` names one (:func:`itemsampling._parallel.parallel_map`).

    Returns ``{model: {"errors": {metric: {column: (n_repeats,) errors in %}}, "adaptive_size":
    (n_repeats,) average adaptive sizes}}``, columns named as above (``"user 1,000"``, ...)."""
    N = check_int(n_items, "n_items", low=2)
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    n_jobs = check_int(n_jobs, "n_jobs", low=1)
    n0 = check_int(initial_size, "initial_size", low=2, high=N)
    n_max = check_int(max_size, "max_size", low=n0, high=N)
    sizes = [check_int(n, "item_sizes", low=2, high=N) for n in np.atleast_1d(item_sizes).tolist()]
    combined_size = check_int(combined_size, "combined_size", low=2, high=N)
    eta = check_real(eta, "eta", low=0.0)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if not metrics or not sizes:
        raise ValueError("metrics and item_sizes must not be empty")
    ks = np.asarray(ks, dtype=np.int64)
    if ks.ndim != 1 or ks.size == 0 or ks.min() < 1:
        raise ValueError(f"ks must be a non-empty sequence of cut-offs >= 1, got {ks!r}")
    seed = int(rng.integers(2**62)) if isinstance(rng, np.random.Generator) else check_int(rng, "rng", low=0)
    ranks = [np.asarray(R, dtype=np.int64) for R in global_ranks.values()]
    if not ranks:
        raise ValueError("global_ranks must hold at least one model")
    for name, R in zip(global_ranks, ranks):
        if R.ndim != 1 or R.size == 0 or R.min() < 1 or R.max() > N:
            raise ValueError(f"global_ranks[{name!r}] must be a non-empty array of ranks in 1..{N}")
    M = min(R.size for R in ranks)
    counts = [check_int(m, "user_counts", low=1, high=M) for m in np.atleast_1d(user_counts).tolist()]
    combined_users = check_int(combined_users, "combined_users", low=1, high=M)

    columns = [("item", n) for n in sizes] + [("adaptive", n0, n_max), ("combined", combined_users, combined_size)]
    names = [f"item {n}" for n in sizes] + ["adaptive MLE", f"user {combined_users:,} + item {combined_size}"]
    # blocks of repeats: few enough to reuse kernels, enough to keep n_jobs workers busy to the end
    n_blocks = max(1, min(n_repeats, -(-16 * n_jobs // (len(ranks) * len(columns))))) if n_jobs > 1 else 1
    block = -(-n_repeats // n_blocks)
    tasks = [(i, c, list(range(lo, min(lo + block, n_repeats))))
             for i in range(len(ranks)) for c in range(len(columns)) for lo in range(0, n_repeats, block)]
    args = [(ranks[i], N, columns[c], [adaptive_seed(seed, ranks[i], N, j) if columns[c][0] == "adaptive" else
                                       [seed, i, j, c] for j in reps], metrics, ks, eta, grid)
            for i, c, reps in tasks]
    parts = parallel_map(_blas1, [(_item_column, *a) for a in args], n_jobs)
    done = [{} for _ in ranks]
    for (i, c, _), part in zip(tasks, parts):
        done[i].setdefault(names[c], []).append(part)
    done = [{c: (np.concatenate([p[0] for p in ps]), np.concatenate([p[1] for p in ps])) for c, ps in d.items()}
            for d in done]
    return _blas1(_user_columns, global_ranks, ranks, done, N, metrics, ks, counts, names, n_repeats, seed,
                  len(sizes) + 2)


def _user_columns(global_ranks, ranks, done, N, metrics, ks, counts, names, n_repeats, seed, stream):
    """The user-sampling columns of :func:`user_against_item` beside the item-sampling ones
    (``done``: per model, {column: (estimates, sizes)}), all as relative errors (one BLAS thread:
    small products, and switching thread counts in the main process costs more than they do)."""
    F = _metric_table(metrics, ks, N)
    shape = (len(metrics), ks.size)
    out = {}
    for i, model in enumerate(global_ranks):
        R = ranks[i]
        truth = (np.bincount(R, minlength=N + 1).astype(np.float64) @ F / R.size).reshape(shape)
        cols = {c: est for c, (est, _) in done[i].items()}  # (repeats, metrics, ks)
        gens = [np.random.default_rng([seed, i, j, stream]) for j in range(n_repeats)]
        for m in counts:
            # every repeat's sample at once: one histogram row per repeat, times the F(R) table
            idx = np.stack([g.choice(R.size, size=m, replace=False) for g in gens])
            flat = (np.arange(n_repeats)[:, None] * (N + 1) + R[idx]).ravel()
            hist = np.bincount(flat, minlength=n_repeats * (N + 1)).reshape(n_repeats, N + 1)
            cols[f"user {m:,}"] = (hist.astype(np.float64) @ F / m).reshape(n_repeats, *shape)
        order = names[:-2] + [names[-2]] + [f"user {m:,}" for m in counts] + [names[-1]]
        out[model] = {"errors": {met: {c: relative_error(cols[c][:, a, :], truth[a]) for c in order}
                                 for a, met in enumerate(metrics)},
                      "adaptive_size": done[i]["adaptive MLE"][1]}
    return out
