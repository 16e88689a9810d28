"""itemsampling: item-sampling evaluation of recommender systems.

The package behind the *itemsampling* book. Conventions (see the book's notation page):

* ``N`` (``n_items``): number of items in the catalog.
* ``R`` (``global_ranks``): 1-based rank of the held-out item among all ``N`` items.
* ``n`` (``sample_size``): size of the sampled set *including* the target item, so ``n - 1`` decoys.
* ``r`` (``sampled_ranks``): 1-based rank of the target within the sampled set, in ``1..n``.

Modules: :mod:`~itemsampling.kernel` (P(r | R)), :mod:`~itemsampling.metrics`,
:mod:`~itemsampling.sampling` (sampled ranks and the exact moments of sampled metrics),
:mod:`~itemsampling.theory`, :mod:`~itemsampling.mapping` (f(k) mapping functions),
:mod:`~itemsampling.estimators` (corrected metrics and rank-distribution estimators),
:mod:`~itemsampling.data`, :mod:`~itemsampling.models`, :mod:`~itemsampling.ranking`,
:mod:`~itemsampling.evaluation` (sampled ranks of your own model by a design),
:mod:`~itemsampling.experiments`, :mod:`~itemsampling.book`, :mod:`~itemsampling.plotting`,
:mod:`~itemsampling.run`. The heavier ones are imported on first use.
"""

import importlib

from . import kernel, metrics, sampling  # noqa: F401
from ._validation import ResolutionWarning  # noqa: F401  (estimates at K below one kernel width)
from ._version import __version__  # noqa: F401

_LAZY = {"theory", "mapping", "estimators", "data", "models", "ranking", "evaluation", "experiments", "book", "plotting", "run"}


def __getattr__(name):
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'itemsampling' has no attribute {name!r}")
