"""Run configuration: dataclass argument groups, a YAML file first and command-line overrides second.

``parse_config(["configs/x.yaml", "--learning_rate", "1e-5"])`` reads the YAML (keys = dataclass field
names; an unknown key is an error naming the file and key, a key given twice one naming both lines), uses its
values as defaults, then applies the command-line arguments (unknown flags are errors; a negative number such as
``-1e-5`` is a flag's value). Every float setting must be finite (:func:`check_finite`). A YAML file may start
from another one: ``base: other.yaml`` (relative to the file's folder) reads that file first and overrides its
keys, so that two recipes that differ in a few keys share the rest. Every error is one :class:`ConfigError` line
naming its true source: ``<file>:<line>:<column>`` for YAML syntax, ``<file>: ...`` for a value from the file,
``command line: --flag value: ...`` for one from the command line. :func:`save_run_info` writes the resolved
configuration, library versions and the git revision next to the outputs.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import platform
import re
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml
from transformers import HfArgumentParser

from simcse_weince.core import checks, strict_json
from simcse_weince.core.file_errors import writing


class ConfigError(ValueError):
    """An invalid configuration: the message names the file or flag, the value and what was expected."""


COMMAND_LINE = "command line"  # the source named by errors in values that came from the command line


def config_keys(types: Sequence[type]) -> set[str]:
    return {f.name for t in types for f in dataclasses.fields(t) if f.init}


def _did_you_mean(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _yaml_error(path: Path, err: yaml.YAMLError, text: str) -> str:
    """``file:line:column: not valid YAML: <problem> (<context> at line L, column C)`` from PyYAML's marks."""
    mark = getattr(err, "problem_mark", None)
    if isinstance(err, yaml.reader.ReaderError):  # a character YAML does not allow: a position, not a mark
        pos = err.position
        line, column = text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)
        char = f"#x{err.character:04x}" if isinstance(err.character, int) else repr(err.character)
        return f"{path}:{line}:{column}: not valid YAML: unacceptable character {char}: {err.reason}"
    if mark is None:
        return f"{path}: not valid YAML: {err}"
    problem = getattr(err, "problem", None) or "syntax error"
    out = f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {problem}"
    context, where = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context:
        out += f" ({context}" + (f" at line {where.line + 1}, column {where.column + 1})" if where else ")")
    return out


BASE_KEY = "base"  # a YAML file's key naming the file it starts from


class _DuplicateKey(yaml.YAMLError):
    """A key given twice in one mapping of a YAML file (lines counted from 1)."""

    def __init__(self, key: object, first: int, again: int) -> None:
        super().__init__(f"{key} is given twice (lines {first} and {again})")
        self.key, self.first, self.again = key, first, again


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a mapping which gives a key twice is an error (PyYAML keeps the last
    value silently). Keys brought in by a merge (``<<: *anchor``) may be overridden: that is what merging is."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(key, seen[key], line)
                seen[key] = line
            except TypeError:  # an unhashable key: the base constructor says so, with its mark
                break
        return super().construct_mapping(node, deep=deep)


def load_yaml_chain(
    path: str | Path, types: Sequence[type], _seen: tuple[Path, ...] = ()
) -> tuple[dict[str, Any], dict[str, Path]]:
    """The values of a YAML file on top of those of its ``base`` file (and so on), and the file each key's value
    comes from.

    Raises:
        ConfigError: a file missing or unreadable, an unknown key, a ``base`` that is not a file name, is missing
            or leads back to a file of the chain; each names the file (and key).
    """
    cfg = _read_yaml_mapping(Path(path), types)
    if BASE_KEY not in cfg:
        return cfg, dict.fromkeys(cfg, Path(path))
    base = cfg.pop(BASE_KEY)
    if not isinstance(base, str) or not base.endswith((".yaml", ".yml")):
        raise ConfigError(f"{path}: base: {base!r} is not a YAML file name; expected e.g. base: other.yaml")
    base_path = Path(path).parent / base
    chain = (*_seen, Path(path).resolve())
    if base_path.resolve() in chain:
        raise ConfigError(f"{path}: base: {base} leads back to {base_path}; expected a chain of files without a loop")
    if not base_path.is_file():
        raise ConfigError(f"{path}: base: config file not found: {base_path} (a path relative to {Path(path).parent})")
    inherited, sources = load_yaml_chain(base_path, types, chain)
    return inherited | cfg, sources | dict.fromkeys(cfg, Path(path))


