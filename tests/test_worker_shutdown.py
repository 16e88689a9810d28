"""A run with ``n_jobs=2`` that is killed or interrupted leaves no worker behind and no worker
writes a cache file after the parent is gone. (Linux: the worker processes are found in /proc.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    from itemsampling import experiments as E
    from itemsampling.metrics import evaluate

    def slow(r, N, n, metric, k):
        time.sleep(0.4)
        return evaluate(r, metric, k, n)

    m = 200
    g = np.random.default_rng(0)
    gr = E.GlobalRanks({"a": g.integers(1, 50, m), "b": g.integers(1, 500, m)}, 1000, np.full(m, 1000),
                       np.arange(m), np.zeros(m, dtype=np.int64), "hand", True, 0)
    E.run_experiment(gr, sample_sizes=(20, 50), n_repeats=40, metrics=(("recall", 10),),
                     estimators={"s": slow}, cache=sys.argv[1], n_jobs=2, progress=False)
""")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_run_leaves_no_writing_worker(tmp_path, sig):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    folder = tmp_path / "cache"
    env = dict(os.environ, ITEMSAMPLING_CACHE=str(tmp_path / "c"), PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, str(script), str(folder)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def files():
        return {f: f.stat().st_mtime for f in folder.rglob("repeat-*.npz")} if folder.exists() else {}

    try:
        t0 = time.time()
        while len(files()) < 2 and time.time() - t0 < 90:  # workers are busy writing repeats
            time.sleep(0.05)
        assert len(files()) >= 2, "the run did not start"
        workers = _children(proc.pid)
        assert workers
        os.kill(proc.pid, sig)
        proc.wait(timeout=90)  # generous: on two loaded cores the interrupted parent can be slow to exit
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed_at = time.time()
    time.sleep(3.0)  # several repeats' worth of time (one repeat takes 0.8 s per worker)
    late = [f.name for f, mtime in files().items() if mtime > killed_at]
    assert late == [], f"files written after the parent was gone: {late}"
    assert not list(folder.rglob(".*.tmp"))
    alive = [w for w in workers if _running(w)]
    assert alive == [], f"worker processes still running: {alive}"
