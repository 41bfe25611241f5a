"""A pool of worker processes that end with the process that made it, even when that one is killed with ``-9``.

The sweeps run their cells in such a pool (``--workers``): without it a killed driver left its workers (each with
torch loaded, ~700 MB) and, through them, the resource tracker running forever.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_CHECK_SECONDS = 0.5


def _watch_parent(parent: int) -> None:
    """End this process as soon as its parent is no longer ``parent`` (it died; the process was re-parented)."""
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(PARENT_CHECK_SECONDS)


def exit_with_parent(parent: int) -> None:
    """A pool worker's initializer: the worker ends when its parent dies, even by ``kill -9``.

    Linux sends the worker ``SIGKILL`` when its parent dies (``prctl(PR_SET_PDEATHSIG)``); a watchdog thread that
    exits when the parent pid changes covers other systems and a parent that died before the ``prctl``. Ctrl-C is
    the driver's to handle (it stops the workers and says what was kept), so the worker ignores ``SIGINT``, which
    the terminal sends to the whole process group.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watchdog below still ends the worker
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watchdog", daemon=True).start()


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes that end with this one (:func:`exit_with_parent`)."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=exit_with_parent,
        initargs=(os.getpid(),),
    )


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """End ``pool`` now: pending work cancelled, the running workers terminated (not waited for)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
