"""The sentence-transformers loss adapter: one real training step with SentenceTransformerTrainer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from datasets import Dataset

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.losses.sentence_transformers import SentenceTransformerContrastiveLoss


def _tiny_st(folder: Path, pooling: str = "cls"):
    """The tests' tiny BERT as a SentenceTransformer (32 tokens, ``pooling`` over its 32-wide states)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    t = Transformer(str(folder), max_seq_length=32)
    return SentenceTransformer(modules=[t, Pooling(32, pooling_mode=pooling)], device="cpu")


def test_one_training_step_with_sentence_transformer_trainer(
    tiny_bert_weights_dir: Path, wiki_sample: Path, tmp_path
) -> None:
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    model = _tiny_st(tiny_bert_weights_dir)
    lines = wiki_sample.read_text(encoding="utf-8").splitlines()[:16]
    ds = Dataset.from_dict({"anchor": lines, "positive": lines})
    loss = SentenceTransformerContrastiveLoss(model, temperature=0.05, min_tail_points=10)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=16,
        max_steps=1,
        learning_rate=1e-2,
        report_to="none",
        save_strategy="no",
        dataloader_pin_memory=torch.cuda.is_available(),  # sentence-transformers' default pins even on a CPU
        disable_tqdm=True,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss)
    out = trainer.train()
    assert out.global_step == 1 and torch.isfinite(torch.tensor(out.training_loss))
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "the step did not update any weight"
    assert 0 <= float(loss.loss.last_diagnostics["lambda_mean"]) <= 1
    cfg = loss.get_config_dict()
    assert cfg["loss"] == "WeinceLoss" and cfg["beta_mode"] == "ols"
    assert "2606.00262" in loss.citation


def test_adapter_matches_embedding_level_loss(tiny_bert_weights_dir: Path) -> None:
    model = _tiny_st(tiny_bert_weights_dir).eval()  # no dropout: both columns give identical embeddings
    sentences = ["a cat sat", "dogs bark loudly", "a cat sat", "rain is falling", "the market rose"]
    feats = [model.preprocess(sentences), model.preprocess(sentences)]
    adapter = SentenceTransformerContrastiveLoss(model, loss=InfoNCELoss(0.1))
    value = adapter(feats, None)
    emb = model.encode(sentences, convert_to_tensor=True)
    mask = torch.zeros(5, 5, dtype=torch.bool)
    mask[0, 2] = mask[2, 0] = True  # the duplicate pair
    expected = InfoNCELoss(0.1)(emb, emb, negative_mask=mask)
    torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-6)
    unmasked = SentenceTransformerContrastiveLoss(model, loss=InfoNCELoss(0.1), mask_duplicates=False)(feats, None)
    assert not torch.allclose(unmasked, value)


