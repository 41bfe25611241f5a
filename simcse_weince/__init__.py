"""simcse-weince: SimCSE (unsupervised and supervised) and SimCLR with the WEINCE loss, evaluation and diagnostics."""

from simcse_weince.losses import InfoNCELoss, TopMConfig, WeinceLoss

__version__ = "0.1.0"
__all__ = ["InfoNCELoss", "TopMConfig", "WeinceLoss", "__version__"]
