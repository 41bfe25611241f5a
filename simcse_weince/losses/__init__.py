"""Contrastive losses: InfoNCE, WEINCE, the link losses (learned, learned-τ, profiled, temperature-free) and the
field's alternatives (hardness-weighted InfoNCE, HCL, DCL, Focal-InfoNCE, SigLIP's sigmoid), in the SimCSE and
SimCLR / NT-Xent layouts, listed once in :data:`LOSSES`.

Adding a loss is one file (a :class:`~simcse_weince.losses.base.ContrastiveLoss` subclass with its ``name``,
``display_name``, ``Config`` and ``diagnostic_keys``), its import here and its entry in :data:`LOSSES`: the
training arguments, their ``--loss`` choices and help, the trainer's logged diagnostics, the model cards,
``results.json``, the run record and the package's names (``from simcse_weince.losses import HCLLoss``) read
the registry.
"""

from simcse_weince.losses.arctanh import ArctanhLoss
from simcse_weince.losses.base import ContrastiveLoss, WithTopMTerms, with_terms
from simcse_weince.losses.dcl import DCLLoss
from simcse_weince.losses.focal_infonce import FocalInfoNCELoss
from simcse_weince.losses.hardness_infonce import HardnessInfoNCELoss
from simcse_weince.losses.hcl import HCLLoss
from simcse_weince.losses.infonce import InfoNCELoss
from simcse_weince.losses.layout import ScoreMatrix, score_matrix
from simcse_weince.losses.learned_link import LearnedLinkLoss
from simcse_weince.losses.learned_temperature import LearnedTemperatureLoss
from simcse_weince.losses.profiled_link import ProfiledLinkLoss
from simcse_weince.losses.sigmoid import SigmoidLoss
from simcse_weince.losses.stats import AnchorStatistics
from simcse_weince.losses.topm import TopMConfig
from simcse_weince.losses.weince import WeinceLoss

LOSSES: dict[str, type[ContrastiveLoss]] = {
    cls.name: cls
    for cls in (
        WeinceLoss,  # the default first
        InfoNCELoss,
        LearnedLinkLoss,
        LearnedTemperatureLoss,
        ProfiledLinkLoss,
        ArctanhLoss,
        HardnessInfoNCELoss,
        HCLLoss,
        DCLLoss,
        FocalInfoNCELoss,
        SigmoidLoss,
    )
}


def loss_class(name: str) -> type[ContrastiveLoss]:
    """The registered loss called ``name`` (``ValueError`` naming the choices otherwise)."""
    if name not in LOSSES:
        raise ValueError(f"loss must be one of {tuple(LOSSES)}, got {name!r}")
    return LOSSES[name]


def make_loss(name: str, *, topm: TopMConfig | dict | None = None, **kwargs: object) -> ContrastiveLoss:
    """The registered loss ``name`` built with ``kwargs`` (its constructor's arguments, such as a
    ``get_config_dict()``), wrapped with the top-M terms ``topm`` when one of their weights is > 0
    (:func:`~simcse_weince.losses.base.with_terms`)."""
    return with_terms(loss_class(name)(**kwargs), topm)


def loss_configs() -> list[type]:
    """Every registered loss's ``Config`` (a class two losses share, once), then :class:`TopMConfig`: the settings
    a training run's ``loss`` group holds."""
    return [*dict.fromkeys(cls.Config for cls in LOSSES.values()), TopMConfig]


# every registered loss and its Config by their class names (a new loss adds nothing here)
globals().update({c.__name__: c for cls in LOSSES.values() for c in (cls, cls.Config)})
__all__ = [
    "LOSSES",
    "AnchorStatistics",
    "ContrastiveLoss",
    "ScoreMatrix",
    "TopMConfig",
    "WithTopMTerms",
    "loss_class",
    "loss_configs",
    "make_loss",
    "score_matrix",
    "with_terms",
    *sorted({c.__name__ for cls in LOSSES.values() for c in (cls, cls.Config)}),
]
