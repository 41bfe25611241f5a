"""The one text-checkpoint loader: exported folders come back as a SimCSEModel with the same vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from simcse_weince.text.checkpoint import UnsupportedSentenceTransformer, load_text_checkpoint
from simcse_weince.text.encoder import SentenceTransformerEncoder, SimCSEEncoder, load_text_encoder
from simcse_weince.text.export import export_sentence_transformer
from simcse_weince.text.model import SimCSEModel, load_hf_encoder

SENTENCES = ["a man is playing a guitar .", "the cat sleeps", "stocks fell sharply on monday after the report ."]


def _export(tiny_bert_dir: Path, folder: Path, pooler: str, mlp_only_train: bool) -> SimCSEModel:
    torch.manual_seed(3)
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = SimCSEModel(load_hf_encoder(str(tiny_bert_dir), from_config=True), pooler, mlp_only_train)
    with torch.no_grad():  # an MLP far from identity, so that dropping it would show
        if model.mlp is not None:
            model.mlp[0].weight.normal_(0, 1.0)
    export_sentence_transformer(model, tok, folder)
    return model


@pytest.mark.parametrize(
    ("pooler", "mlp_only_train", "loaded_pooler"),
    [
        ("cls", False, "cls"),
        ("cls", True, "cls_before_pooler"),
        ("avg", True, "avg"),
        ("avg_first_last", True, "avg_first_last"),
    ],
)
def test_exported_folder_reproduces_sentence_transformer(
    tiny_bert_dir: Path, tmp_path: Path, pooler: str, mlp_only_train: bool, loaded_pooler: str
) -> None:
    from sentence_transformers import SentenceTransformer

    _export(tiny_bert_dir, tmp_path / "run" / "model", pooler, mlp_only_train)
    reference = SentenceTransformer(str(tmp_path / "run" / "model"), device="cpu").encode(SENTENCES)
    ckpt = load_text_checkpoint(str(tmp_path / "run"))  # a training output folder: its model/ is used
    assert ckpt.model.pooler == loaded_pooler
    assert (ckpt.model.mlp is not None) == (pooler == "cls" and not mlp_only_train)
    # the training path (what the diagnostics score, dropout off) and the inference path both give the
    # SentenceTransformer's vectors: for cls + MLP kept at inference the MLP is part of both
    model = ckpt.model.eval()
    batch = ckpt.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        head = model(**batch)["anchors"].numpy()
    np.testing.assert_allclose(head, reference, rtol=0, atol=1e-6)
    np.testing.assert_allclose(model.encode(**batch).numpy(), reference, rtol=0, atol=1e-6)
    enc = load_text_encoder(str(tmp_path / "run"), device="cpu")
    assert isinstance(enc, SimCSEEncoder)
    np.testing.assert_allclose(enc.encode(SENTENCES), reference, rtol=0, atol=1e-6)


def test_minilm_is_mean_pooling_with_normalize(minilm_dir: Path) -> None:
    ckpt = load_text_checkpoint(str(minilm_dir))
    assert (ckpt.model.pooler, ckpt.normalize, ckpt.max_length) == ("avg", True, 256)


def test_other_modules_go_to_sentence_transformers(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.dense import Dense

    _export(tiny_bert_dir, tmp_path / "st", "avg", True)
    st = SentenceTransformer(str(tmp_path / "st"), device="cpu")
    st.append(Dense(32, 8))  # a projection no SimCSEModel has
    st.save(str(tmp_path / "dense"))
    with pytest.raises(UnsupportedSentenceTransformer, match="Dense"):
        load_text_checkpoint(str(tmp_path / "dense"))
    assert isinstance(load_text_encoder(str(tmp_path / "dense"), device="cpu"), SentenceTransformerEncoder)
    # with an explicit pooler, the transformer is pooled as asked
    assert load_text_checkpoint(str(tmp_path / "dense"), pooler="avg").model.pooler == "avg"
    with pytest.raises(ValueError, match="MLP"):
        load_text_checkpoint(str(tmp_path / "dense"), pooler="cls")


def test_base_inference_settings_survive_the_export(tiny_bert_dir: Path, tmp_path: Path, minilm_dir: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from simcse_weince.text.checkpoint import inference_settings

    assert inference_settings(minilm_dir) == (True, 256)
    assert inference_settings(tiny_bert_dir) == (False, None)  # a plain HF folder has neither
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = SimCSEModel(load_hf_encoder(str(tiny_bert_dir), from_config=True), "avg")
    folder = export_sentence_transformer(model, tok, tmp_path / "st", max_seq_length=48, normalize=True)
    st = SentenceTransformer(str(folder), device="cpu")
    assert type(list(st)[-1]).__name__ == "Normalize" and st.max_seq_length == 48
    assert inference_settings(folder) == (True, 48)
    ckpt = load_text_checkpoint(str(folder))
    assert ckpt.normalize and ckpt.max_length == 48


def _dtypes(module: torch.nn.Module) -> set[torch.dtype]:
    return {p.dtype for p in module.parameters()}


def test_half_precision_checkpoints_load_as_float32(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """Checkpoints stored in fp16 (as many on the Hub are) give fp32 weights: transformers 5 would keep the
    stored dtype, and fp16 master weights train wrongly and fail on the CPU ("mixed dtype")."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.dense import Dense
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    fp32 = AutoModel.from_config(AutoConfig.from_pretrained(tiny_bert_dir))
    fp32.half().save_pretrained(tmp_path / "hf")
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(tmp_path / "hf")
    encoder = load_hf_encoder(str(tmp_path / "hf"))
    assert _dtypes(encoder) == {torch.float32}
    stored = fp32.state_dict()  # the fp16 values, upcast exactly
    for name, value in encoder.state_dict().items():
        if value.is_floating_point():
            torch.testing.assert_close(value, stored[name].float(), rtol=0, atol=0)
    assert np.isfinite(load_text_encoder(str(tmp_path / "hf"), device="cpu").encode(SENTENCES)).all()
    # random weights from a config saved as float16 are float32 too
    assert _dtypes(load_hf_encoder(str(tmp_path / "hf"), from_config=True)) == {torch.float32}

    _export(tiny_bert_dir, tmp_path / "st", "avg", True)
    st = SentenceTransformer(str(tmp_path / "st"), device="cpu").half()
    st.save(str(tmp_path / "st16"))
    assert _dtypes(load_text_checkpoint(str(tmp_path / "st16")).model) == {torch.float32}
    st.append(Dense(32, 8).half())  # sentence-transformers' own path
    st.save(str(tmp_path / "dense16"))
    for folder in ("st16", "dense16"):
        enc = load_text_encoder(str(tmp_path / folder), device="cpu")
        assert np.isfinite(enc.encode(SENTENCES)).all(), folder
    assert isinstance(enc, SentenceTransformerEncoder) and _dtypes(enc.model) == {torch.float32}
