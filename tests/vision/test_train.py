"""The SimCLR pipeline: a tiny run and its results table, the shipped configs, two processes, SyncBatchNorm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from simcse_weince.losses import WeinceLoss
from simcse_weince.vision.model import SimCLRModel
from tests.helpers import accelerate_launch, argv, write_cifar10_zips

# The columns of results.md, spelled out here (not read from the module) so that a dropped one is caught.
METRICS = ["linear_probe", "knn200", "knn20", "knn50", "R@1", "R@2", "R@4", "R@8"]
ENCODERS = {"random init": "before", "trained (best k-NN checkpoint)": "after"}  # row label -> results key
CPU_RECIPES = {"quickstart_cifar10_cpu.yaml", "cpu_proxy_cifar10.yaml"}  # the others: the paper's settings


def assert_table_matches(table: str, results: dict) -> None:
    """results.md is a Markdown table: the header columns are the metrics, one row per encoder evaluated
    (before and/or after training), each cell the results.json value to 2 decimals."""
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines() if line.startswith("|")
    ]
    assert len(rows) >= 3, table
    header, rule, body = rows[0], rows[1], rows[2:]
    assert header == ["encoder", *METRICS]
    assert len(rule) == len(header) and all(set(c) == {"-"} for c in rule)
    assert [ENCODERS.get(r[0]) for r in body] == [k for k in ("before", "after") if k in results]
    for row in body:
        key = ENCODERS[row[0]]
        assert len(row) == len(header)
        assert row[1:] == [f"{results[key][m]:.2f}" for m in METRICS], row[0]


def _vision_args(root: Path, out: Path, **flags: object) -> list[str]:
    """The tiny SimCLR run's settings (resnet18_slim on the fake CIFAR-10 zips); ``flags`` override or add."""
    base = dict(
        backbone="resnet18_slim", data_dir=root, per_device_train_batch_size=4, per_device_eval_batch_size=8,
        num_train_epochs=1, temperature=0.5, min_tail_points=10, logging_steps=1, output_dir=out, disable_tqdm=True,
        dataloader_num_workers=0,
    )  # fmt: skip
    return argv(**(base | flags))


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["weince", "infonce"])
def test_tiny_training_run(tmp_path: Path, loss: str) -> None:
    from simcse_weince.cli.train_vision import run

    root = write_cifar10_zips(tmp_path / "data")
    out = tmp_path / "run"
    results = run(
        _vision_args(
            root, out, loss=loss, dataset="cifar10_zip", per_device_train_batch_size=8, num_train_epochs=2,
            eval_before_training=True,
        )
    )  # fmt: skip
    assert results["steps"] == 4 and results["world_size"] == 1
    for key in ("linear_probe", "knn200", "knn20", "knn50", "R@1", "R@8"):
        assert 0 <= results["after"][key] <= 100 and key in results["before"]
    saved = json.loads((out / "results.json").read_text())
    if loss == "weince":
        assert saved["lambda_curve"] and all(0 <= lam <= 1 for _, lam in saved["lambda_curve"])
        assert saved["mean_delta_aic"] is not None and saved["mean_rho"] is not None
    else:  # InfoNCE logs no statistics (every training log still happens), and its results name none
        assert not {"lambda_curve", "mean_lambda", "mean_delta_aic"} & set(saved)
    assert_table_matches((out / "results.md").read_text(), saved)
    assert (out / "model" / "backbone.safetensors").is_file() and (out / "run_config.yaml").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["hardness_infonce", "hcl", "dcl", "focal_infonce", "sigmoid"])
def test_the_field_losses_train_simclr(tmp_path: Path, loss: str) -> None:
    """``simclr-train --loss NAME`` in the NT-Xent layout for each of the field's losses (issue 55): the run ends
    and is scored; hardness weighting of hard negatives alone is refused there (no view is a hard negative)."""
    from simcse_weince.cli.train_vision import run

    root = write_cifar10_zips(tmp_path / "data")
    results = run(_vision_args(root, tmp_path / "run", loss=loss, dataset="cifar10_zip", loss_learning_rate=0.01))
    assert results["steps"] == 4 and results["loss"]["name"] == loss  # 16 images, 4 a batch, 1 epoch
    assert all(0 <= v <= 100 for v in results["after"].values())
    if loss == "hardness_infonce":
        with pytest.raises(ValueError, match="'ntxent' layout has none"):
            run(_vision_args(root, tmp_path / "hard", loss=loss, hardness_mode="hard_negatives"))


