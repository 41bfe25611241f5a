"""Every command in README.md and docs/*.md runs as written: each line of a ```bash block is parsed the way the
command itself would parse it, without running anything heavy (no model, no data, no training).

* ``make [VAR=value] TARGET``: TARGET is a rule of the Makefile and ``make -n`` (print, don't run) succeeds;
* ``python train_unsup.py ARGS``, ``simcse-train ARGS``, ``python -m simcse_weince.cli.train_text ARGS``: the
  training configuration is parsed and validated (YAML keys, flags, values) by
  ``parse_config(simcse_weince.cli.train_text.ARG_GROUPS, ARGS)``; the same for vision with
  ``simcse_weince.cli.train_vision.ARG_GROUPS`` (``simclr-train``, ``python -m simcse_weince.cli.train_vision``);
* ``python evaluate_sts.py`` / ``simcse-evaluate`` and ``python -m simcse_weince.cli.diagnose`` /
  ``simcse-diagnose``: the command's own ``build_parser().parse_args``;
* ``accelerate launch [flags] SCRIPT|-m MODULE ARGS``: accelerate's launch parser (and its ``--config_file``, read by
  accelerate), then SCRIPT ARGS as above; ``torchrun [flags] SCRIPT ARGS``: torch's launch parser, then the same;
* ``python -m weince_lab.experiments.X ARGS``: ``--help`` exits 0 in a subprocess, and ARGS go through the driver's own
  argument parser (stopped right after parsing), plus the checks the driver makes before it runs anything;
* ``bash experiments/X.sh ARGS``: the script runs with ``$PYTHON`` pointing at a stub that records the
  command line it would run, which is then checked as a ``python`` command.

A command of any other form fails (so a page cannot add a command nobody checks), except the few in
``NOT_CHECKED``, which need the network. Lines are joined at a trailing backslash; comments and blank lines are
skipped. Every fence must name its language, so that no command hides in an unlabelled block.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_FENCES = {"bash", "sh", "shell"}
OTHER_FENCES = {"python", "text", "yaml", "json", "markdown"}  # not commands: not checked here

# Commands that cannot be checked offline: (leading words, why).
NOT_CHECKED = {
    ("hf", "upload"): "uploads to the Hugging Face Hub (network and a token)",
    ("hf", "auth", "login"): "asks for a Hugging Face token interactively",
    ("pip", "install"): "downloads packages",
    ("sbatch",): "submits a job to a SLURM cluster (its script's launch line is the torchrun form checked here)",
}


@dataclass(frozen=True)
class DocCommand:
    file: str  # relative to the repository
    line: int  # where the command starts (1-based)
    text: str  # the command, continuation lines joined

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def fences(path: Path) -> list[tuple[int, str, list[tuple[int, str]]]]:
    """(line of the opening fence, language, [(line, text), ...]) of every fenced block of a Markdown file."""
    blocks, current = [], None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if current is None and stripped.startswith("```"):
            current = (n, stripped[3:].strip().lower(), [])
        elif current is not None and stripped.startswith("```"):
            blocks.append(current)
            current = None
        elif current is not None:
            current[2].append((n, line))
    if current is not None:
        raise ValueError(f"{path}:{current[0]}: fence never closed")
    return blocks


def commands_in(path: Path) -> list[DocCommand]:
    """The commands of the file's shell blocks: continuation lines joined, comments and blank lines skipped."""
    rel = path.relative_to(REPO).as_posix()
    out = []
    for _, lang, lines in fences(path):
        if lang not in SHELL_FENCES:
            continue
        start, parts = None, []
        for n, text in lines:
            if start is None:
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                start = n
            body = text.rstrip()
            continued = body.endswith("\\")
            parts.append(body[:-1] if continued else body)
            if not continued:
                out.append(DocCommand(rel, start, " ".join(p.strip() for p in parts)))
                start, parts = None, []
        if start is not None:
            raise ValueError(f"{rel}:{start}: a command ends with a backslash at the end of its block")
    return out


COMMANDS = [c for f in DOC_FILES for c in commands_in(f)]


# --- the command forms -------------------------------------------------------------------------------------


