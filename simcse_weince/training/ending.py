"""How every training run ends, text and vision alike: one export, one Hub policy, one record.

On the main process, :func:`finish_run`

1. exports the model folder ``<output_dir>/model`` (the caller's ``export``, which writes no card);
2. with ``push_to_hub``, uploads it to the run's repository; a failure is recorded as ``hub_error`` (the local
   folder is complete and the message says how to upload it later);
3. renders the model card **once**, now that the outcome is known: its usage snippet names the Hub repository
   only if the model reached it, else a local path; writes it to ``README.md`` and, after a successful push,
   uploads it too;
4. writes ``results.json`` (scores, steps, λ, ``model_dir``, ``hub_url`` or ``hub_error``).

:func:`exit_code` is the one Hub policy of both commands: a failed push fails the run (exit 1) unless the run
asked for an optional push (``hub_push_optional``), in which case it is only recorded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import Trainer

from simcse_weince.training.hub import HubPushError
from simcse_weince.training.run import write_results

logger = logging.getLogger(__name__)

LOCAL_USAGE_PATH = "path/to/this/folder"
CARD = "README.md"


def finish_run(
    trainer: Trainer,
    results: dict[str, Any],
    *,
    export: Callable[[Path], Path],
    render_card: Callable[[str], str],
    what: str,
) -> dict[str, Any]:
    """Export, push, card, ``results.json`` (main process only; other processes return ``results`` as given).

    Args:
        trainer: the finished trainer: its ``args`` carry ``push_to_hub`` and ``hub_push_optional``, its
            ``run_state`` the start time and an optional push's ``hub_error``
            (:class:`~simcse_weince.training.run_record.RunState`).
        results: the run's record so far; completed in place.
        export: writes the model folder at the given path (no ``README.md``) and returns it.
        render_card: the model card for a usage path (the Hub repository id, or :data:`LOCAL_USAGE_PATH`).
        what: what the folder holds, for the commit message (``"SentenceTransformer model"``).
    """
    args = trainer.args
    if not trainer.is_world_process_zero():
        return results
    model_dir = export(Path(args.output_dir) / "model")
    results["model_dir"] = str(model_dir)
    pushed = False
    if args.push_to_hub:
        try:
            results["hub_url"] = trainer.push_final_folder(str(model_dir), f"End of training: {what}")
            pushed = True
            logger.info("pushed %s to %s", model_dir, results["hub_url"])
        except HubPushError as err:
            logger.error("%s", err)
            results["hub_error"] = str(err)
    elif trainer.run_state.hub_error:
        results["hub_error"] = trainer.run_state.hub_error  # an optional push turned off before training
    (model_dir / CARD).write_text(render_card(trainer.hub_model_id if pushed else LOCAL_USAGE_PATH), encoding="utf-8")
    if pushed:
        try:
            trainer.push_final_folder(str(model_dir), "End of training: model card", allow_patterns=[CARD])
        except HubPushError as err:
            logger.error("%s", err)
            results["hub_error"] = str(err)
    results["hub_push_optional"] = bool(getattr(args, "hub_push_optional", False))
    results["total_seconds"] = time.perf_counter() - trainer.run_state.started
    write_results(args.output_dir, results)
    return results


def exit_code(results: dict[str, Any] | None) -> int:
    """0, or 1 for a failed Hub push that was not optional."""
    if results and results.get("hub_error") and not results.get("hub_push_optional"):
        return 1
    return 0
