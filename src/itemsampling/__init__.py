"""itemsampling: item-sampling evaluation of recommender systems.

The package behind the *itemsampling* book. Conventions (see the book's notation page):

* ``N`` (``n_items``): number of items in the catalog.
* ``R`` (``global_ranks``): 1-based rank of the held-out item among all ``N`` items.
* ``n`` (``sample_size``): size of the sampled set *including* the target item, so ``n - 1`` decoys.
* ``r`` (``sampled_ranks``): 1-based rank of the target within the sampled set, in ``1..n``.
"""

from . import kernel, metrics, sampling  # noqa: F401

__version__ = "0.1.0"
