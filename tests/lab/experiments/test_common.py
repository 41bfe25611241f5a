"""``weince_lab/experiments/common.py``'s run server: a run ends with its driver, even when the driver is killed with
-9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from weince_lab.simulation.worker_pool import process_alive

REPO = Path(__file__).resolve().parents[3]


def wait_for(condition, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and the parent-death signal are Linux's")
@pytest.mark.parametrize("how", ["function", "module", "subprocess"])
def test_a_run_gets_sigterm_and_ends_when_its_driver_is_killed(tmp_path: Path, how: str) -> None:
    """The orphan used to keep training into its folder and hold its lock; now it is told to stop (SIGTERM: a
    training run saves a checkpoint and releases the lock) and is gone within seconds."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    orphan = REPO / "tests/lab/experiments/orphan_driver.py"
    driver = subprocess.Popen([sys.executable, str(orphan), how, str(tmp_path)], cwd=REPO, env=env)
    try:
        assert wait_for(lambda: (tmp_path / "run.pid").is_file() and (tmp_path / "run.pid").read_text(), 60)
        run = int((tmp_path / "run.pid").read_text())
        time.sleep(0.3)  # the run's watchdog is up (it starts before the run's own code)
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        assert wait_for(lambda: not process_alive(run), 15), "the run outlived its driver"
        assert (tmp_path / "terminated").read_text() == "SIGTERM\n"  # told to stop, not killed outright
    finally:
        if driver.poll() is None:
            driver.kill()
