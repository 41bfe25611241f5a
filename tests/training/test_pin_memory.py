"""No ``pin_memory`` warning on a machine without an accelerator: the data loaders don't ask for pinning."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from simcse_weince.training.arguments import ContrastiveTrainingArguments, accelerator_available


@pytest.mark.skipif(accelerator_available(), reason="checks the machine without an accelerator")
def test_loaders_do_not_pin_memory_without_an_accelerator(tmp_path: Path) -> None:
    args = ContrastiveTrainingArguments(output_dir=str(tmp_path), report_to="none")
    assert args.dataloader_pin_memory is False
    loader = torch.utils.data.DataLoader(list(range(4)), batch_size=2, pin_memory=args.dataloader_pin_memory)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "'pin_memory' argument is set as true but no accelerator"
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]


def test_forced_cpu_runs_do_not_pin_memory(tmp_path: Path) -> None:
    args = ContrastiveTrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    assert args.dataloader_pin_memory is False
