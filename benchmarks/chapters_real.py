"""Chapters 8-11 at their defaults on real datasets the project does not ship: wall time, peak memory and the
size rules the chapter applied (issue 45, item 3; run by hand, not by pytest)::

    PYTHONPATH=src nice python benchmarks/chapters_real.py DATASET [DATASET ...] [--chapters 8 9 10 11]
        [--json OUT]

Each (chapter, dataset) runs in its own process, ``python -m itemsampling.run CHAPTER -p dataset DATASET
--no-html --no-progress`` (the chapter's defaults otherwise: TORS's 100 repeats where the chapter has them),
into a temporary folder. *Seconds*: the wall time of that process. *Peak memory*: the largest resident set
of the process and its descendants (the notebook's kernel), ``getrusage(RUSAGE_CHILDREN).ru_maxrss``, read
in a fresh wrapper process per run so that one run's peak does not carry into the next. *Rules*: the
chapter's recorded values whose keys name a size rule or a replacement (``repeats_rule``, ``rule_repeats``,
``truth_repeats_rule``, ``model_replacements``, ...), as the page states them.

The figures depend on the machine: run it alone on an idle machine for the budget of issue 45
(≤ 6 minutes and ≤ 8 GB per chapter and dataset on 2 cores).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULE_KEYS = re.compile(r"(repeats_rule|rule_repeats|truth_repeats_rule|model_replacements|replacement_text|"
                       r"sampled_users|max_cells)")
_WRAPPER = """
import resource, subprocess, sys, time
t = time.perf_counter()
code = subprocess.call(sys.argv[1:])
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"{code} {time.perf_counter() - t:.3f} {peak_kib}")
"""


def run_one(chapter: int, dataset: str, timeout: float) -> dict:
    """One chapter on one dataset in a fresh process: seconds, peak memory (GB), exit code, the rules."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "itemsampling.run", str(chapter), "-p", "dataset", dataset, "--out", out,
               "--no-html", "--no-progress"]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        # in a session of its own, so that a timeout stops the chapter's kernel and its workers too (killing
        # the wrapper alone left them running)
        proc = subprocess.Popen([sys.executable, "-c", _WRAPPER, *cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            p = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"chapter": chapter, "dataset": dataset, "code": None, "seconds": timeout, "peak_gb": None,
                    "rules": {}, "error": f"stopped after {timeout:.0f} s"}
        last = p.stdout.strip().splitlines()[-1].split() if p.stdout.strip() else ["-1", "nan", "0"]
        code, seconds, peak = int(last[0]), float(last[1]), int(last[2]) * 1024 / 1e9
        res = Path(out) / "results.json"
        results = json.loads(res.read_text()).get("results", {}) if res.exists() and code == 0 else {}
        rules = {k: v for k, v in results.items() if RULE_KEYS.search(k)}
        row = {"chapter": chapter, "dataset": Path(dataset).name, "code": code, "seconds": seconds, "peak_gb": peak,
               "rules": rules}
        if code != 0:
            row["error"] = (p.stderr or "")[-1500:]
        return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="+")
    ap.add_argument("--chapters", type=int, nargs="+", default=[8, 9, 10, 11])
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run before it is stopped")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = []
    for ds in a.datasets:
        for ch in a.chapters:
            t = time.strftime("%H:%M:%S")
            print(f"[{t}] chapter {ch} on {Path(ds).name} ...", flush=True)
            row = run_one(ch, ds, a.timeout)
            rows.append(row)
            peak = f"{row['peak_gb']:.1f} GB" if row["peak_gb"] is not None else "-"
            print(f"    {row['seconds']:.0f} s, peak {peak}, exit {row['code']}"
                  + (f": {row['error'][-300:]}" if row.get("error") else ""), flush=True)
            for k, v in row["rules"].items():
                print(f"      {k}: {v}", flush=True)
            if a.json:
                Path(a.json).write_text(json.dumps(rows, indent=1, default=str))
    print("\nchapter  dataset               seconds  peak GB  exit")
    for r in rows:
        peak = f"{r['peak_gb']:7.1f}" if r["peak_gb"] is not None else "      -"
        print(f"{r['chapter']:>7}  {r['dataset']:<20}  {r['seconds']:7.0f}  {peak}  {r['code']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
