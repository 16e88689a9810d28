"""``python -m itemsampling``: ``estimate`` (correct a file of sampled ranks, see
:mod:`itemsampling.cli`), ``run`` (rerun a chapter, :mod:`itemsampling.run`) and ``data``
(datasets, :mod:`itemsampling.data`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
