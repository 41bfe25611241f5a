"""SimCSE model: poolers, the single 2B-row forward, and SentenceTransformer export."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from simcse_weince.losses.layout import BatchKind
from simcse_weince.text.encoder import SentenceTransformerEncoder, SimCSEEncoder
from simcse_weince.text.export import export_sentence_transformer
from simcse_weince.text.model import SimCSEModel, inference_pooler_for, length_groups, load_hf_encoder
from simcse_weince.text.poolers import pool

SENTENCES = [
    "a man is playing a guitar .",
    "the cat sleeps",
    "stocks fell sharply on monday after the report , and analysts said the decline could last for weeks "
    "because the central bank had signalled that it would keep interest rates higher for longer than expected .",
]


def _batch(tok, sentences=SENTENCES):
    return tok(sentences, padding=True, return_tensors="pt")


def test_poolers_closed_form() -> None:
    h = torch.arange(2 * 3 * 2, dtype=torch.float).reshape(2, 3, 2)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    torch.testing.assert_close(pool("cls_before_pooler", h, mask), h[:, 0])
    torch.testing.assert_close(pool("avg", h, mask)[0], (h[0, 0] + h[0, 1]) / 2)
    torch.testing.assert_close(pool("avg", h, mask)[1], h[1].mean(0))
    states = (h * 0, h * 2, h * 5, h)  # embeddings, layer 1, layer 2, last
    torch.testing.assert_close(pool("avg_first_last", h, mask, states), pool("avg", (2 * h + h) / 2, mask))
    with pytest.raises(ValueError, match="pooler must be"):
        pool("max", h, mask)
    with pytest.raises(ValueError, match="hidden_states"):
        pool("avg_first_last", h, mask)


def test_inference_pooler() -> None:
    assert inference_pooler_for("cls", True) == "cls_before_pooler"
    assert inference_pooler_for("cls", False) == "cls"
    assert inference_pooler_for("avg", True) == "avg"


def _widths(model: SimCSEModel) -> list[tuple[int, int]]:
    """(rows, width) of every forward the encoder runs from now on."""
    seen: list[tuple[int, int]] = []
    model.encoder.embeddings.register_forward_hook(lambda m, i, o: seen.append(tuple(o.shape[:2])))
    return seen


def test_one_forward_of_two_b_rows_and_dropout_views(tiny_bert_dir: Path) -> None:
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = SimCSEModel(load_hf_encoder(str(tiny_bert_dir), from_config=True), "cls", length_groups=1).train()
    seen = _widths(model)
    batch = _batch(tok)
    out = model(**batch)
    assert seen == [(6, batch["input_ids"].shape[1])]  # ONE forward of 2B rows
    assert out["anchors"].shape == out["positives"].shape == (3, 32)
    assert not torch.allclose(out["anchors"], out["positives"])  # dropout makes two views
    model.eval()
    out = model(**_batch(tok))
    torch.testing.assert_close(out["anchors"], out["positives"])


def test_length_groups_closed_form() -> None:
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]])
    groups = length_groups(mask, 2)  # extents 3, 1, 5, 2, 0 → sorted rows 4, 1, 3 | 0, 2
    assert [(r.tolist(), w) for r, w in groups] == [([4, 1, 3], 2), ([0, 2], 5)]
    assert [(r.tolist(), w) for r, w in length_groups(mask, 9)] == [([4], 1), ([1], 1), ([3], 2), ([0], 3), ([2], 5)]
    assert [(r.tolist(), w) for r, w in length_groups(mask, 1)] == [([4, 1, 3, 0, 2], 5)]
    left = torch.tensor([[0, 0, 1], [0, 1, 1]])  # left padding: every row ends at the last column, nothing cut
    assert [w for _, w in length_groups(left, 2)] == [3, 3]
    with pytest.raises(ValueError, match=r"^length_groups must be an integer >= 1, got 0$"):
        SimCSEModel(torch.nn.Linear(1, 1), "avg", length_groups=0)


@pytest.mark.parametrize(("pooler", "kind"), [("cls", "views"), ("avg", "views"), ("avg_first_last", "triplets")])
def test_length_groups_same_embeddings_and_gradients(tiny_bert_dir: Path, pooler: str, kind: str) -> None:
    """Rows encoded in groups, each padded to its own longest, give the embeddings and the gradient of one
    forward padded to the batch's longest (dropout off), with fewer padded positions."""
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    words = "the quick brown fox jumps over a lazy dog while seven cats watch from the old red barn".split()
    texts = [" ".join(words[: 2 + 3 * i % 17]) for i in range(12)]
    if kind == "views":
        batch = dict(tok(texts, padding=True, return_tensors="pt"))
    else:  # (B, 3, L): anchor, positive, hard negative
        enc = tok(texts, padding=True, return_tensors="pt")
        batch = {k: v.view(4, 3, -1) for k, v in enc.items()}
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    torch.manual_seed(0)
    model = SimCSEModel(load_hf_encoder(str(tiny_bert_dir), from_config=True, config_overrides=no_dropout), pooler)
    seen = _widths(model.train())
    lookups: list[int] = []
    model.encoder.embeddings.word_embeddings.register_forward_hook(lambda m, i, o: lookups.append(o.shape[0]))
    results = []
    for groups, table in ((1, True), (3, True), (3, False)):  # (3, False): an encoder of another layout
        model.length_groups = groups
        model._word_embeddings = (lambda: None) if not table else type(model)._word_embeddings.__get__(model)
        out = model(**batch, kind=kind)
        z = torch.cat([out["anchors"], out["positives"], *out.get("negatives", [])])
        model.zero_grad()
        z.sin().sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((z.detach(), grads, list(seen)))
        seen.clear()
    (z1, g1, seen1), (z3, g3, seen3), (z3_ids, g3_ids, _) = results
    for z, g in ((z3, g3), (z3_ids, g3_ids)):
        torch.testing.assert_close(z, z1, atol=1e-5, rtol=1e-5)
        assert g1.keys() == g.keys() and len(g1) > 10
        for name in g1:
            torch.testing.assert_close(g[name], g1[name], atol=1e-5, rtol=1e-4, msg=name)
    rows = seen1[0][0]
    assert lookups[:2] == [rows, rows] and len(lookups) == 5  # once a forward with the table, else once a group
    assert len(seen1) == 1 and len(seen3) == 3 and sum(r for r, _ in seen3) == rows
    assert sum(r * w for r, w in seen3) < 0.8 * rows * seen1[0][1]  # the padded positions left out


