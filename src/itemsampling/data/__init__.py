r"""Datasets: the simulated default datasets, loaders for real MovieLens / NCF files, splits and
statistics.

Every loader returns a pandas DataFrame with the columns ``user, item, rating, timestamp``:

* ``user`` and ``item`` are **0-based contiguous** ``int64`` ids (``0..n_users-1``,
  ``0..n_items-1``). Real files are re-indexed on load (users and items sorted by their original
  id); the original ids are kept in ``df.attrs["user_ids"]`` / ``df.attrs["item_ids"]`` (numpy
  arrays: ``attrs["item_ids"][new_id] == original_id``).
* ``df.attrs["n_users"]`` and ``df.attrs["n_items"]`` hold the catalog sizes (for the simulated
  datasets the catalog is the simulator's ``n_items``, even if an item was never observed).
  Use :func:`n_items_of` rather than reading the attribute directly.
* ``rating`` is the explicit rating where the file has one and 1.0 for implicit data; the book
  treats every row as a positive interaction ("binarized", as Krichene & Rendle 2020, Sec. 6).
* ``timestamp`` is an ``int64`` (seconds); files without timestamps get 0 and the splits then break
  ties at random.

The simulated datasets ``sim-ml100k`` and ``sim-ml1m`` follow the LDA true-preference model of
Ihemelandu & Ekstrand 2023, Sec. IV (after Tian & Ekstrand 2020); see :func:`simulate` and
``data/README.md`` for the calibration. They are generated deterministically on first use and
cached under ``data/cache/`` (atomic writes). The TORS-shaped catalogues ``sim-pinterest20``,
``sim-yelp`` and ``sim-ml20m`` have exactly the users, items and interactions of Li et al. 2024
(TORS), Table 2 (:class:`ShapedConfig`, :func:`simulate_shaped`).

The subpackage is split by role: :mod:`.simulator` (simulator and embedded datasets),
:mod:`.loaders` (MovieLens and NCF files, download), :mod:`.interactions` (every published format,
recognised by content: :func:`load_interactions`), :mod:`.decoys` (frozen and published decoys: NCF's ``.test.negative``, Elliot's fixed negatives), :mod:`.frames` (splits, statistics), :mod:`.cache`
(cache folder, atomic writes, checksummed files). Every name is re-exported here.
"""

from __future__ import annotations

from .cache import (CACHE_VERSION, CacheWarning, atomic_save_npz, cache_dir, fingerprint, load_npz,
                    package_fingerprint, path_fingerprint, stable_hash)
from .decoys import map_ids, read_decoys, write_decoys
from .frames import (COLUMNS, dataset_summary, drop_short_users, gini, holdout_fraction, item_counts,
                     leave_last_out, n_items_of, n_users_of, sample_users)
from .interactions import (FORMATS, detect_format, given_split, load_count_lines, load_interactions, load_recbole,
                           load_split, load_table, load_user_lines)
from .loaders import (MOVIELENS_ARCHIVES, _parse_fast, _parse_rows, fetch_movielens, load_movielens,
                      load_ncf)
from .simulator import (DATASETS, ShapedConfig, Simulation, SimulationConfig, load_dataset, load_simulation,
                        load_truth, simulate, simulate_shaped)

__all__ = [
    "SimulationConfig",
    "ShapedConfig",
    "Simulation",
    "DATASETS",
    "simulate",
    "simulate_shaped",
    "load_dataset",
    "load_simulation",
    "load_truth",
    "load_movielens",
    "load_ncf",
    "load_interactions",
    "detect_format",
    "given_split",
    "load_user_lines",
    "load_count_lines",
    "load_recbole",
    "load_table",
    "load_split",
    "FORMATS",
    "gini",
    "item_counts",
    "n_items_of",
    "n_users_of",
    "leave_last_out",
    "drop_short_users",
    "sample_users",
    "holdout_fraction",
    "dataset_summary",
    "cache_dir",
    "CacheWarning",
    "fingerprint",
    "path_fingerprint",
    "package_fingerprint",
    "fetch_movielens",
    "read_decoys",
    "write_decoys",
    "map_ids",
    "MOVIELENS_ARCHIVES",
]
