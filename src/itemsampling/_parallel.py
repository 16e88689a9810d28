"""Independent tasks run in this process, in local joblib workers, or on a Dask cluster: the one
place where the package's repeated experiments choose where to run.

:func:`parallel_map` computes ``[fn(*a) for a in args]``. Every task of the package's experiments
draws from its own seed (carried in its arguments), so the result is the same, bit for bit, in
this process, in any number of joblib workers and on a Dask cluster of any number of workers.
The cluster is chosen by the ``scheduler`` argument or, when that is ``None``, by the environment
variable ``ITEMSAMPLING_SCHEDULER`` that ``python -m itemsampling.run ... --scheduler ADDRESS``
sets for the chapter's kernel; the runner records the cluster (:func:`cluster_info`) in
``results.json``.
"""

from __future__ import annotations

import os

__all__ = ["SCHEDULER_ENV", "INSTALL_HINT", "scheduler_from_env", "require_distributed", "cluster_info",
           "parallel_map"]

#: Environment variable naming a Dask scheduler address (set by the runner's ``--scheduler``).
SCHEDULER_ENV = "ITEMSAMPLING_SCHEDULER"

INSTALL_HINT = ("Dask's distributed scheduler (dask[distributed]) is not installed: install itemsampling[dask] "
                "(pip install 'itemsampling[dask]')")


def scheduler_from_env() -> str | None:
    """The scheduler address in ``$ITEMSAMPLING_SCHEDULER``, or ``None`` when it is unset or empty."""
    return os.environ.get(SCHEDULER_ENV, "").strip() or None


def require_distributed():
    """Import ``distributed`` (an optional dependency, deferred to here so that a run without a
    cluster never imports it); a missing one is an ``ImportError`` with the install hint."""
    try:
        import distributed
    except ImportError:
        raise ImportError(f"running on a Dask cluster needs {INSTALL_HINT}") from None
    return distributed


def _check_address(scheduler) -> str:
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"scheduler must be a Dask scheduler address such as 'tcp://host:8786', got {scheduler!r}")
    return scheduler.strip()


def _client(scheduler: str):
    distributed = require_distributed()
    try:
        return distributed.Client(scheduler, timeout="30s")
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {exc}") from None


def cluster_info(scheduler) -> dict:
    """``{"address", "workers", "threads"}`` of the cluster at ``scheduler`` now (what the runner
    records in ``results.json``); a scheduler that cannot be reached is a ``ValueError``."""
    address = _check_address(scheduler)
    client = _client(address)
    try:
        workers = client.scheduler_info()["workers"]
        return {"address": address, "workers": len(workers),
                "threads": int(sum(w.get("nthreads", 0) for w in workers.values()))}
    finally:
        client.close()


def parallel_map(fn, args, n_jobs: int = 1, scheduler: str | None = None, generator: bool = False):
    """``[fn(*a) for a in args]``, in the order of ``args``.

    * ``scheduler`` (an address such as ``"tcp://host:8786"``), or when ``None`` the address in
      ``$ITEMSAMPLING_SCHEDULER``: every call is a task on that Dask cluster (``fn`` and its
      arguments must pickle; the cluster's workers must import ``itemsampling``);
    * otherwise ``n_jobs == 1`` runs in this process and ``n_jobs > 1`` (or ``-1``, all cores) in
      joblib worker processes.

    ``n_jobs`` is checked by the caller. ``generator=True`` returns an iterator over the results (in
    order, as they become available), for a progress bar."""
    args = list(args)
    address = scheduler_from_env() if scheduler is None else _check_address(scheduler)
    if address is not None:
        it = _dask_map(fn, args, address)
    elif n_jobs == 1:
        it = (fn(*a) for a in args)
    else:
        from joblib import Parallel, delayed

        it = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(fn)(*a) for a in args)
    return it if generator else list(it)


def _dask_map(fn, args, address):
    client = _client(address)
    try:
        futures = [client.submit(fn, *a, pure=False) for a in args]
        for fut in futures:
            yield fut.result()
    finally:
        client.close()
