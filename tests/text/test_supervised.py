"""Supervised SimCSE end to end on rows from SICK's training split: triplets and pairs from CSV files reach the
model as (B, n, L) rows and the loss as anchors, positives and hard negatives; the export loads."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from simcse_weince.cli.train_text import run
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.duplicates import ABSENT_KEY
from simcse_weince.losses.layout import BatchKind
from simcse_weince.text.trainer import SimCSETrainer
from tests.helpers import accelerate_runs, argv, text_run_args, without_dropout
from weince_lab.experiments.sick_nli import build_rows, read_sick

REPO = Path(__file__).resolve().parents[2]


def write_rows(path: Path, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def sick_rows(shared_data: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    return build_rows(read_sick(shared_data / "senteval" / "downstream" / "SICK" / "SICK_train.txt"))


class ModelInputs(TrainerCallback):
    """The ``input_ids`` shape of every training-mode forward of the model."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        def record(module, args, kwargs, output):
            if module.training:
                self.shapes.append(tuple(kwargs["input_ids"].shape))

        model.register_forward_hook(record, with_kwargs=True)


class LossCalls(list):
    """The shape of ``negatives`` at every loss call (None: no hard negatives), and in ``absent`` how many of
    them were absent (None: not given); in ``kinds`` the batch kind given with it."""

    def __init__(self) -> None:
        super().__init__()
        self.absent: list[int | None] = []
        self.kinds: list[BatchKind | None] = []


@pytest.fixture
def loss_calls(monkeypatch: pytest.MonkeyPatch) -> LossCalls:
    calls = LossCalls()
    forward = ContrastiveLoss.forward

    def spy(self, anchors, positives, negative_mask=None, negatives=None, absent_negatives=None, kind=None):
        calls.append(None if negatives is None else tuple(torch.as_tensor(torch.stack(list(negatives))).shape))
        calls.absent.append(None if absent_negatives is None else int(absent_negatives.sum()))
        calls.kinds.append(kind)
        return forward(self, anchors, positives, negative_mask, negatives, absent_negatives, kind)

    monkeypatch.setattr(ContrastiveLoss, "forward", spy)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["triplets", "pairs", "mixed"])
def test_supervised_rows_reach_the_model_and_the_loss(
    kind: str, sick_rows, tiny_bert_dir: Path, tmp_path: Path, loss_calls
) -> None:
    triplets, pairs = sick_rows
    files, flags = [], {}
    if kind in ("triplets", "mixed"):
        files.append(write_rows(tmp_path / "triplets.csv", ("sent0", "sent1", "hard_neg"), triplets))
    if kind in ("pairs", "mixed"):
        files.append(write_rows(tmp_path / "pairs.csv", ("sent0", "sent1"), pairs))
    if kind == "mixed":  # the pairs first in the order read: the first batches hold both kinds
        files, flags = files[::-1], {"allow_missing_negatives": True, "mask_duplicates": False}
    inputs = ModelInputs()
    args = text_run_args(
        tiny_bert_dir, files, tmp_path / "run", drop_unterminated_last_line=None, max_train_samples=None,
        max_steps=3, eval_steps=3, save_steps=3, mlp_only_train=False, hard_negative_weight=1.0, **flags,
    )  # fmt: skip
    results = run(args, callbacks=[inputs])
    n = 2 if kind == "pairs" else 3
    assert results["steps"] == 3 and results["text"]["text_columns"] == ["sent0", "sent1", "hard_neg"][:n]
    assert results["text"]["sentences"] == {"triplets": 251, "pairs": 1033, "mixed": 1284}[kind]
    assert results["text"]["rows_by_negatives"] == {"triplets": [0, 251], "pairs": [], "mixed": [1033, 251]}[kind]
    assert [s[:2] for s in inputs.shapes] == [(16, n)] * 3  # the B rows' n texts each, in one model call
    training_calls = [c for c in loss_calls if c is not None] if n == 3 else loss_calls
    assert training_calls[:3] == ([(1, 16, 32)] * 3 if n == 3 else [None] * 3)
    assert results["loss"]["hard_negative_weight"] == 1.0 and results["inference_pooler"] == "cls"
    assert loss_calls.kinds[:3] == [BatchKind.PAIRS if n == 2 else BatchKind.TRIPLETS] * 3  # the collator's field
    absent = [x for x, c in zip(loss_calls.absent, loss_calls, strict=True) if c is not None][:3]
    if kind == "mixed":  # 1,033 of 1,284 rows are pairs: most of each batch's negatives are absent
        assert all(8 <= x <= 16 for x in absent), absent
    else:
        assert absent in ([0, 0, 0], [])
    card = (tmp_path / "run" / "model" / "README.md").read_text(encoding="utf-8")
    assert "Supervised SimCSE sentence encoder" in card
    same = " (1 with a hard negative identical to their anchor or positive)"  # one of SICK's 251 triplets
    rows = {
        "triplets": f"251 rows: 251 triplets (anchor, positive, hard negative){same} from triplets.csv",
        "pairs": "1,033 pairs (anchor, positive) from pairs.csv",
        "mixed": "1,284 rows: 251 triplets (anchor, positive, hard negative) and 1,033 pairs (anchor, positive)"
        f"{same} from pairs.csv, triplets.csv",
    }
    assert results["text"]["repeated_negative_rows"] == (0 if kind == "pairs" else 1)
    assert f"| training data | {rows[kind]} (" in card

    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tmp_path / "run" / "model"), device="cpu")
    assert st.encode(["A man is playing a guitar."]).shape == (1, 32)