def test_one_training_step_with_hard_negatives(tiny_bert_weights_dir: Path, wiki_sample: Path, tmp_path) -> None:
    """(anchor, positive, negative) columns, as for sentence-transformers' MultipleNegativesRankingLoss: the
    supervised B×2B layout, the weight on the own hard negatives, a duplicate mask over all columns."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    model = _tiny_st(tiny_bert_weights_dir)
    lines = wiki_sample.read_text(encoding="utf-8").splitlines()[:16]
    # row i's hard negative is row i+1's sentence: a duplicate of another row's anchor and positive
    ds = Dataset.from_dict({"anchor": lines, "positive": lines, "negative": lines[1:] + lines[:1]})
    loss = SentenceTransformerContrastiveLoss(model, temperature=0.05, min_tail_points=10, hard_negative_weight=1.0)
    calls = []
    loss.loss.register_forward_hook(lambda module, args, kwargs, out: calls.append(kwargs), with_kwargs=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=16,
        max_steps=1,
        learning_rate=1e-2,
        report_to="none",
        save_strategy="no",
        dataloader_pin_memory=torch.cuda.is_available(),
        disable_tqdm=True,
    )
    out = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss).train()
    assert out.global_step == 1 and torch.isfinite(torch.tensor(out.training_loss))
    assert [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])], "no weight was updated"
    (call,) = calls
    assert len(call["negatives"]) == 1 and call["negatives"][0].shape == (16, 32)
    mask = call["negative_mask"]
    assert mask.shape == (16, 32) and int(mask.sum()) == 16  # each anchor's sentence once among the negatives
    assert loss.get_config_dict()["hard_negative_weight"] == 1.0


def test_adapter_with_hard_negatives_matches_embedding_level_loss(tiny_bert_weights_dir: Path) -> None:
    model = _tiny_st(tiny_bert_weights_dir).eval()
    anchors = ["a cat sat", "dogs bark loudly", "rain is falling", "the market rose"]
    positives = ["a cat was sitting", "a cat sat", "it is raining", "stocks went up"]
    negatives = ["a dog sat", "cats are quiet", "a cat sat", "the market fell"]
    feats = [model.preprocess(column) for column in (anchors, positives, negatives)]
    loss = InfoNCELoss(0.1, hard_negative_weight=0.5)
    value = SentenceTransformerContrastiveLoss(model, loss=loss)(feats, None)
    emb = [model.encode(column, convert_to_tensor=True) for column in (anchors, positives, negatives)]
    # candidates [p0 p1 p2 p3 | n0 n1 n2 n3]; "a cat sat" is anchor 0 and appears as p1 (positive of anchor 1,
    # kept) and as n2: both are anchor 0's sentence; n2 is also anchor 1's positive's sentence
    mask = torch.zeros(4, 8, dtype=torch.bool)
    mask[0, 1] = mask[0, 6] = mask[1, 6] = True
    expected = loss(emb[0], emb[1], negative_mask=mask, negatives=emb[2:])
    torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-6)
    unmasked = SentenceTransformerContrastiveLoss(model, loss=loss, mask_duplicates=False)(feats, None)
    torch.testing.assert_close(unmasked, loss(emb[0], emb[1], negatives=emb[2:]), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(unmasked, value)


def test_adapter_rejects_bad_inputs(tiny_bert_weights_dir: Path) -> None:
    model = _tiny_st(tiny_bert_weights_dir)
    with pytest.raises(ValueError, match="2 text columns"):
        SentenceTransformerContrastiveLoss(model)([model.preprocess(["a"])], None)
    with pytest.raises(ValueError, match="layout"):
        SentenceTransformerContrastiveLoss(model, loss=WeinceLoss(layout="ntxent"))
    with pytest.raises(ValueError, match="either"):
        SentenceTransformerContrastiveLoss(model, loss=InfoNCELoss(), q=0.3)


@pytest.mark.parametrize(
    "name", ["learned_link", "profiled_link", "arctanh", "hardness_infonce", "hcl", "dcl", "focal_infonce", "sigmoid"]
)
def test_the_registered_losses_train_through_the_adapter(
    tiny_bert_weights_dir: Path, wiki_sample: Path, tmp_path, name: str
) -> None:
    """Two steps of SentenceTransformerTrainer with a loss by its registered name: the encoder's weights move,
    and so does the link — the learned link's (α, b) are parameters of the loss module, which
    SentenceTransformerTrainer optimises with the model's; the profiled link's θ moves with each batch."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    model = _tiny_st(tiny_bert_weights_dir)
    lines = wiki_sample.read_text(encoding="utf-8").splitlines()[:16]
    ds = Dataset.from_dict({"anchor": lines, "positive": lines})
    kwargs = {} if name == "arctanh" else {"temperature": 0.1}
    loss = SentenceTransformerContrastiveLoss(model, loss=name, **kwargs)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=8, max_steps=2, learning_rate=1e-2, report_to="none",
        save_strategy="no", dataloader_pin_memory=False, disable_tqdm=True,
    )  # fmt: skip
    out = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss).train()
    assert out.global_step == 2 and torch.isfinite(torch.tensor(out.training_loss))
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    if name in ("learned_link", "profiled_link"):
        assert loss.loss.coefficients() != (10.0, 0.0)  # moved from its start (1/τ, 0)
    if name == "sigmoid":  # t and b are the loss module's parameters: SentenceTransformerTrainer trains them too
        assert loss.loss.learned_values() != pytest.approx({"sigmoid_t": 10.0, "sigmoid_b": -10.0})
    assert loss.get_config_dict()["loss"] == type(loss.loss).__name__


