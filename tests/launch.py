"""``accelerate launch`` of N CPU processes (gloo) for the multi-process tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def accelerate_launch(processes: int, target: list[str], timeout: int = 600) -> None:
    """Run ``accelerate launch ... <target>`` and raise ``AssertionError`` with its output if it fails.

    accelerate's ``--cpu`` flag starts ONE process (multi-CPU needs an MPI hostfile); ``--multi_gpu`` starts N
    processes through torchrun, and on a machine without CUDA the training arguments select CPU + gloo.
    """
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", *target]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"accelerate launch failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
