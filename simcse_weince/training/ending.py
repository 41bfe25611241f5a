"""How every training run ends, text and vision alike: one export, one Hub policy, one record.

On the main process, :func:`finish_run`

1. exports the model into ``<output_dir>/model.partial`` (the caller's ``export``, which writes no card);
2. with ``push_to_hub``, uploads it to the run's repository; a failure is recorded as ``hub_error`` (the local
   folder is complete and the message says how to upload it later);
3. renders the model card **once**, now that the outcome is known: its usage snippet names the Hub repository
   only if the model reached it, else a local path; writes it to ``README.md``, then the run's record with the
   digest of every file (``run_record.json``: what evaluation checks the folder against) and, after a
   successful push, uploads both;
4. renames the folder ``<output_dir>/model`` (replacing an earlier export): a stop or a full disk in steps 1–3
   leaves no half-written ``model/``, and a resume (``--resume_from_checkpoint last``) exports again;
5. writes ``results.json`` (scores, steps, λ, ``model_dir``, ``hub_url`` or ``hub_error``).

:func:`exit_code` is the one Hub policy of both commands: a failed push fails the run (exit 1) unless the run
asked for an optional push (``hub_push_optional``), in which case it is only recorded.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import Trainer

import simcse_weince.training.run_folder as run_folder
from simcse_weince.core.file_errors import writing
from simcse_weince.core.file_modes import give_usual_modes
from simcse_weince.training.hub import HubPushError
from simcse_weince.training.run import write_results
from simcse_weince.training.run_record import RECORD, save_record

logger = logging.getLogger(__name__)

LOCAL_USAGE_PATH = "path/to/this/folder"
CARD = "README.md"
PARTIAL = "model.partial"  # the export's folder until it is complete


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
    state = trainer.run_state
    model_dir = Path(args.output_dir) / "model"
    partial = model_dir.with_name(PARTIAL)
    kept = f"training had finished; {run_folder.kept(args)}"
    try:
        export_and_push(trainer, results, partial, model_dir, export, render_card, what, kept)
    except BaseException:  # a stop or a failed write: no half-written model folder is left
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if model_dir.exists():
        shutil.rmtree(model_dir)
    partial.rename(model_dir)
    if getattr(trainer, "state", None) is not None:  # the final checkpoint was kept until the export was complete
        run_folder.apply_save_limit(trainer)
    results["model_dir"] = str(model_dir)
    results["hub_push_optional"] = bool(getattr(args, "hub_push_optional", False))
    results["total_seconds"] = time.perf_counter() - state.started
    state.phase = "writing results.json"
    with writing(Path(args.output_dir) / "results.json", "the results", kept=f"the model is complete in {model_dir}"):
        write_results(args.output_dir, results)
    return results


def export_and_push(
    trainer: Trainer,
    results: dict[str, Any],
    partial: Path,
    model_dir: Path,
    export: Callable[[Path], Path],
    render_card: Callable[[str], str],
    what: str,
    kept: str,
) -> None:
    """Steps 1-3 of :func:`finish_run` into ``partial``."""
    args, state = trainer.args, trainer.run_state
    state.phase = f"exporting the model to {model_dir} (training had finished)"
    with writing(model_dir, "the model", kept=kept):
        if partial.exists():
            shutil.rmtree(partial)
        export(partial)
        trainer.export_loss_parameters(partial)  # a loss with trainable parameters: they go with the model
        give_usual_modes(partial)  # whatever the exporter's writers did: others may read the model, as any file
    pushed = False
    if args.push_to_hub:
        state.phase = "pushing the model to the Hub"
        try:
            results["hub_url"] = trainer.push_final_folder(str(partial), f"End of training: {what}")
            pushed = True
            logger.info("pushed %s to %s", model_dir, results["hub_url"])
        except HubPushError as err:
            logger.error("%s", err)
            results["hub_error"] = str(err)
    elif state.hub_error:
        results["hub_error"] = state.hub_error  # an optional push turned off before training
    state.phase = f"exporting the model to {model_dir} (training had finished)"
    with writing(model_dir, "the model", kept=kept):
        (partial / CARD).write_text(render_card(trainer.hub_model_id if pushed else LOCAL_USAGE_PATH), encoding="utf-8")
        if state.record is not None:
            save_record(partial, state.record, with_digests=True)
    if pushed:
        state.phase = "pushing the model card to the Hub"
        try:
            patterns = [CARD, RECORD] if state.record is not None else [CARD]
            trainer.push_final_folder(str(partial), "End of training: model card", allow_patterns=patterns)
        except HubPushError as err:
            logger.error("%s", err)
            results["hub_error"] = str(err)


def exit_code(results: dict[str, Any] | None) -> int:
    """0, or 1 for a failed Hub push that was not optional."""
    if results and results.get("hub_error") and not results.get("hub_push_optional"):
        return 1
    return 0
