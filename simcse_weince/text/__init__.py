"""SimCSE, unsupervised and supervised: the model and poolers, training text and corpus, trainer, export and
model card."""

from simcse_weince.text.model import SimCSEModel, inference_pooler_for, load_hf_encoder
from simcse_weince.text.poolers import POOLERS, pool

__all__ = ["POOLERS", "SimCSEModel", "inference_pooler_for", "load_hf_encoder", "pool"]
