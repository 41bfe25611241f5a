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


STOP_GRACE_SECONDS = 60.0  # how long a process told to stop with SIGTERM has before it is ended


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet waited for, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True  # no /proc: os.kill said it is there


def _end_self(signum: int) -> None:
    """``signum`` to this process (SIGTERM: a training run saves a checkpoint and releases its folder), then, after
    :data:`STOP_GRACE_SECONDS` (at once for SIGKILL), an exit."""
    if signum != signal.SIGKILL:
        os.kill(os.getpid(), signum)
        time.sleep(STOP_GRACE_SECONDS)
    os._exit(1)


def _watch_parent(parent: int, signum: int) -> None:
    """End this process (:func:`_end_self`) as soon as its parent is no longer ``parent`` (it died; the process
    was re-parented)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    _end_self(signum)


def _watch_process(pid: int, signum: int) -> None:
    while process_alive(pid):
        time.sleep(PARENT_CHECK_SECONDS)
    _end_self(signum)


def exit_with_process(pid: int, signum: int = signal.SIGTERM) -> None:
    """This process ends (``signum`` to itself, then an exit after a grace period) when process ``pid`` does,
    whichever its parent: a run forked by ``multiprocessing``'s fork server is the server's child, and the server
    outlives a killed driver (the run holds the server's liveness pipe), so the driver is watched by its pid."""
    if not process_alive(pid):
        _end_self(signum)
    threading.Thread(target=_watch_process, args=(pid, signum), name="driver-watchdog", daemon=True).start()


def signal_on_parent_death(signum: int = signal.SIGTERM) -> None:
    """Ask Linux to send this process ``signum`` when its parent dies (``prctl(PR_SET_PDEATHSIG)``, kept across
    ``exec``): the ``preexec_fn`` of a command a driver starts with :mod:`subprocess`. Elsewhere a no-op."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        except (OSError, AttributeError):
            pass


def exit_with_parent(parent: int, signum: int = signal.SIGKILL) -> None:
    """A pool worker's initializer: the worker ends when its parent dies, even by ``kill -9``.

    Linux sends the worker ``signum`` (default ``SIGKILL``) when its parent dies (``prctl(PR_SET_PDEATHSIG)``); a
    watchdog thread that acts when the parent pid changes covers other systems and a parent that died before the
    ``prctl``. Ctrl-C is the driver's to handle (it stops the workers and says what was kept), so the worker
    ignores ``SIGINT``, which the terminal sends to the whole process group.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal_on_parent_death(signum)  # where it is not available, the watchdog below still ends the worker
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent, signum), name="parent-watchdog", daemon=True).start()


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
