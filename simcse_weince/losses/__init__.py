"""Contrastive losses: InfoNCE, WEINCE and the link losses (learned, learned-τ, profiled, temperature-free), in
the SimCSE and SimCLR / NT-Xent layouts, listed once in :data:`LOSSES`.

Adding a loss is one file (a :class:`~simcse_weince.losses.base.ContrastiveLoss` subclass with its ``name``,
``display_name``, ``Config`` and ``diagnostic_keys``) and one line here: the training arguments, their ``--loss``
choices and help, the trainer's logged diagnostics, the model cards, ``results.json`` and the run record read
the registry.
"""

from simcse_weince.losses.arctanh import ArctanhConfig, ArctanhLoss
from simcse_weince.losses.base import ContrastiveLoss, WithTopMTerms
from simcse_weince.losses.infonce import InfoNCEConfig, InfoNCELoss
from simcse_weince.losses.layout import ScoreMatrix, score_matrix
from simcse_weince.losses.learned_link import LearnedLinkConfig, LearnedLinkLoss
from simcse_weince.losses.learned_temperature import LearnedTemperatureConfig, LearnedTemperatureLoss
from simcse_weince.losses.profiled_link import ProfiledLinkConfig, ProfiledLinkLoss
from simcse_weince.losses.stats import AnchorStatistics
from simcse_weince.losses.topm import TopMConfig
from simcse_weince.losses.weince import WeinceConfig, WeinceLoss

LOSSES: dict[str, type[ContrastiveLoss]] = {
    cls.name: cls
    for cls in (WeinceLoss, InfoNCELoss, LearnedLinkLoss, LearnedTemperatureLoss, ProfiledLinkLoss, ArctanhLoss)
}  # the default first


def loss_class(name: str) -> type[ContrastiveLoss]:
    """The registered loss called ``name`` (``ValueError`` naming the choices otherwise)."""
    if name not in LOSSES:
        raise ValueError(f"loss must be one of {tuple(LOSSES)}, got {name!r}")
    return LOSSES[name]


def loss_configs() -> list[type]:
    """Every registered loss's ``Config`` (a class two losses share, once), then :class:`TopMConfig`: the settings
    a training run's ``loss`` group holds."""
    return [*dict.fromkeys(cls.Config for cls in LOSSES.values()), TopMConfig]


__all__ = [
    "LOSSES",
    "AnchorStatistics",
    "ArctanhConfig",
    "ArctanhLoss",
    "ContrastiveLoss",
    "InfoNCEConfig",
    "InfoNCELoss",
    "LearnedLinkConfig",
    "LearnedLinkLoss",
    "LearnedTemperatureConfig",
    "LearnedTemperatureLoss",
    "ProfiledLinkConfig",
    "ProfiledLinkLoss",
    "ScoreMatrix",
    "TopMConfig",
    "WeinceConfig",
    "WeinceLoss",
    "WithTopMTerms",
    "loss_class",
    "loss_configs",
    "score_matrix",
]