def test_results_table_has_a_column_per_metric_and_a_row_per_encoder() -> None:
    """Every cell distinct, so a dropped, moved or swapped value shows (the tiny run's scores are often all 100)."""
    from simcse_weince.cli.train_vision import results_table

    results = {
        "backbone": "resnet18_slim", "dataset": "cifar10_zip", "loss": {"name": "weince"}, "steps": 4,
        "train_seconds": 3.0, "mean_lambda": 0.25,
        "before": {m: 10.0 + i for i, m in enumerate(METRICS)},
        "after": {m: 50.0 + i + 0.25 for i, m in enumerate(METRICS)},
    }  # fmt: skip
    table = results_table(results)
    assert table.splitlines()[0] == "SimCLR resnet18_slim on cifar10_zip (weince), 4 steps, 3 s training"
    assert_table_matches(table, results)
    assert "| trained (best k-NN checkpoint) | 50.25 | 51.25 |" in table
    after_only = {k: v for k, v in results.items() if k != "before"}  # no evaluation before training: one row
    assert_table_matches(results_table(after_only), after_only)


@pytest.mark.parametrize(
    "cfg", sorted((Path(__file__).resolve().parents[2] / "configs" / "vision").glob("*.yaml")), ids=lambda p: p.name
)
def test_vision_configs_parse(cfg: Path, tmp_path: Path) -> None:
    from simcse_weince.cli.train_vision import ARG_GROUPS
    from simcse_weince.training.config import parse_config

    m, _, loss, t = parse_config(ARG_GROUPS, [str(cfg), "--output_dir", str(tmp_path)])
    built = loss.build("ntxent")
    assert built.layout == "ntxent" and built.temperature == 0.5
    assert built.name == "weince"  # one config per recipe, WEINCE by default (InfoNCE: --loss infonce)
    _, _, infonce, _ = parse_config(ARG_GROUPS, [str(cfg), "--output_dir", str(tmp_path), "--loss", "infonce"])
    assert not isinstance(infonce.build("ntxent"), WeinceLoss)
    if cfg.name not in CPU_RECIPES:
        # the authors' arm: their Adam has no weight decay (the flag has no effect), a constant lr, no clipping
        decay = 0.0 if cfg.name == "cifar100_resnet18_authors.yaml" else 1e-6
        assert (t.per_device_train_batch_size, t.learning_rate, t.weight_decay, t.num_train_epochs) == (
            256,
            3e-4,
            decay,
            100,
        )
        assert m.projection_dim == 64


