"""bf16 on a CPU without bf16 units: detected from torch's own view of the CPU, one warning from each command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simcse_weince.core import hardware
from simcse_weince.core.hardware import slow_bf16_warning

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"


def test_avx2_limits_hide_the_bf16_units() -> None:
    """The slowest machines of the kind (AVX2 only) reproduced by torch's and oneDNN's ISA limits: torch then
    reports no native bf16, whatever this CPU has."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    code = "from simcse_weince.core.hardware import cpu_has_native_bf16; print(cpu_has_native_bf16())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_warning_only_for_bf16_on_a_cpu_without_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    message = slow_bf16_warning("bf16", "cpu", "evaluating with")
    assert message is not None and message.startswith("warning: evaluating with --precision bf16 on a CPU")
    assert "6.6x slower" in message and "--precision fp32" in message and "\n" not in message
    assert slow_bf16_warning("fp32", "cpu", "x") is None
    assert slow_bf16_warning("bf16", "cuda:0", "x") is None  # an accelerator: bf16 is its fast path
    assert slow_bf16_warning("bf16", "not a device", "x") is None  # the option's own check names it
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    assert slow_bf16_warning("bf16", "cpu", "x") is None


def test_evaluation_warns_before_anything_loads(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``evaluate_sts.py --precision bf16`` prints the warning first (here followed by the unknown task's error)."""
    from simcse_weince.cli.evaluate import main

    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    assert main(["--model", "unused", "--tasks", "NoSuchTask", "--precision", "bf16", "--device", "cpu"]) != 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("warning: evaluating with --precision bf16") and err[1].startswith("error:")


def test_training_warns_before_anything_loads(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path) -> None:
    """``train_unsup.py --precision bf16`` on such a CPU warns once the settings are read, before the model loads
    (here the metric that the validation does not have is the error that follows)."""
    from simcse_weince.cli.train_text import main

    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    argv = [str(RECIPE), "--precision", "bf16", "--use_cpu", "true", "--output_dir", str(tmp_path)]
    assert main([*argv, "--metric_for_best_model", "eval_nonsense"]) != 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" ")[0] for line in err if line.startswith(("warning:", "error:"))] == ["warning:", "error:"]
    assert "training with --precision bf16" in err[0]
