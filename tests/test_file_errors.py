"""``file_errors.brief``: a library's message shortened for a one-line error, never cut mid-word or mid-sentence."""

from __future__ import annotations

from simcse_weince.core.file_errors import brief


def test_a_short_message_is_kept_whole_on_one_line() -> None:
    assert brief("failed finding\n  central directory") == "failed finding central directory"


def test_a_long_message_keeps_its_first_sentence() -> None:
    first = "Weights only load failed."
    text = first + " " + "Re-running torch.load with weights_only set to False will likely succeed. " * 10
    assert brief(text) == first


def test_a_long_sentence_is_cut_at_a_word_with_a_mark() -> None:
    text = " ".join(f"word{i}" for i in range(100))
    out = brief(text, limit=50)
    assert out.endswith(" …") and len(out) <= 52
    assert all(w in text.split() for w in out[:-2].split())  # whole words only
