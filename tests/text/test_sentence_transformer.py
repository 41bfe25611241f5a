"""Any checkpoint as a SentenceTransformer encodes what the evaluation encodes (``load_text_encoder``): a plain
encoder with each pooler, a SentenceTransformer folder as saved and with its transformer pooled otherwise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simcse_weince.text.encoder import load_text_encoder
from simcse_weince.text.sentence_transformer import load_sentence_transformer

SENTENCES = ["A man is playing a flute.", "Two dogs run on the beach", "a cat sat on the mat", "The sky is blue"]


def same_vectors(st, encoder) -> None:
    ours = st.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=True)
    theirs = encoder.encode(SENTENCES)
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("pooler", [None, "cls_before_pooler", "avg", "avg_first_last"])
def test_a_plain_encoder_with_each_pooler(tiny_bert_weights_dir: Path, pooler: str | None) -> None:
    st = load_sentence_transformer(str(tiny_bert_weights_dir), pooler, "cpu")  # None: cls_before_pooler
    same_vectors(st, load_text_encoder(str(tiny_bert_weights_dir), pooler, device="cpu"))


@pytest.mark.parametrize("pooler", [None, "cls_before_pooler"])
def test_a_sentence_transformer_folder(minilm_dir: Path, pooler: str | None) -> None:
    st = load_sentence_transformer(str(minilm_dir), pooler, "cpu")
    assert [type(m).__name__ for m in st][-1] == ("Normalize" if pooler is None else "Pooling")
    same_vectors(st, load_text_encoder(str(minilm_dir), pooler, device="cpu"))


def test_the_cls_pooler_is_refused(tiny_bert_weights_dir: Path) -> None:
    with pytest.raises(ValueError, match="needs the trained SimCSE MLP"):
        load_sentence_transformer(str(tiny_bert_weights_dir), "cls")