def test_the_authors_config_is_their_weince_arm(tmp_path: Path) -> None:
    """configs/vision/cifar100_resnet18_authors.yaml: the settings of their slurm script, flag for flag."""
    from simcse_weince.cli.train_vision import ARG_GROUPS
    from simcse_weince.losses.topm import TopMConfig
    from simcse_weince.training.config import parse_config

    cfg = Path(__file__).resolve().parents[2] / "configs/vision/cifar100_resnet18_authors.yaml"
    m, d, loss, t = parse_config(ARG_GROUPS, [str(cfg), "--output_dir", str(tmp_path)])
    built = loss.build("ntxent")
    assert built.name == "weince" and built.temperature == 0.5
    w = built.config
    assert (w.beta_mode, w.q, w.margin, w.kappa_rho, w.kappa_aic, w.tail_frac, w.min_tail_points) == (
        "unit", 0.2, 2.0, 10.0, 1.0, 0.1, 32
    )  # fmt: skip
    assert built.topm.config == TopMConfig(topm_softmax_weight=0.5, topm_weibit_weight=0.5)  # M 50, auto β
    assert (m.backbone, m.projection_dim, d.dataset, d.image_size) == ("resnet18", 64, "cifar100", 32)
    assert (t.lr_scheduler_type.value, t.warmup_steps, t.max_grad_norm) == ("constant", 0, 0.0)
    assert (t.eval_strategy.value, t.load_best_model_at_end, t.dataloader_num_workers) == ("no", False, 6)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_process_run_gathers_across_processes(tmp_path: Path) -> None:
    """``accelerate launch`` with 2 CPU processes (gloo) and plain BatchNorm: gathered negatives, world size 2."""
    root = write_cifar10_zips(tmp_path / "data")
    out = tmp_path / "run"
    accelerate_launch(2, ["-m", "simcse_weince.cli.train_vision", *_vision_args(root, out, sync_batchnorm=False)])
    results = json.loads((out / "results.json").read_text())
    assert results["world_size"] == 2 and results["steps"] == 2  # 16 images / (2 processes x 4)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_cpu_processes_with_sync_batchnorm_end_in_a_one_line_error(tmp_path: Path) -> None:
    """``--sync_batchnorm true`` reaches the model on 2 CPU processes: torch's SyncBatchNorm needs CUDA, so the
    processes end with the one-line error and exit status 2 (no traceback of theirs; the launcher adds its own
    report), before training or writing results. The first process to exit may stop the other before it prints."""
    root = write_cifar10_zips(tmp_path / "data")
    out = tmp_path / "run"
    target = ["-m", "simcse_weince.cli.train_vision", *_vision_args(root, out, sync_batchnorm=True)]
    proc = accelerate_launch(2, target, check=False)
    report = proc.stdout[-2000:] + proc.stderr[-4000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode != 0 and "exitcode  : 2" in proc.stderr, report
    assert 1 <= len(errors) <= 2 and len(set(errors)) == 1, report
    assert "sync_batchnorm needs CUDA processes" in errors[0] and "this run has 2 processes on cpu" in errors[0]
    assert "ValueError" not in proc.stderr and not (out / "results.json").exists()


def test_sync_batchnorm_is_refused_on_cpu_processes() -> None:
    from simcse_weince.cli.train_vision import maybe_sync_batchnorm

    model = SimCLRModel("resnet18_slim", 32)
    assert maybe_sync_batchnorm(model, True, 1, torch.device("cpu")) is model  # single process: nothing to sync
    with pytest.raises(ValueError, match="sync_batchnorm needs CUDA"):
        maybe_sync_batchnorm(model, True, 2, torch.device("cpu"))


def test_sync_batchnorm_converts_every_batchnorm_for_several_cuda_processes() -> None:
    """On CUDA processes (the device is only named: the conversion itself needs no GPU) the flag turns every
    BatchNorm into a SyncBatchNorm with the same statistics; without the flag, or on one process, the model is
    left as it is."""
    from simcse_weince.cli.train_vision import maybe_sync_batchnorm

    def norms(m: torch.nn.Module, kind: type) -> list[torch.nn.Module]:
        return [x for x in m.modules() if isinstance(x, kind)]

    model = SimCLRModel("resnet18_slim", 32)
    plain = norms(model, torch.nn.modules.batchnorm._BatchNorm)
    assert plain and not norms(model, torch.nn.SyncBatchNorm)
    cuda = torch.device("cuda")
    assert maybe_sync_batchnorm(model, False, 2, cuda) is model and not norms(model, torch.nn.SyncBatchNorm)
    assert maybe_sync_batchnorm(model, True, 1, cuda) is model and not norms(model, torch.nn.SyncBatchNorm)

    synced = maybe_sync_batchnorm(model, True, 2, cuda)
    converted = norms(synced, torch.nn.modules.batchnorm._BatchNorm)
    assert len(converted) == len(plain) and all(type(x) is torch.nn.SyncBatchNorm for x in converted)
    for old, new in zip(plain, converted, strict=True):
        assert torch.equal(old.running_mean, new.running_mean) and torch.equal(old.weight, new.weight)


def test_invalid_setting_fails_before_the_data_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from simcse_weince.cli import train_vision as train_module

    def loaded(*args, **kwargs):
        raise AssertionError("data was loaded before the settings were checked")

    monkeypatch.setattr(train_module, "build_datasets", loaded)
    cfg = tmp_path / "run.yaml"
    cfg.write_text("beta_mode: mle\n")
    assert train_module.main([str(cfg), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {cfg}: beta_mode must be one of") and err.count("\n") == 1
