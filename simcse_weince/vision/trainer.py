"""``SimCLRTrainer``: two augmented views in one backbone pass, NT-Xent-layout loss, k-NN model selection."""

from __future__ import annotations

import time
from typing import Any

from simcse_weince.trainer_base import ContrastiveTrainer
from simcse_weince.vision.evaluation import extract_features, knn_accuracy


class SimCLRTrainer(ContrastiveTrainer):
    """Overrides ``compute_loss`` (views → anchors/positives → loss) and ``evaluate`` (k-NN top-1 with the
    probe train set as memory bank). ``eval_dataset`` is the probe test set; ``probe_train`` the bank.
    """

    def __init__(self, *args: Any, probe_train=None, num_classes: int = 10, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.probe_train = probe_train
        self.num_classes = num_classes

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        views = model(inputs["pixel_values"])  # (B, 2, C, H, W) -> one pass over 2B images
        loss = self.contrastive_loss(views["anchors"], views["positives"])
        if model.training:
            self.accumulate_diagnostics()
        return (loss, views) if return_outputs else loss

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> dict[str, float]:
        """k-NN (k = 200, cosine, weighted) top-1 accuracy of the backbone features."""
        test = self.eval_dataset if eval_dataset is None else eval_dataset
        if test is None or self.probe_train is None:
            raise ValueError("SimCLRTrainer.evaluate needs eval_dataset (probe test set) and probe_train (bank)")
        model = self.accelerator.unwrap_model(self.model)
        t0 = time.perf_counter()
        bs, dev = self.args.per_device_eval_batch_size, self.args.device
        show = not self.args.disable_tqdm and self.is_world_process_zero()
        tr_f, tr_y = extract_features(model, self.probe_train, bs, dev, show)
        te_f, te_y = extract_features(model, test, bs, dev, show)
        metrics = {
            f"{metric_key_prefix}_knn200": knn_accuracy(tr_f, tr_y, te_f, te_y, 200, self.num_classes),
            f"{metric_key_prefix}_runtime": time.perf_counter() - t0,
        }
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