class CommandError(AssertionError):
    """The command would not get past its own argument parsing."""


class _Parsed(Exception):
    """Control flow, not an error: raised right after a driver's ``parse_args``."""

    def __init__(self, namespace: argparse.Namespace):
        self.namespace = namespace


def _exit_message(err: SystemExit, stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {err.code}"


def _argparse(parse, argv: list[str], what: str):
    """``parse(argv)`` with argparse's exit turned into a CommandError naming the message (``--help``: None)."""
    err_buf, out_buf = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err_buf), contextlib.redirect_stdout(out_buf):
            return parse(argv)
    except SystemExit as err:
        if err.code in (0, None):
            return None
        raise CommandError(f"{what}: {_exit_message(err, err_buf.getvalue())}") from None


def check_training(kind: str, args: list[str]) -> None:
    """Parse and validate a training command line as the training command does; it must create nothing."""
    from simcse_weince.training.config import ConfigError, parse_config

    module = importlib.import_module(f"simcse_weince.cli.train_{kind}")
    if args and args[0].endswith((".yaml", ".yml")) and not Path(args[0]).is_file():
        raise CommandError(f"config file not found: {args[0]}")
    created = []

    def no_mkdir(path, *a, **k):
        created.append(str(path))
        raise OSError(f"parsing the configuration tried to create {path}")

    mkdir = os.mkdir
    try:
        os.mkdir = no_mkdir
        _argparse(lambda a: parse_config(module.ARG_GROUPS, a), args, f"{kind} training")
    except ConfigError as err:
        raise CommandError(f"{kind} training: {err}") from None
    finally:
        os.mkdir = mkdir
    if created:
        raise CommandError(f"parsing the configuration tried to create {created}")


def check_evaluate(args: list[str]) -> None:
    from simcse_weince.cli.evaluate import build_parser

    _argparse(build_parser().parse_args, args, "evaluate_sts.py")


def check_diagnose(args: list[str]) -> None:
    from simcse_weince.cli.diagnose import build_parser

    _argparse(build_parser().parse_args, args, "diagnose")


def check_simulate(args: list[str]) -> None:
    from weince_lab.simulate import build_parser, check

    ns = _argparse(build_parser().parse_args, args, "simulate")
    try:
        if ns is not None:
            check(ns)
    except ValueError as err:
        raise CommandError(f"simulate: {err}") from None


def check_mine(args: list[str]) -> None:
    """``simcse-mine``: its parser, then the checks of its settings and columns that need no file."""
    from simcse_weince.cli.mine import build_parser, settings_of
    from simcse_weince.text.mining import anchor_positive_columns

    try:
        ns = _argparse(build_parser().parse_args, args, "mine")
        if ns is not None:
            settings_of(ns)
            anchor_positive_columns(ns.columns)
    except ValueError as err:
        raise CommandError(f"mine: {err}") from None


@functools.cache
def _module_help(module: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def _driver_args(module_name: str, args: list[str]) -> argparse.Namespace | None:
    """The namespace the experiment driver's own parser makes of ``args``; the driver stops right there."""
    module = importlib.import_module(module_name)
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, a=None, namespace=None):
        raise _Parsed(original(self, a, namespace))

    argv = sys.argv
    try:
        argparse.ArgumentParser.parse_args = parse_then_stop
        sys.argv = [module_name, *args]
        _argparse(lambda _: module.main(), args, module_name)
    except _Parsed as parsed:
        return parsed.namespace
    finally:
        argparse.ArgumentParser.parse_args = original
        sys.argv = argv
    return None  # --help, or a main() that returned without parsing its arguments


DRIVERS = "weince_lab.experiments."


