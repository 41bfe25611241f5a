"""``--device`` is checked by torch's own parser: every form torch accepts passes (an index on any type, other
accelerator types), a name of no device is one line, and CUDA/MPS are checked against this machine."""

from __future__ import annotations

import pytest
import torch

from simcse_weince.core.devices import check_device


@pytest.mark.parametrize("device", [None, "cpu", "cpu:0", " cpu ", "xpu", "xpu:1"])
def test_forms_torch_accepts_pass(device: str | None) -> None:
    check_device(device)


@pytest.mark.parametrize("device", ["foo", "cuda:x", "gpu", ""])
def test_a_name_of_no_device_is_refused(device: str) -> None:
    with pytest.raises(ValueError, match=r"--device .*: not a device; expected cpu, cuda, cuda:N, mps"):
        check_device(device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused() -> None:
    with pytest.raises(ValueError, match="CUDA is not available on this machine"):
        check_device("cuda:0")
