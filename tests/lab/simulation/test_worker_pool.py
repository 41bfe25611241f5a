"""The sweeps' worker pool: its workers end with the process that made it, even on ``kill -9``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ORPHAN_SCRIPT = """
import os, sys, time
from weince_lab.simulation.worker_pool import worker_pool
pool = worker_pool(2)
futures = [pool.submit(time.sleep, 60) for _ in range(2)]
def in_task(pid):  # a worker sleeping in its task is past its initializer (importing the package takes seconds)
    try:
        return "nanosleep" in open(f"/proc/{pid}/wchan").read()
    except OSError:
        return False
deadline = time.monotonic() + 60
while True:
    children = [int(p) for p in open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split()]
    # the two workers and the resource tracker
    if (len(children) >= 3 and sum(map(in_task, children)) >= 2) or time.monotonic() > deadline:
        break
    time.sleep(0.05)
time.sleep(0.5)
print(" ".join(map(str, children)), flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited (its new parent reaps it)


def _children_listed() -> bool:
    """The kernel lists a task's children in /proc (CONFIG_PROC_CHILDREN; absent in some kernels and sandboxes)."""
    return Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").is_file()


@pytest.mark.skipif(not _children_listed(), reason="reads the process tree from /proc/PID/task/PID/children")
@pytest.mark.timeout(120)
def test_the_workers_and_the_resource_tracker_exit_when_the_driver_is_killed(tmp_path: Path) -> None:
    """``kill -9`` of a driver with ``--workers 2`` once left both workers (720 MB each) and the resource tracker
    running forever."""
    import signal
    import subprocess
    import sys
    import time

    from weince_lab.experiments.common import child_env

    proc = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT], stdout=subprocess.PIPE, text=True, env=child_env(),
                            cwd=tmp_path)  # fmt: skip
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) >= 3 and all(_alive(p) for p in pids)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for pid in left:  # do not leave them behind when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after the driver was killed: {left}"