def check_experiment(module_name: str, args: list[str]) -> None:
    name = module_name.removeprefix(DRIVERS)
    if not (REPO / "weince_lab" / "experiments" / f"{name}.py").is_file():
        raise CommandError(f"no such experiment driver: weince_lab/experiments/{name}.py")
    helped = _module_help(module_name)
    if helped.returncode != 0:
        raise CommandError(f"python -m {module_name} --help exited {helped.returncode}: {helped.stderr[-500:]}")
    ns = _driver_args(module_name, args)
    if ns is None:
        if "--help" in args or "-h" in args:
            return
        raise CommandError(f"{module_name}: main() did not parse its arguments")
    config = getattr(ns, "config", None)
    if config is not None and not Path(config).is_file():
        raise CommandError(f"{module_name}: --config {config}: no such file")
    if name == "text_runs":
        from weince_lab.experiments.text_runs import variant_args

        for v in ns.variants:
            try:
                variant_args(v)
            except ValueError as err:
                raise CommandError(f"{module_name}: {err}") from None
        check_training("text", [ns.config, *ns.extra])
    elif name in ("vision_cpu", "vision_batch"):
        check_training("vision", [ns.config, *getattr(ns, "extra", [])])
        if name == "vision_cpu":
            from weince_lab.experiments.vision_cpu import loss_args

            for loss in ns.losses:
                try:
                    check_training("vision", [ns.config, *loss_args(loss), *ns.extra])
                except ValueError as err:
                    raise CommandError(f"{module_name}: {err}") from None
    elif name == "paper_protocol":
        from weince_lab.experiments import paper_protocol

        if ns.config is None:
            ns.config = str(REPO / "configs/vision" / paper_protocol.PAPER_CONFIG)
        try:
            paper_protocol.check_args(ns)
        except SystemExit:
            raise CommandError(f"{module_name}: its options were refused (see the error line above)") from None
        check_training("vision", [ns.config, *ns.extra])
    elif name == "gpu_check":
        from weince_lab.experiments.gpu_check import CHECKS

        unknown = sorted(set(ns.only or ()) - set(CHECKS))
        if unknown:
            raise CommandError(f"gpu_check --only: unknown checks {unknown}; expected some of {list(CHECKS)}")


PY_MODULES = {
    "simcse_weince.cli.train_text": lambda a: check_training("text", a),
    "simcse_weince.cli.train_vision": lambda a: check_training("vision", a),
    "simcse_weince.cli.evaluate": check_evaluate,
    "simcse_weince.cli.diagnose": check_diagnose,
    "weince_lab.simulate": check_simulate,
    "simcse_weince.cli.mine": check_mine,
}
PY_SCRIPTS = {
    "train_unsup.py": lambda a: check_training("text", a),
    "evaluate_sts.py": check_evaluate,
}
CONSOLE_SCRIPTS = {  # the [project.scripts] of pyproject.toml -> the module whose main() they run
    "simcse-train": "simcse_weince.cli.train_text",
    "simclr-train": "simcse_weince.cli.train_vision",
    "simcse-evaluate": "simcse_weince.cli.evaluate",
    "simcse-diagnose": "simcse_weince.cli.diagnose",
    "simcse-simulate": "weince_lab.simulate",
    "simcse-mine": "simcse_weince.cli.mine",
}


def check_python(args: list[str]) -> None:
    if not args:
        raise CommandError("python without a script or module")
    if args[0] == "-m":
        if len(args) < 2:
            raise CommandError("python -m without a module")
        module, rest = args[1], args[2:]
        if module.startswith(DRIVERS):
            return check_experiment(module, rest)
        if module not in PY_MODULES:
            raise CommandError(f"python -m {module}: not a command this test knows how to check")
        source = REPO / Path(*module.split(".")).with_suffix(".py")
        if 'if __name__ == "__main__":' not in source.read_text(encoding="utf-8"):
            raise CommandError(f"python -m {module}: {source.relative_to(REPO)} has no __main__ block, runs nothing")
        return PY_MODULES[module](rest)
    script, rest = args[0], args[1:]
    if script not in PY_SCRIPTS:
        raise CommandError(f"python {script}: not a command this test knows how to check")
    if not (REPO / script).is_file():
        raise CommandError(f"no such script: {script}")
    return PY_SCRIPTS[script](rest)


