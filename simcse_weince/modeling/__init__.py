"""SimCSE model, poolers and SentenceTransformer export."""

from simcse_weince.modeling.poolers import POOLERS, pool
from simcse_weince.modeling.simcse import SimCSEModel, inference_pooler_for, load_encoder

__all__ = ["POOLERS", "SimCSEModel", "inference_pooler_for", "load_encoder", "pool"]
