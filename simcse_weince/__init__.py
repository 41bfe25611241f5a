"""simcse-weince: SimCSE (unsupervised and supervised) and SimCLR with the WEINCE loss, evaluation and diagnostics.

The package's face: the loss registry (:data:`LOSSES`, :func:`loss_class`), every registered loss by its class name
(``from simcse_weince import WeinceLoss, LearnedLinkLoss``; derived from the registry, so a new loss needs no line
here), the loss base class and the authors' top-M terms.
"""

from simcse_weince.losses import LOSSES, ContrastiveLoss, TopMConfig, WithTopMTerms, loss_class

globals().update({cls.__name__: cls for cls in LOSSES.values()})  # every registered loss, by its class name

__version__ = "0.1.0"
__all__ = [
    "LOSSES",
    "ContrastiveLoss",
    "TopMConfig",
    "WithTopMTerms",
    "__version__",
    "loss_class",
    *sorted(cls.__name__ for cls in LOSSES.values()),
]
