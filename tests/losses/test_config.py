"""WeinceConfig is the one owner of the WEINCE knobs: no consumer carries a default of its own.

Each test below fails if a default is hard-coded again in one of the places that used to repeat them: the
loss constructor, the statistics, the training arguments, the diagnostics flags.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import get_type_hints
from unittest import mock

import pytest
import torch

from simcse_weince.cli.diagnose import LOSS_FLAGS, NOT_STATISTICS_FLAGS, build_parser, statistics_loss
from simcse_weince.losses import WeinceLoss, WithTopMTerms, stats
from simcse_weince.losses.topm import TopMConfig
from simcse_weince.losses.weince import BETA_MODES, WeinceConfig
from simcse_weince.training.arguments import LossArguments

KNOBS = [f.name for f in dataclasses.fields(WeinceConfig)]
DEFAULT = WeinceConfig()

# one value outside each knob's range, and the words its message must contain
OUT_OF_RANGE = {
    "temperature": (0.0, "temperature must be > 0, got 0.0"),
    "beta_mode": ("mle", "beta_mode must be one of ('unit', 'ols', 'hill'), got 'mle'"),
    "beta_min": (0.0, "beta_clamp must satisfy 0 < beta_min <= beta_max, got (0.0, 16.0)"),
    "beta_max": (0.25, "beta_clamp must satisfy 0 < beta_min <= beta_max, got (0.5, 0.25)"),
    "min_tail_points": (0, "min_tail_points must be an integer >= 1, got 0"),
    "tail_frac": (1.5, "tail_frac must be in (0, 1], got 1.5"),
    "burn": (-1, "burn must be None (automatic) or an integer >= 0, got -1"),
    "q": (1.2, "q must be in [0, 1], got 1.2"),
    "kappa_rho": (-1.0, "kappa_rho must be > 0, got -1.0"),
    "kappa_aic": (0.0, "kappa_aic must be > 0, got 0.0"),
    "margin": (math.nan, "margin must be a finite number, got nan"),
    "eps": (0.2, "eps must be in (0, 0.1], got 0.2"),
    "fixed_lambda": (2.0, "fixed_lambda must be None or in [0, 1], got 2.0"),
}

# a valid value away from each default: what a consumer must pass through under the knob's own name
NON_DEFAULT = {
    "temperature": 0.1,
    "beta_mode": "hill",
    "beta_min": 1.0,
    "beta_max": 4.0,
    "min_tail_points": 8,
    "tail_frac": 0.2,
    "burn": 2,
    "q": 0.3,
    "kappa_rho": 5.0,
    "kappa_aic": 2.0,
    "margin": 1.5,
    "eps": 1e-5,
    "fixed_lambda": 0.25,
}


def test_tables_cover_every_knob() -> None:
    assert set(OUT_OF_RANGE) == set(NON_DEFAULT) == set(KNOBS)
    assert all(NON_DEFAULT[k] != getattr(DEFAULT, k) for k in KNOBS)


@pytest.mark.parametrize("name", KNOBS)
def test_every_knob_has_help_and_a_range_check(name: str) -> None:
    f = next(f for f in dataclasses.fields(WeinceConfig) if f.name == name)
    assert isinstance(f.metadata["help"], str) and len(f.metadata["help"]) > 10
    assert callable(f.metadata["check"])
    bad, message = OUT_OF_RANGE[name]
    with pytest.raises(ValueError) as err:
        WeinceConfig(**{name: bad})
    assert str(err.value) == message
    assert getattr(WeinceConfig(**{name: NON_DEFAULT[name]}), name) == NON_DEFAULT[name]


def test_config_is_frozen_and_normalises_numbers() -> None:
    cfg = WeinceConfig(q=1, min_tail_points=10.0, burn=3.0)
    assert (cfg.q, cfg.min_tail_points, cfg.burn) == (1.0, 10, 3)
    assert type(cfg.q) is float and type(cfg.min_tail_points) is int and type(cfg.burn) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.q = 0.5
    with pytest.raises(ValueError, match="min_tail_points must be an integer"):
        WeinceConfig(min_tail_points=2.5)
    assert set(BETA_MODES) == {"unit", "ols", "hill"}


def test_weince_loss_takes_its_defaults_from_the_config() -> None:
    params = inspect.signature(WeinceLoss.__init__).parameters
    for name in (*KNOBS, "beta_clamp"):
        assert name not in params or params[name].default is None, f"WeinceLoss({name}=...) has its own default"
    loss = WeinceLoss()
    assert loss.config == DEFAULT
    assert {k: getattr(loss, k) for k in KNOBS} == dataclasses.asdict(DEFAULT)
    assert loss.beta_clamp == (DEFAULT.beta_min, DEFAULT.beta_max)
    expected = {k: v for k, v in dataclasses.asdict(DEFAULT).items() if k not in ("beta_min", "beta_max")}
    expected |= {"beta_clamp": [DEFAULT.beta_min, DEFAULT.beta_max], "layout": "simcse", "gather_across_devices": False}
    assert loss.get_config_dict() == expected


def test_weince_loss_knobs_override_the_config() -> None:
    base = WeinceConfig(beta_mode="unit", q=0.4)
    loss = WeinceLoss(config=base, q=0.3, beta_clamp=(1.0, 4.0))
    assert loss.config == dataclasses.replace(base, q=0.3, beta_min=1.0, beta_max=4.0)
    assert WeinceLoss(0.5).temperature == WeinceLoss(temperature=0.5).config.temperature == 0.5
    assert WeinceLoss(**NON_DEFAULT).config == WeinceConfig(**NON_DEFAULT)
    assert (
        WeinceLoss(config=WeinceConfig(**NON_DEFAULT)).get_config_dict() == WeinceLoss(**NON_DEFAULT).get_config_dict()
    )
    with pytest.raises(AttributeError):
        loss.q = 0.5  # the knobs are views of the frozen config
    with pytest.raises(TypeError, match="not both"):
        WeinceLoss(beta_clamp=(1.0, 2.0), beta_min=1.0)
    with pytest.raises(TypeError, match="kappa"):
        WeinceLoss(kappa=1.0)


def test_statistics_have_no_knob_defaults() -> None:
    params = inspect.signature(stats.anchor_statistics).parameters
    assert list(params) == ["stat_scores", "num_negatives", "config", "gather_rho"]
    assert [p.default for p in params.values()][:3] == [inspect.Parameter.empty] * 3
    for name, fn in inspect.getmembers(stats, inspect.isfunction):
        for p in inspect.signature(fn).parameters.values():
            assert p.name not in KNOBS or p.default is inspect.Parameter.empty, f"{name}({p.name}=...)"


def test_statistics_read_the_config() -> None:
    torch.manual_seed(0)
    scores = torch.nn.functional.normalize(torch.randn(48, 8), dim=1)
    s = scores @ scores.T
    s = s.masked_fill(torch.eye(48, dtype=torch.bool), float("-inf"))
    kwargs = dict(stat_scores=s, num_negatives=47)
    a = stats.anchor_statistics(**kwargs, config=DEFAULT)
    b = stats.anchor_statistics(**kwargs, config=dataclasses.replace(DEFAULT, q=0.9, beta_mode="unit"))
    assert float(b.rho0) > float(a.rho0) and bool((b.beta == 1).all()) and not bool((a.beta == 1).all())


def test_loss_arguments_are_derived_from_the_config() -> None:
    fields = {f.name: f for f in dataclasses.fields(LossArguments)}
    terms = [f.name for f in dataclasses.fields(TopMConfig)]
    links = ["link_learn_a", "link_a_max", "link_b_min", "link_b_max", "link_momentum"]  # the link losses' own
    field_losses = ["hardness_mode", "hardness_strength", "hcl_beta", "hcl_tau_plus", "dcl_sigma", "focal_margin",
                    "sigmoid_bias"]  # fmt: skip
    assert list(fields) == [
        "loss", *KNOBS, *links, *field_losses, *terms, "gather_across_devices", "mask_duplicates",
        "hard_negative_weight",
    ]  # fmt: skip
    own_hints = get_type_hints(LossArguments)
    for config in (WeinceConfig, TopMConfig):
        hints = get_type_hints(config)
        for f in dataclasses.fields(config):
            if f.name == "temperature":  # the losses' defaults differ: None, the chosen loss's own
                assert fields[f.name].default is None and own_hints[f.name] == float | None
                assert fields[f.name].metadata["help"].startswith(f.metadata["help"] + " Default: the loss's own")
                continue
            assert fields[f.name].default == f.default, f"LossArguments.{f.name} has its own default"
            assert own_hints[f.name] == hints[f.name] and fields[f.name].metadata["help"] == f.metadata["help"]
    assert LossArguments().weince_config() == DEFAULT and LossArguments().terms_config() == TopMConfig()
    assert not isinstance(LossArguments().build(), WithTopMTerms)  # the terms are off by default
    on = LossArguments(topm_weibit_weight=0.5, topm_weibit_m=7).build("ntxent")
    assert isinstance(on, WithTopMTerms) and on.topm.config == TopMConfig(topm_weibit_weight=0.5, topm_weibit_m=7)
    assert LossArguments().build().config == DEFAULT
    assert LossArguments(**NON_DEFAULT).build("ntxent").config == WeinceConfig(**NON_DEFAULT)
    assert LossArguments.__module__ == "simcse_weince.training.arguments"


def test_a_loss_declares_its_own_defaults() -> None:
    """The sigmoid loss's τ = 0.1 (SigLIP's t = 10) beside everyone else's 0.05: unset, each loss gets its own,
    in the arguments and in the loss they build; set, every loss gets the value; a shared knob of another type in
    two losses is refused when the arguments are made."""
    from simcse_weince.training.arguments import _loss_argument_fields, shared_defaults

    assert shared_defaults()["temperature"]["sigmoid"] == 0.1 and shared_defaults()["temperature"]["weince"] == 0.05
    for loss, tau in (("weince", 0.05), ("infonce", 0.05), ("hcl", 0.05), ("sigmoid", 0.1)):
        args = LossArguments(loss=loss)
        assert args.temperature == tau and args.build().temperature == tau
    assert LossArguments(loss="sigmoid", temperature=0.05).build().learned_values()["sigmoid_t"] == pytest.approx(20)
    assert "(0.05, sigmoid 0.1)" in dict((n, f) for n, _, f in _loss_argument_fields())["temperature"].metadata["help"]

    @dataclasses.dataclass(frozen=True)
    class Clash:
        temperature: int = dataclasses.field(default=1, metadata={"help": "an integer τ"})

    with mock.patch("simcse_weince.training.arguments.loss_configs", return_value=[WeinceConfig, Clash]):
        with pytest.raises(TypeError, match=r"Clash\.temperature differs"):
            _loss_argument_fields()


@pytest.mark.parametrize("name", KNOBS)
def test_loss_arguments_validate_every_knob_for_both_losses(name: str) -> None:
    bad, message = OUT_OF_RANGE[name]
    for loss in ("weince", "infonce"):
        with pytest.raises(ValueError) as err:
            LossArguments(loss=loss, **{name: bad})
        if name != "beta_mode":  # LossArguments names the choices of a Literal its own way
            assert str(err.value) == message


def _flags(*argv: str):
    return build_parser().parse_args(["--model", "m", "--out", "o", *argv])


def test_diagnostics_flags_are_derived_from_the_config(tmp_path) -> None:
    assert set(LOSS_FLAGS.values()) == set(KNOBS) - NOT_STATISTICS_FLAGS
    assert LOSS_FLAGS["hardness_quantile"] == "q" and "q" not in LOSS_FLAGS  # --pot_quantile is the POT threshold
    actions = {a.dest: a for a in build_parser()._actions}
    for flag, name in LOSS_FLAGS.items():
        assert actions[flag].default is None, f"--{flag} has its own default"  # None = saved, else the config
        assert repr(getattr(DEFAULT, name)) in actions[flag].help
    assert tuple(actions["beta_mode"].choices) == BETA_MODES
    loss, source = statistics_loss(_flags(), str(tmp_path), "simcse")  # not a run folder: the config defaults
    assert loss.config == DEFAULT and source == "defaults"
    argv = [a for flag, name in LOSS_FLAGS.items() for a in (f"--{flag}", str(NON_DEFAULT[name]))]
    loss, source = statistics_loss(_flags(*argv), str(tmp_path), "simcse")
    assert loss.config == dataclasses.replace(DEFAULT, **{n: NON_DEFAULT[n] for n in LOSS_FLAGS.values()})
    assert type(loss.min_tail_points) is int and type(loss.burn) is int