def test_length_groups_keep_two_dropout_views(tiny_bert_dir: Path) -> None:
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = SimCSEModel(load_hf_encoder(str(tiny_bert_dir), from_config=True), "avg", length_groups=2).train()
    out = model(**_batch(tok))
    assert not torch.allclose(out["anchors"], out["positives"])
    model.eval()
    out = model(**_batch(tok))
    torch.testing.assert_close(out["anchors"], out["positives"])


def test_task_pooler_is_frozen(tiny_bert_dir: Path) -> None:
    enc = load_hf_encoder(str(tiny_bert_dir), from_config=True)
    assert all(not p.requires_grad for p in enc.pooler.parameters())
    assert all(p.requires_grad for p in enc.encoder.parameters())


@pytest.mark.parametrize(
    ("pooler", "mlp_only_train"), [("cls", True), ("cls", False), ("avg", True), ("avg_first_last", True)]
)
def test_export_loads_with_sentence_transformers(
    tiny_bert_dir: Path, tmp_path: Path, pooler: str, mlp_only_train: bool
) -> None:
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(1)
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = SimCSEModel(load_hf_encoder(str(tiny_bert_dir), from_config=True), pooler, mlp_only_train)
    with torch.no_grad():  # make the MLP far from identity so that dropping it would show
        if model.mlp is not None:
            model.mlp[0].weight.normal_(0, 1.0)
    ours = SimCSEEncoder(model, tok, batch_size=2).encode(SENTENCES)
    folder = export_sentence_transformer(model, tok, tmp_path / "st", card="# card\n")
    st = SentenceTransformer(str(folder), device="cpu")
    theirs = SentenceTransformerEncoder(st).encode(SENTENCES)
    np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5)
    assert (folder / "README.md").read_text() == "# card\n"
    # The MLP-free encoder would give different vectors for the 'cls' (MLP at inference) case.
    if pooler == "cls" and not mlp_only_train:
        plain = SimCSEEncoder(SimCSEModel(model.encoder, "cls_before_pooler"), tok).encode(SENTENCES)
        assert not np.allclose(plain, ours, atol=1e-3)


def test_absent_hard_negatives_are_not_encoded(tiny_bert_dir: Path) -> None:
    """Rows (B, n, L) with an all-padding text (an absent hard negative): only the present texts go through the
    encoder, each embedded as in a batch without the absent ones; the absent ones are zero vectors."""
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = SimCSEModel(load_hf_encoder(str(tiny_bert_dir), from_config=True), pooler="cls", mlp_only_train=False)
    model.eval()
    texts = [["a cat", "a kitten", "a dog"], ["a car", "a vehicle", ""], ["the sun", "a star", ""]]
    ids = [tok(t)["input_ids"] if t else [] for row in texts for t in row]
    batch = tok.pad({"input_ids": ids}, return_tensors="pt")
    batch = {k: v.view(3, 3, -1) for k, v in batch.items()} | {"kind": BatchKind.TRIPLETS}
    seen: list[int] = []
    model.encoder.embeddings.register_forward_hook(lambda m, i, o: seen.append(o.shape[0]))
    out = model(**batch)
    assert sum(seen) == 7  # 9 texts, 2 absent
    assert torch.equal(out["negatives"][0, 1:], torch.zeros(2, 32))
    present = model(**tok([t for row in texts for t in row if t], padding=True, return_tensors="pt"))
    together = torch.cat([out["anchors"], out["positives"], out["negatives"][0, :1]])
    order = [0, 3, 5, 1, 4, 6, 2]  # anchors, positives, then the one present negative, in the flat order
    torch.testing.assert_close(together, present["anchors"][order])