def _read_yaml_mapping(path: Path, types: Sequence[type]) -> dict[str, Any]:
    """One YAML file's flat mapping, every key a dataclass field (or ``base``)."""
    if path.is_dir():
        raise ConfigError(f"config file {path} is a directory; expected a YAML file")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not valid UTF-8 (byte 0x{raw[err.start]:02x}); expected UTF-8 text") from err
    try:
        cfg = yaml.load(text, Loader=_UniqueKeyLoader) or {}
    except _DuplicateKey as err:
        raise ConfigError(f"{path}:{err.again}: {err}; expected each key once") from err
    except yaml.YAMLError as err:
        raise ConfigError(_yaml_error(path, err, text)) from err
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: expected a mapping of option names to values, got {type(cfg).__name__}")
    known = config_keys(types)
    unknown = sorted(set(cfg) - known - {BASE_KEY}, key=str)
    if unknown:
        hints = "".join(_did_you_mean(str(k), sorted(known)) for k in unknown[:1])
        raise ConfigError(f"{path}: unknown config keys {unknown}{hints}; expected dataclass field names (see --help)")
    return cfg


NEGATIVE_NUMBER = re.compile(r"^-(?:(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|inf(?:inity)?|nan)$", re.IGNORECASE)


class _ConfigParser(HfArgumentParser):
    """``HfArgumentParser`` whose errors are :class:`ConfigError` naming where the value came from (the YAML file
    and key, or the command line and flag) instead of argparse's usage text and exit."""

    def __init__(self, types: Sequence[type], yaml_path: Path | None, yaml_keys: dict[str, Path]) -> None:
        # no abbreviations: '--learning_rat' must be an error, not a silent '--learning_rate'
        super().__init__(list(types), allow_abbrev=False)
        # argparse takes '-1' and '-1.5' as values but '-1e-5' as an unknown option ("expected one argument"):
        # every negative number a float() reads, exponent or not (and -inf, -nan, which the checks then refuse)
        self._negative_number_matcher = NEGATIVE_NUMBER
        self.yaml_path, self.yaml_keys = yaml_path, yaml_keys
        self.flags: dict[str, list[str]] = {}  # dest -> the flag and its values as written on the command line
        for action in self._actions:  # a help text derived from a registry (a callable) is written now
            if callable(action.help):
                action.help = action.help()

    def error(self, message: str) -> NoReturn:
        match = re.match(r"argument (\S+?)(?:/\S+)?: (.*)", message, re.DOTALL)
        action = self._option_string_actions.get(match.group(1)) if match else None
        if action is not None and action.dest in self.flags:
            raise ConfigError(f"{COMMAND_LINE}: {self.shown(action.dest)}: {match.group(2)}")
        if action is not None and action.dest in self.yaml_keys:  # a YAML string argparse could not convert
            raise ConfigError(f"{self.yaml_keys[action.dest]}: {action.dest}: {match.group(2)}")
        raise ConfigError(f"{COMMAND_LINE}: {message}")

    def record_flags(self, argv: Sequence[str]) -> None:
        """Which fields the command line sets, and how it spells them (for the error messages)."""
        dest = None
        for token in argv:
            if token.startswith("--"):
                name, eq, value = token.partition("=")
                action = self._option_string_actions.get(name)
                dest = action.dest if action is not None else None
                if dest is not None:
                    self.flags[dest] = [name, value] if eq else [name]
            elif dest is not None:
                self.flags[dest].append(token)

    def shown(self, dest: str) -> str:
        name, *values = self.flags[dest]
        return f"{name} ***" if values and "token" in dest else shlex.join([name, *values])  # no secrets in logs

    def unused(self, remaining: list[str]) -> str:
        """The message for what argparse could not place: unknown flags (with the closest known one)."""
        unknown = [t.partition("=")[0] for t in remaining if t.startswith("--")]
        if unknown:
            options = [o for o in self._option_string_actions if o.startswith("--")]
            named = ", ".join(f + _did_you_mean(f, options) for f in unknown)
            return f"{COMMAND_LINE}: unknown flag{'s' if len(unknown) > 1 else ''} {named}; see --help"
        token = remaining[0]
        where = "the YAML config file must come first" if token.endswith((".yaml", ".yml")) else "expected --key value"
        return f"{COMMAND_LINE}: unexpected argument {token!r} ({where})"