def check_accelerate(args: list[str]) -> None:
    if not args or args[0] != "launch":
        raise CommandError(f"accelerate {' '.join(args[:1])}: only `accelerate launch` is checked")
    from accelerate.commands.launch import launch_command_parser

    launch = _argparse(launch_command_parser().parse_args, args[1:], "accelerate launch")
    if launch is None:
        return
    if launch.config_file:  # the launch settings file a page names: accelerate must read it
        from accelerate.commands.config.config_args import load_config_from_file

        try:
            load_config_from_file(launch.config_file)
        except Exception as err:  # accelerate raises what its YAML reader raises
            raise CommandError(f"accelerate launch --config_file {launch.config_file}: {err}") from None
    target = ["-m", launch.training_script] if launch.module else [launch.training_script]
    check_python([*target, *launch.training_script_args])


def check_torchrun(args: list[str]) -> None:
    """``torchrun [flags] SCRIPT|-m MODULE ARGS``: torch's own launch parser, then SCRIPT ARGS as above; a
    ``--config_file``-like file named by accelerate is checked by accelerate's loader (:func:`check_accelerate`)."""
    from torch.distributed.run import get_args_parser

    launch = _argparse(get_args_parser().parse_args, args, "torchrun")
    if launch is None:
        return
    target = ["-m", launch.training_script] if launch.module else [launch.training_script]
    check_python([*target, *launch.training_script_args])


def make_targets() -> set[str]:
    rule = re.compile(r"^([A-Za-z0-9_./$()-]+(?:\s+[A-Za-z0-9_./$()-]+)*)\s*:(?!=)")
    targets = set()
    for line in (REPO / "Makefile").read_text(encoding="utf-8").splitlines():
        m = rule.match(line)
        if m and not line.startswith((".PHONY", "\t")):
            targets.update(m.group(1).split())
    return targets


def check_make(args: list[str]) -> None:
    goals = [a for a in args if "=" not in a and not a.startswith("-")]
    if not goals:
        raise CommandError("make without a target")
    unknown = sorted(set(goals) - make_targets())
    if unknown:
        raise CommandError(f"make: no target {unknown} in the Makefile")
    proc = subprocess.run(["make", "-n", *args], cwd=REPO, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise CommandError(f"make -n {' '.join(args)}: {proc.stderr.strip()[-500:]}")


def check_bash_script(args: list[str], tmp: Path) -> None:
    """Run the experiment script with ``$PYTHON`` a stub that records its command line; check that line."""
    if not args or not re.fullmatch(r"experiments/\w+\.sh", args[0]) or not (REPO / args[0]).is_file():
        raise CommandError(f"bash {' '.join(args[:1])}: only the scripts experiments/*.sh are checked")
    record = tmp / "python_argv"
    stub = tmp / "python"
    stub.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" > {shlex.quote(str(record))}\n", encoding="utf-8")
    stub.chmod(0o755)
    proc = subprocess.run(
        ["bash", *args], cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHON": str(stub)}
    )
    if proc.returncode != 0 or not record.is_file():
        raise CommandError(f"bash {args[0]} did not reach its python command: {proc.stderr.strip()[-500:]}")
    check_python([a for a in record.read_text(encoding="utf-8").split("\0") if a])


def words(text: str) -> list[str]:
    argv = shlex.split(text, comments=True)
    while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):  # leading VAR=value assignments
        argv = argv[1:]
    if argv and argv[0] in (".venv/bin/python", "python3"):
        argv[0] = "python"
    return argv


def check_command(text: str, tmp: Path) -> None:
    argv = words(text)
    if not argv:
        raise CommandError("empty command")
    for prefix in NOT_CHECKED:
        if tuple(argv[: len(prefix)]) == prefix:
            return
    prog, args = argv[0], argv[1:]
    if prog == "make":
        check_make(args)
    elif prog == "python":
        check_python(args)
    elif prog == "accelerate":
        check_accelerate(args)
    elif prog == "torchrun":
        check_torchrun(args)
    elif prog == "bash":
        check_bash_script(args, tmp)
    elif prog in CONSOLE_SCRIPTS:
        check_console_script(prog)
        PY_MODULES[CONSOLE_SCRIPTS[prog]](args)
    else:
        raise CommandError(
            f"unknown command form {prog!r}: teach tests/test_docs_commands.py to check it, or add it to "
            "NOT_CHECKED with the reason it cannot be checked offline"
        )