def test_the_trainer_finds_absent_negatives_by_their_key() -> None:
    """``absent_negatives`` (k, B) from the collator's keys, with or without duplicate masking; the duplicate mask
    never involves an absent negative; the counters are this process's rows."""
    keys = torch.tensor([[10, 11, 12], [20, 21, ABSENT_KEY], [30, 10, ABSENT_KEY]])  # rows 1, 2: pairs
    loss = SimpleNamespace(gather_across_devices=False)
    for dup in (False, True):
        trainer = SimpleNamespace(contrastive_loss=loss, mask_duplicates=dup)
        trainer.absent_negatives = lambda inputs, t=trainer: SimCSETrainer.absent_negatives(t, inputs)
        inputs = {"sentence_key": keys.clone(), "kind": BatchKind.TRIPLETS}
        absent = SimCSETrainer.absent_negatives(trainer, inputs)
        assert torch.equal(absent, torch.tensor([[False, True, True]])) and "sentence_key" in inputs
        mask, extra = SimCSETrainer.negative_mask(trainer, inputs)
        assert "sentence_key" not in inputs
        if dup:
            want = torch.zeros(3, 6, dtype=torch.bool)
            want[0, 2] = True  # p2 = anchor 0's sentence
            assert torch.equal(mask, want) and extra["duplicates_masked_per_step"] == 1
        else:
            assert mask is None and "duplicates_masked_per_step" not in extra
    pairs = {"sentence_key": torch.tensor([[1, 2], [4, 5]]), "kind": BatchKind.PAIRS}
    assert SimCSETrainer.absent_negatives(SimpleNamespace(), pairs) is None
    with pytest.raises(ValueError, match="the batch has no 'kind' field"):
        SimCSETrainer.absent_negatives(SimpleNamespace(), {"sentence_key": keys})


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["weince", "infonce"])
def test_paper_scale_supervised_configs_run_a_few_steps(loss: str, sick_rows, tiny_bert_dir: Path, tmp_path) -> None:
    """configs/sup_bert_base_{weince,infonce}.yaml as shipped, with a tiny random encoder and the SICK triplets
    in place of bert-base-uncased and the Hub's NLI file (no network here): 2 steps, the cls pooler with its MLP
    at inference, the loss of the file's name."""
    data = write_rows(tmp_path / "nli.csv", ("sent0", "sent1", "hard_neg"), sick_rows[0])
    config = Path(__file__).resolve().parents[2] / "configs" / f"sup_bert_base_{loss}.yaml"
    overrides = argv(
        config, model_name_or_path=tiny_bert_dir, init_from_config=True, train_files=data, max_train_samples=64,
        per_device_train_batch_size=16, max_steps=2, eval_steps=2, save_steps=2, eval_max_pairs=40,
        eval_test_at_end=False, min_tail_points=10, output_dir=tmp_path / "run", precision="fp32",
        disable_tqdm=True, report_to="none", dataloader_num_workers=0,
    )  # fmt: skip
    results = run(overrides)
    assert results["steps"] == 2 and results["loss"]["name"] == loss and results["inference_pooler"] == "cls"
    assert results["text"]["text_columns"] == ["sent0", "sent1", "hard_neg"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_processes_match_one_process_with_pairs_and_triplets(sick_rows, tiny_bert_dir: Path, tmp_path) -> None:
    """One SGD step on 2 gloo processes (16 rows each, every column gathered) equals one process with the same
    32 rows: 16 triplets and 16 pairs trained together (absent negatives masked across processes), dropout off,
    weights after the step = weights − gradient."""
    tiny = without_dropout(tiny_bert_dir)
    triplets, pairs = sick_rows
    files = [
        write_rows(tmp_path / "triplets.csv", ("sent0", "sent1", "hard_neg"), triplets[:16]),
        write_rows(tmp_path / "pairs.csv", ("sent0", "sent1"), pairs[:16]),
    ]

    def args(out: Path, batch: int, **flags: object) -> list[str]:
        return text_run_args(
            tiny, files, out, pooler="avg", drop_unterminated_last_line=None, max_train_samples=None,
            allow_missing_negatives=True, per_device_train_batch_size=batch, max_steps=1, optim="sgd",
            learning_rate="1.0", lr_scheduler_type="constant", max_grad_norm=0, weight_decay=0, eval_strategy="no",
            save_strategy="no", load_best_model_at_end=False, hard_negative_weight=0.5, **flags,
        )  # fmt: skip

    single = run(args(tmp_path / "one", 32))
    accelerate_runs(2, [args(tmp_path / "two", 16), args(tmp_path / "local", 16, gather_across_devices=False)],
                    tmp_path)  # fmt: skip
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    assert (single["world_size"], two["world_size"], two["steps"]) == (1, 2, 1)
    assert single["text"]["rows_by_negatives"] == [16, 16]
    assert two["train_loss"] == pytest.approx(single["train_loss"], rel=1e-5)
    assert two["mean_lambda"] == pytest.approx(single["mean_lambda"], rel=1e-5, abs=1e-6)
    w1, w2, w_local = (load_file(tmp_path / r / "model" / "model.safetensors") for r in ("one", "two", "local"))
    # DDP averages per-process sums: rounding up to ~1e-5 of a tensor's scale (5.8e-6 seen). The attention key
    # biases get a zero gradient in exact arithmetic (softmax ignores a per-query constant): rounding noise only.
    for k in (k for k in w1 if not k.endswith("attention.self.key.bias")):
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-4, atol=1e-4 * float(w1[k].abs().max()), msg=k)
    key = "encoder.layer.0.attention.self.query.weight"  # control: each process's 16 rows alone differ
    assert not torch.allclose(w_local[key], w1[key], rtol=1e-4, atol=1e-6)
