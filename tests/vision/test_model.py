"""SimCLR model: one backbone pass for both views, a step that lowers the loss, save/load."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.vision.model import SimCLRModel


def test_model_one_pass_two_views() -> None:
    model = SimCLRModel("resnet18_slim", 32, projection_dim=16)
    seen = []
    model.backbone.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[0]))
    out = model(torch.randn(3, 2, 3, 32, 32))
    assert seen == [6] and out["anchors"].shape == out["positives"].shape == (3, 16)


@pytest.mark.parametrize(
    "loss_fn", [InfoNCELoss(0.5, layout="ntxent"), WeinceLoss(0.5, layout="ntxent", min_tail_points=10)]
)
def test_one_step_reduces_the_loss_on_a_fixed_batch(loss_fn) -> None:
    torch.manual_seed(0)
    model = SimCLRModel("resnet18_slim", 32, projection_dim=16)
    base = torch.randn(16, 3, 32, 32)
    batch = torch.stack([base + 0.1 * torch.randn_like(base), base + 0.1 * torch.randn_like(base)], dim=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def value() -> torch.Tensor:
        out = model(batch)
        return loss_fn(out["anchors"], out["positives"])

    before = value()
    before.backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        after = value()
    assert after.item() < before.item()


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    from simcse_weince.vision.model import load_simclr, save_simclr, simclr_folder

    torch.manual_seed(0)
    cfg = {
        "backbone": "resnet18_slim",
        "image_size": 32,
        "projection_dim": 16,
        "projection_hidden": None,
        "cifar_stem": None,
    }
    model = SimCLRModel(**cfg).eval()
    save_simclr(model, tmp_path / "run" / "model", cfg)
    assert simclr_folder(tmp_path / "run") == tmp_path / "run" / "model" and simclr_folder(tmp_path) is None
    loaded, loaded_cfg = load_simclr(tmp_path / "run")
    x = torch.randn(2, 2, 3, 32, 32)
    torch.testing.assert_close(loaded.eval()(x)["anchors"], model(x)["anchors"], rtol=0, atol=0)
    assert loaded_cfg == cfg
    with pytest.raises(ValueError, match="unknown SimCLR config keys"):
        save_simclr(model, tmp_path / "x", cfg | {"depth": 3})
    with pytest.raises(FileNotFoundError, match=r"no config\.json of a SimCLR model"):
        load_simclr(tmp_path)
