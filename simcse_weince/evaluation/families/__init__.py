"""The registry of evaluation task families, in report order. A new family is one module defining a
:class:`~simcse_weince.evaluation.family.TaskFamily` object plus one line here."""

from __future__ import annotations

from simcse_weince.evaluation.families import retrieval, sts, transfer
from simcse_weince.evaluation.family import TaskFamily

FAMILIES: dict[str, TaskFamily] = {
    family.name: family
    for family in (
        sts.FAMILY,
        transfer.FAMILY,
        retrieval.FAMILY,
    )
}
