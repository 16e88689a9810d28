"""Command line: ``python -m itemsampling.data fetch ml-1m --dest data/raw`` and
``python -m itemsampling.data summary DATASET [--user-column NAME] [--item-column NAME] [--validation
train|drop]`` (the rows of each part of a split given as tables, and what became of its validation rows)."""

from __future__ import annotations

import json

from .frames import dataset_summary
from .interactions import load_interactions
from .loaders import MOVIELENS_ARCHIVES, fetch_movielens
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
    s = sub.add_parser("summary", help="statistics of an embedded dataset, or of a folder or file of interactions "
                                       "(MovieLens, NCF, user-line splits, users.dat, RecBole .inter, CSV/TSV/Parquet)")
    s.add_argument("dataset")
    s.add_argument("--user-column", default=None, help="the user column of a table or RecBole file")
    s.add_argument("--item-column", default=None, help="the item column of a table or RecBole file")
    s.add_argument("--validation", choices=("train", "drop"), default="train",
                   help="a split given as train / valid / test tables: the validation rows join training (default) "
                        "or are left out")
    args = p.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(fetch_movielens(args.release, args.dest))
        else:
            if args.dataset in DATASETS:
                if args.user_column is not None or args.item_column is not None:
                    raise ValueError("--user-column / --item-column name columns of a file; "
                                     f"{args.dataset} is a simulated dataset")
                df = load_dataset(args.dataset)
            else:
                df = load_interactions(args.dataset, args.user_column, args.item_column, validation=args.validation)
            out = dataset_summary(df)
            if "source" in df.attrs:
                out["format"] = df.attrs["source"]["format"]
                out["files"] = df.attrs["source"]["files"]
                if "held_out" in df.attrs:
                    out["held_out"] = int(df.attrs["held_out"].sum())
                if "split" in df.attrs:
                    out["split"] = df.attrs["split"]
            print(json.dumps(out, indent=1))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
