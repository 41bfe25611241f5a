"""Run configuration: dataclass argument groups, a YAML file first and command-line overrides second.

``parse_config(["configs/x.yaml", "--learning_rate", "1e-5"])`` reads the YAML (keys = dataclass field
names; an unknown key is an error naming the file and key), uses its values as defaults, then applies the
command-line arguments (argparse rejects unknown flags). :func:`save_run_info` writes the resolved
configuration, library versions and the git revision next to the outputs.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from transformers import HfArgumentParser


class ConfigError(ValueError):
    """An invalid configuration: the message names the file or flag, the value and what was expected."""


def config_keys(types: Sequence[type]) -> set[str]:
    return {f.name for t in types for f in dataclasses.fields(t) if f.init}


def load_yaml_config(path: str | Path, types: Sequence[type]) -> dict[str, Any]:
    """Read a flat YAML mapping and check every key against the dataclass fields."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: expected a mapping of option names to values, got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - config_keys(types))
    if unknown:
        raise ConfigError(f"{path}: unknown config keys {unknown}; expected dataclass field names (see --help)")
    return cfg


def parse_config(types: Sequence[type], argv: Sequence[str]) -> tuple[Any, ...]:
    """Dataclass instances from an optional leading YAML path plus command-line overrides.

    Raises:
        ConfigError: unreadable YAML, an unknown key, or a value the dataclasses reject (their
            ``__post_init__`` checks); the message names the config file (or the command line).
        SystemExit: argparse's own exit for an unknown flag or a value outside a flag's choices.
    """
    argv = list(argv)
    parser = HfArgumentParser(list(types))
    parser.allow_abbrev = False  # '--learning_rat' must be an error, not a silent '--learning_rate'
    source = "command line"
    if argv and argv[0].endswith((".yaml", ".yml")):
        parser.set_defaults(**load_yaml_config(argv[0], types))
        source, argv = argv[0], argv[1:]
    try:
        return tuple(parser.parse_args_into_dataclasses(args=argv, look_for_args_file=False))
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{source}: {err}") from err


def library_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in (
        "simcse-weince",
        "torch",
        "transformers",
        "sentence-transformers",
        "datasets",
        "accelerate",
        "huggingface-hub",
        "scikit-learn",
        "scipy",
        "numpy",
    ):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_revision(cwd: str | Path | None = None) -> str:
    """``<sha>`` (``+dirty`` when the work tree has changes), or ``unknown`` outside a git checkout."""
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def to_plain(obj: Any) -> Any:
    """JSON/YAML-safe copy of a dataclass (TrainingArguments via its ``to_dict``)."""
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    elif dataclasses.is_dataclass(obj):
        obj = dataclasses.asdict(obj)
    return json.loads(json.dumps(obj, default=str))


def save_run_info(output_dir: str | Path, groups: dict[str, Any], extra: dict[str, Any] | None = None) -> Path:
    """Write ``run_config.yaml``: every argument group, library versions, git revision (and ``extra``)."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    info = {name: to_plain(group) for name, group in groups.items()}
    info["versions"] = library_versions()
    info["git_revision"] = git_revision()
    if extra:
        info.update(to_plain(extra))
    path = out / "run_config.yaml"
    path.write_text(yaml.safe_dump(info, sort_keys=False), encoding="utf-8")
    return path
