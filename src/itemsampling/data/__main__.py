"""Command line: ``python -m itemsampling.data fetch ml-1m --dest data/raw`` and
``python -m itemsampling.data summary DATASET``."""

from __future__ import annotations

import json

from .frames import dataset_summary
from .loaders import MOVIELENS_ARCHIVES, fetch_movielens, load_movielens
from .simulator import DATASETS, load_dataset


def _main(argv=None) -> int:
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m itemsampling.data",
                                description="Datasets of the itemsampling book.")
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download and verify a MovieLens archive")
    f.add_argument("release", choices=sorted(MOVIELENS_ARCHIVES))
    f.add_argument("--dest", default="data/raw")
    s = sub.add_parser("summary", help="statistics of an embedded dataset or a MovieLens folder/file")
    s.add_argument("dataset")
    args = p.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(fetch_movielens(args.release, args.dest))
        else:
            df = load_dataset(args.dataset) if args.dataset in DATASETS else load_movielens(args.dataset)
            print(json.dumps(dataset_summary(df), indent=1))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
