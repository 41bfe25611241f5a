"""The cards' shared renderer: the loss section, the score rows, and the same run facts on the text and vision cards."""

from __future__ import annotations

from simcse_weince.text.model_card import render_model_card
from simcse_weince.training.model_card import RunFacts, loss_section, render_card, score_rows
from simcse_weince.vision.model_card import render_vision_card

FACTS: RunFacts = {
    "loss_name": "WEINCE",
    "loss_config": {"temperature": 0.05, "beta_mode": "unit"},
    "citation": "\n@article{x}\n\n",
    "steps": 7,
    "batch": 16,
    "processes": 2,
    "lr": 3e-05,
    "precision": "bf16",
}


def test_the_loss_section_is_the_tag_the_name_the_sorted_config_and_the_stripped_citation() -> None:
    assert loss_section("InfoNCE", {"b": 1, "a": [2]}, "  @misc{y}\n") == {
        "loss_tag": "infonce",
        "loss_name": "InfoNCE",
        "loss_config": '{"a": [2], "b": 1}',
        "citation": "@misc{y}",
    }


def test_score_rows_have_two_decimals_or_say_nothing_was_evaluated() -> None:
    assert score_rows({"STS-B dev": 81.234, "knn200": 5}) == "| STS-B dev | 81.23 |\n| knn200 | 5.00 |"
    assert score_rows({}) == "| (not evaluated) | |"


def test_render_card_fills_the_shared_fields_and_the_cards_own() -> None:
    template = "{loss_tag}|{loss_name}|{loss_config}|{steps}|{batch}|{processes}|{lr}|{precision}|{score_rows}|{own}|"
    template += "{citation}"
    assert render_card(template, {"a": 1.0}, FACTS, own="x") == (
        'weince|WEINCE|{"beta_mode": "unit", "temperature": 0.05}|7|16|2|3e-05|bf16|| a | 1.00 ||x|@article{x}'
    )


def test_both_cards_say_the_same_about_the_loss_and_the_run() -> None:
    text = render_model_card(
        base_model="org/bert", from_config=False, data_desc="rows", max_len=32, pooler="cls",
        inference_pooler="cls_before_pooler", eval_steps=10, scores={}, usage_path="me/m", **FACTS,
    )  # fmt: skip
    vision = render_vision_card(
        config={"backbone": "resnet18", "image_size": 32, "projection_dim": 128}, dataset="cifar", train_images=10,
        scores={"knn200": 50.0}, **FACTS,
    )  # fmt: skip
    row = '| loss | WEINCE: `{"beta_mode": "unit", "temperature": 0.05}` |'
    for card in (text, vision):
        assert row in card and "- weince\n" in card and card.endswith("```bibtex\n@article{x}\n```\n")
        assert "7 steps, batch 16 × 2 process(es), lr 3e-05, " in card
    assert "# SimCSE-WEINCE (bert)" in text and "| (not evaluated) | |" in text
    assert "# SimCLR-WEINCE (resnet18, cifar)" in vision and "| knn200 | 50.00 |" in vision