def check_console_script(name: str) -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")  # (no tomllib on Python 3.10)
    section = text.split("[project.scripts]", 1)[-1].split("\n[", 1)[0]
    scripts = dict(re.findall(r"^([\w.-]+)\s*=\s*\"([^\"]*)\"", section, flags=re.M))
    if scripts.get(name) != f"{CONSOLE_SCRIPTS[name]}:main":
        raise CommandError(
            f"{name}: pyproject.toml's [project.scripts] has {scripts.get(name)!r}, not {CONSOLE_SCRIPTS[name]}:main"
        )


# --- the tests ---------------------------------------------------------------------------------------------


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.syspath_prepend(str(REPO))  # the drivers' children find the repository


@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_command_runs_as_written(command: DocCommand, in_repo, tmp_path: Path) -> None:
    problem = None
    try:
        check_command(command.text, tmp_path)
    except CommandError as err:
        problem = str(err)
    if problem is not None:
        pytest.fail(f"{command.id}: `{command.text}`\n  {problem}", pytrace=False)


@pytest.mark.parametrize("path", DOC_FILES, ids=[p.relative_to(REPO).as_posix() for p in DOC_FILES])
def test_every_fence_names_its_language(path: Path) -> None:
    for line, lang, _ in fences(path):
        assert lang in SHELL_FENCES | OTHER_FENCES, (
            f"{path.relative_to(REPO)}:{line}: fence language {lang!r}; commands go in ```bash blocks (checked here), "
            f"other text names one of {sorted(OTHER_FENCES)}"
        )


def test_the_pages_have_commands() -> None:
    """The extraction works: the README's set-up commands come first, and every page is covered."""
    readme = [words(c.text) for c in COMMANDS if c.file == "README.md"]
    assert readme[:2] == [["make", "quickstart"], ["make", "test"]], readme[:2]
    assert len(DOC_FILES) > 1, "no docs/*.md pages found"


@pytest.mark.parametrize(
    "text, message",
    [
        ("python train_unsup.py configs/quickstart.yaml --learning_rat 1e-5", "unknown flag --learning_rat"),
        ("python train_unsup.py configs/quickstart.yaml --beta_mode mle", "invalid choice"),
        ("python train_unsup.py configs/unsup_bert_base_weince.yaml", "config file not found"),
        ("simcse-train configs/quickstart.yaml --loss mle", "invalid choice"),
        ("python -m simcse_weince.vision.train configs/vision/quickstart_cifar10_cpu.yaml", "not a command"),
        ("python -m simcse_weince.cli.train_vision configs/vision/cifar10_resnet18.yaml --bakbone x", "--bakbone"),
        ("bash experiments/gpu_check.sh --only no-such-check", "unknown checks"),
        ("bash experiments/paper_scale.sh --seeds zero", "invalid int"),
        ("make no-such-target", "no target"),
        ("python evaluate_sts.py --model m --mode tst", "invalid choice"),
        ("accelerate launch --multi_gpu train_unsup.py configs/quickstart.yaml --sedd 1", "--sedd"),
        (
            "python -m weince_lab.experiments.text_runs --config configs/quickstart.yaml --variants weince-mle",
            "unknown variant",
        ),
        ("simcse-mine --pairs p.csv --model m --output o.csv --range_min 5 --range_max 2", "smaller than range_max"),
        ("simcse-mine --pairs p.csv --model m --output o.csv --sampling_strategy x", "invalid choice"),
        ("rm -rf outputs", "unknown command form"),
    ],
)
def test_a_broken_command_fails(text: str, message: str, in_repo, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=message):
        check_command(text, tmp_path)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    out, seen = set(), {}
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            in_fence = not in_fence
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


@pytest.mark.parametrize("path", DOC_FILES, ids=[p.relative_to(REPO).as_posix() for p in DOC_FILES])
def test_links_resolve(path: Path) -> None:
    """Relative links of the pages point at files that exist and, with a #fragment, at one of their headings."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # an external address
        file, _, fragment = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(REPO)}")
    assert not broken, f"{path.relative_to(REPO)}: " + "; ".join(broken)
