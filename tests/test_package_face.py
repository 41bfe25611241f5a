"""The package's face: the loss registry and every registered loss importable from ``simcse_weince``."""

from __future__ import annotations

import simcse_weince
from simcse_weince.losses import LOSSES


def test_every_registered_loss_is_importable_from_the_package_by_its_class_name() -> None:
    assert simcse_weince.LOSSES is LOSSES
    for name, cls in LOSSES.items():
        assert getattr(simcse_weince, cls.__name__) is cls, name
        assert cls.__name__ in simcse_weince.__all__
    assert simcse_weince.loss_class("weince") is simcse_weince.WeinceLoss
    namespace: dict = {}
    exec("from simcse_weince import *", namespace)  # what a star import offers: __all__
    assert {cls.__name__ for cls in LOSSES.values()} <= set(namespace)
    assert {"LOSSES", "TopMConfig", "ContrastiveLoss", "loss_class"} <= set(namespace)
