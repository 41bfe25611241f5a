"""The sentence-transformers adapter inside sentence-transformers' loss modifiers: ``MatryoshkaLoss``.

``MatryoshkaLoss`` swaps the model's ``forward`` for a caching decorator that embeds each batch once and hands
the inner loss the first ``dim`` coordinates, re-normalised, once per Matryoshka dimension; the adapter's merged
forward and duplicate mask must pass through it unchanged.
"""

from __future__ import annotations

from pathlib import Path

import torch
from datasets import Dataset

from simcse_weince.losses import WeinceLoss
from simcse_weince.losses.sentence_transformers import SentenceTransformerContrastiveLoss
from tests.losses.test_sentence_transformers import _tiny_st

# Mean pooling: the random tiny BERT's CLS vectors are nearly collinear (cosines 0.99994 to 0.999999), where WEINCE's
# -log(1 - s) turns float32 rounding of s into 3e-5 relative loss differences; the mean-pooled cosines (0.66 to 0.98)
# are well conditioned, so re-normalising moves the loss by ~4e-7 only.
POOLING = "mean"


def _columns(wiki_sample: Path, rows: int = 16) -> tuple[list[str], list[str]]:
    lines = wiki_sample.read_text(encoding="utf-8").splitlines()
    return lines[:rows], lines[rows : 2 * rows]  # distinct sentences: no duplicate is masked


def test_matryoshka_trains_a_few_steps_with_sentence_transformer_trainer(
    tiny_bert_weights_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss

    model = _tiny_st(tiny_bert_weights_dir, POOLING)
    lines = wiki_sample.read_text(encoding="utf-8").splitlines()[:48]
    ds = Dataset.from_dict({"anchor": lines, "positive": lines})  # unsupervised SimCSE: dropout makes the views
    inner = SentenceTransformerContrastiveLoss(model, temperature=0.05, min_tail_points=10)
    calls: list[tuple[int, ...]] = []
    inner.loss.register_forward_hook(lambda module, args, out: calls.append(tuple(args[0].shape)))
    loss = MatryoshkaLoss(model, inner, matryoshka_dims=[32, 16, 8])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=16,
        max_steps=3,
        learning_rate=1e-2,
        report_to="none",
        save_strategy="no",
        dataloader_pin_memory=torch.cuda.is_available(),  # sentence-transformers' default pins even on a CPU
        disable_tqdm=True,
    )
    out = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss).train()
    assert out.global_step == 3 and torch.isfinite(torch.tensor(out.training_loss))
    assert [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])], "no weight was updated"
    # the inner WEINCE ran once per dimension and step, on the truncated embeddings, largest first
    assert calls == [(16, 32), (16, 16), (16, 8)] * 3
    assert 0 <= float(inner.loss.last_diagnostics["lambda_mean"]) <= 1  # the last call's: dimension 8


def test_matryoshka_at_full_dimension_is_the_adapter(tiny_bert_weights_dir: Path, wiki_sample: Path) -> None:
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss

    model = _tiny_st(tiny_bert_weights_dir, POOLING).eval()  # no dropout: every forward gives the same embeddings
    anchors, positives = _columns(wiki_sample)
    feats = [model.preprocess(anchors), model.preprocess(positives)]
    adapter = SentenceTransformerContrastiveLoss(model, loss=WeinceLoss(0.05, min_tail_points=10))

    def value_and_grad(loss: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        model.zero_grad()
        value = loss(feats, None)
        value.backward()
        return value.detach(), model[0].auto_model.embeddings.word_embeddings.weight.grad.clone()

    direct, direct_grad = value_and_grad(adapter)
    lam = adapter.loss.last_diagnostics["lambda_mean"]
    assert 0 < float(lam) < 1  # the blend is active, so the comparison is WEINCE's and not InfoNCE's
    full, full_grad = value_and_grad(MatryoshkaLoss(model, adapter, matryoshka_dims=[32]))
    # Matryoshka re-normalises the full embedding: the cosines, hence the loss, move by rounding only
    torch.testing.assert_close(full, direct, rtol=1e-5, atol=1e-6)
    # the gradients too, as a whole (single entries near 0 differ relatively by more, through rounding)
    assert float((full_grad - direct_grad).norm() / direct_grad.norm()) < 1e-4
    # λ reads logs of the shortfalls 1 - s (down to 0.02 here) through the gate's steep sigmoids: rounding of s is
    # amplified (measured: 2.3e-5 relative)
    torch.testing.assert_close(adapter.loss.last_diagnostics["lambda_mean"], lam, rtol=1e-4, atol=1e-6)

    # Two dimensions: the sum of the adapter's loss and the embedding-level loss on the first 16 coordinates.
    with torch.no_grad():
        nested = MatryoshkaLoss(model, adapter, matryoshka_dims=[16, 32])(feats, None)
        a, p = (model(f)["sentence_embedding"] for f in feats)  # (B, 32) each
        at_16 = WeinceLoss(0.05, min_tail_points=10)(a[:, :16], p[:, :16])
    torch.testing.assert_close(nested, direct + at_16, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(at_16, direct)  # the truncation changes the loss: the sum is not a doubled value
