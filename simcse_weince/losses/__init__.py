"""Contrastive losses: InfoNCE and WEINCE, in the SimCSE and SimCLR / NT-Xent layouts."""

from simcse_weince.losses.config import TopMConfig, WeinceConfig
from simcse_weince.losses.infonce import InfoNCELoss
from simcse_weince.losses.layout import ScoreMatrix, score_matrix
from simcse_weince.losses.stats import AnchorStatistics
from simcse_weince.losses.weince import WeinceLoss

__all__ = ["AnchorStatistics", "InfoNCELoss", "ScoreMatrix", "TopMConfig", "WeinceConfig", "WeinceLoss", "score_matrix"]