def _relative_difference(grads: list[torch.Tensor], expected: list[torch.Tensor]) -> float:
    """‖G − E‖ / ‖E‖ over every weight's gradient at once."""
    diff = torch.cat([(g - e).flatten() for g, e in zip(grads, expected, strict=True)])
    return float(diff.norm() / torch.cat([e.flatten() for e in expected]).norm())


@pytest.mark.parametrize("mode", ["in_batch_negatives", "hard_negatives", "all_negatives"])
@pytest.mark.parametrize("columns", [2, 3, 4])
def test_hardness_infonce_is_sentence_transformers_mnrl(tiny_bert_weights_dir: Path, mode: str, columns: int) -> None:
    """``loss="hardness_infonce"`` through the adapter equals sentence-transformers' own
    ``MultipleNegativesRankingLoss(scale=1/τ, hardness_mode=..., hardness_strength=α)`` on the same model and
    columns (pairs, triplets, two hard-negative columns): the loss to 1e-6, every weight's gradient to float32's
    rounding."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = _tiny_st(tiny_bert_weights_dir, pooling="mean").eval()  # no dropout: the two forwards see one model
    texts = [
        ["a cat sat on the mat", "dogs bark loudly", "rain is falling", "the market rose", "she reads a book"],
        ["a cat was sitting", "a dog is barking", "it is raining", "stocks went up", "a woman is reading"],
        ["a dog sat on the mat", "cats are quiet", "the sun is out", "the market fell", "she writes a letter"],
        ["the mat is red", "birds sing", "snow is falling", "prices dropped", "a man reads a paper"],
    ][:columns]
    alpha = 5.0

    def value_and_grads(loss: torch.nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        value = loss([model.preprocess(column) for column in texts], None)
        value.backward()
        return value.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    ours = SentenceTransformerContrastiveLoss(
        model, loss="hardness_infonce", temperature=0.05, hardness_mode=mode, hardness_strength=alpha,
        mask_duplicates=False,
    )  # fmt: skip
    theirs = MultipleNegativesRankingLoss(model, scale=20.0, hardness_mode=mode, hardness_strength=alpha)
    value, grads = value_and_grads(ours)
    expected, expected_grads = value_and_grads(theirs)
    torch.testing.assert_close(value, expected, rtol=1e-6, atol=1e-6)
    assert len(grads) == len(expected_grads) > 0
    # float32 rounding (our scores and theirs sum in other orders): the whole gradient to ~1e-6 of its norm, as close
    # as plain InfoNCE is to plain MNRL on the same batch (measured: 0.56-1.21e-6 against 0.77-0.84e-6)
    relative = _relative_difference(grads, expected_grads)
    _, infonce_grads = value_and_grads(
        SentenceTransformerContrastiveLoss(model, loss=InfoNCELoss(0.05), mask_duplicates=False)
    )
    _, mnrl_grads = value_and_grads(MultipleNegativesRankingLoss(model, scale=20.0))
    rounding = _relative_difference(infonce_grads, mnrl_grads)
    assert relative < 2e-6 and relative < 2 * rounding
    plain, _ = value_and_grads(MultipleNegativesRankingLoss(model, scale=20.0))
    if columns > 2 or mode != "hard_negatives":
        assert abs(float(plain) - float(expected)) > 1e-4  # the weighting acts: the comparison can fail