_LEADING_NAME = re.compile(r"(\w+)(?: must |: )")  # checks.py's "<name> must be ...", or "<name>: ..."


def _mentions(message: str, text: str) -> bool:
    """Whether ``message`` holds ``text`` as a whole word (``max_steps`` in ``--max_steps``, not in ``max_steps_x``)."""
    return re.search(rf"(?<!\w){re.escape(text)}(?!\w)", message) is not None


def _quotes(message: str, value: Any) -> bool:
    """Whether ``message`` quotes ``value``, a string or a number (as ``found 5, which is not a multiple of 3``)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float) or value == "":
        return False
    spelled = {str(value), f"{value:g}"} if isinstance(value, float) else {str(value)}  # 5.0 is also found 5
    return any(_mentions(message, text) for text in spelled)


def _culprits(values: dict[str, Any], given: set[str], message: str) -> list[str]:
    """The settings ``message`` refuses, in field order. Every check names the setting it refuses: the one that
    leads the message (``temperature must be > 0, got 0``: that one alone), else every setting it names
    (``beta_clamp must satisfy 0 < beta_min <= beta_max``, ``--load_best_model_at_end requires ...``) and every
    ``given`` setting whose value it quotes (the Trainer's ``bogus is not a valid IntervalStrategy``)."""
    lead = _LEADING_NAME.match(message)
    if lead and lead.group(1) in values:
        return [lead.group(1)]
    return [k for k, v in values.items() if _mentions(message, k) or (k in given and _quotes(message, v))]


def _source(parser: _ConfigParser, values: dict[str, Any], message: str) -> str:
    """Where the settings refused with ``message`` came from (:func:`_culprits`): the command line and their
    flags when it sets any of them, else the YAML file of the chain that holds them and, when the message does
    not name it, the key."""
    culprits = _culprits(values, set(parser.flags) | set(parser.yaml_keys), message)
    flags = [k for k in culprits if k in parser.flags]
    if flags:
        return " ".join([COMMAND_LINE + ":", *(parser.shown(k) for k in flags)])
    keys = [k for k in culprits if k in parser.yaml_keys]
    if len(keys) == 1:
        where = parser.yaml_keys[keys[0]]
        return str(where) if _mentions(message, keys[0]) else f"{where}: {keys[0]}"
    if keys:  # several keys: their file when they share one
        files = {parser.yaml_keys[k] for k in keys}
        return str(files.pop()) if len(files) == 1 else str(parser.yaml_path)
    # none of the settings it refuses was given (or it names none): where this group's values came from
    given = [COMMAND_LINE] * any(k in parser.flags for k in values)
    files = sorted({str(parser.yaml_keys[k]) for k in values if k in parser.yaml_keys})
    return " or ".join(given + files) or COMMAND_LINE


def check_finite(parser: _ConfigParser, values: dict[str, Any]) -> None:
    """Every float setting is a finite number: ``nan`` or ``inf`` (from the YAML file or the command line) is
    refused for all of them, whatever their other checks (a ``nan`` passes ``value > 0`` tests as false, an
    ``inf`` passes them as true). No float setting of these commands means "unlimited" by infinity.

    Raises:
        ConfigError: ``<source>: <name> must be a finite number, got nan``, naming the flag or the file.
    """
    for name, value in values.items():
        if isinstance(value, float):
            try:
                checks.finite(name, value)
            except ValueError as err:
                where = f"{COMMAND_LINE}: {parser.shown(name)}" if name in parser.flags else parser.yaml_keys.get(name)
                raise ConfigError(f"{where}: {err}") from None


@dataclasses.dataclass(frozen=True)
class SettingSources:
    """Where each setting's value came from, for the checks that need more than the configuration (e.g. the
    model's length limit): the command line, a YAML file of the chain, or the defaults."""

    flags: dict[str, str]  # setting -> its flag and value as written, e.g. '--max_seq_length 100000'
    files: dict[str, Path]  # setting -> the YAML file its value comes from (when no flag sets it)

    def describe(self, name: str, value: Any) -> str:
        """``command line: --max_seq_length 100000``, ``cfg.yaml: max_seq_length 100000`` or
        ``max_seq_length 32 (the default)``: the start of an error about that value."""
        if name in self.flags:
            return f"{COMMAND_LINE}: {self.flags[name]}"
        if name in self.files:
            return f"{self.files[name]}: {name} {value}"
        return f"{name} {value} (the default)"


def parse_config(types: Sequence[type], argv: Sequence[str]) -> tuple[Any, ...]:
    """Dataclass instances from an optional leading YAML path plus command-line overrides.

    Raises:
        ConfigError: unreadable YAML (``file:line:column``), a key given twice in one file, an unknown key or
            flag, a value argparse cannot convert, a float that is not finite (:func:`check_finite`) or a value
            the dataclasses reject (their ``__post_init__`` checks). The message names its source:
            ``<file>: ...`` (and the key) for a value from the YAML file, ``command line: --flag value: ...``
            for one from the command line. argparse's own errors end the same way (no usage text, no exit).
    """
    return parse_config_and_sources(types, argv)[0]


def parse_config_and_sources(types: Sequence[type], argv: Sequence[str]) -> tuple[tuple[Any, ...], SettingSources]:
    """:func:`parse_config`, and where each setting's value came from (:class:`SettingSources`)."""
    argv = list(argv)
    yaml_path, cfg, sources = None, {}, {}
    if argv and argv[0].endswith((".yaml", ".yml")):
        yaml_path, (cfg, sources) = Path(argv[0]), load_yaml_chain(argv[0], types)
        argv = argv[1:]
    parser = _ConfigParser(types, yaml_path, sources)
    parser.set_defaults(**cfg)
    parser.record_flags(argv)
    namespace, remaining = parser.parse_known_args(args=argv)
    if remaining:
        raise ConfigError(parser.unused(remaining))
    outputs = []
    for dtype in types:
        values = {f.name: getattr(namespace, f.name) for f in dataclasses.fields(dtype) if f.init}
        check_finite(parser, values)
        try:
            outputs.append(dtype(**values))
        except (ValueError, TypeError) as err:
            raise ConfigError(f"{_source(parser, values, str(err))}: {err}") from err
    shown = {dest: parser.shown(dest) for dest in parser.flags}
    files = {k: v for k, v in sources.items() if k not in parser.flags}
    return tuple(outputs), SettingSources(shown, files)


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
    return json.loads(strict_json.dumps(obj, default=str))  # a non-finite float (never a setting's) is None


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
    with writing(path, "the run's configuration", kept="nothing of the run was written yet"):
        path.write_text(yaml.safe_dump(info, sort_keys=False), encoding="utf-8")
    return path
