"""The package's shape: text and vision are siblings over a shared core; no import cycles; no private names
imported across packages. Checked on the source (imports inside functions included)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "simcse_weince"
LAB = PACKAGE.parent / "weince_lab"

# package -> packages it must never import (directly or inside a function)
# (the command layer ``cli`` may import every library; no library imports it; ``core`` imports no other package)
FORBIDDEN = {
    "core": {"losses", "training", "text", "vision", "evaluation", "diagnostics", "cli"},
    "losses": {"training", "text", "vision", "evaluation", "diagnostics", "cli"},
    "training": {"text", "vision", "evaluation", "diagnostics", "cli"},
    "text": {"vision", "diagnostics", "cli"},
    "vision": {"text", "diagnostics", "evaluation", "cli"},
    "evaluation": {"text", "vision", "diagnostics", "training", "cli"},
    "diagnostics": {"cli"},
}
# the lab's simulation runs on the loss library and the diagnostics only (its command and drivers may use anything)
SIMULATION_USES = {"core", "losses", "diagnostics"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, imported names) of every import statement in the file, nested ones included."""
    return source_imports(path.read_text(encoding="utf-8"))


def source_imports(source: str) -> list[tuple[str, list[str]]]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
    return out


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def graph() -> dict[str, set[str]]:
    """Module -> project modules it imports. ``from pkg import mod`` imports ``pkg.mod``; importing a
    subpackage (its ``__init__``) counts as importing every module inside it, so a module and a package that
    import each other (``text.corpus`` -> ``text.sources``, ``text.sources.hub`` -> ``text.corpus``) would form a
    cycle; a module importing its own package (``text.sources.lines`` -> ``text.sources``) is not an edge."""
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = set()
        for module, names in imports(path):
            if not module.startswith("simcse_weince"):
                continue
            targets.add(module)
            targets.update(f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES)
            if module != "simcse_weince" and MODULES.get(module, Path()).name == "__init__.py":
                targets.update(m for m in MODULES if m.startswith(module + "."))
        edges[name] = {t for t in targets if t in MODULES and t != name and not name.startswith(t + ".")}
    return edges


def subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else None


def test_the_source_tree_is_found() -> None:
    expected = {"simcse_weince.cli.train_text", "simcse_weince.cli.train_vision", "simcse_weince.training.trainer"}
    assert expected <= set(MODULES)


CLI = ("train_text", "train_vision", "evaluate", "diagnose", "token_cache", "mine")
COMMANDS = {**{name: PACKAGE / "cli" / f"{name}.py" for name in CLI}, "simulate": LAB / "simulate.py"}
MAX_RUN_LINES = 60


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_commands_stay_thin(command: str) -> None:
    """Each command parses, loads and calls the libraries: its ``run`` and every other function in at most 60
    lines (no pipeline hidden in a helper of the command)."""
    tree = ast.parse(COMMANDS[command].read_text(encoding="utf-8"))
    functions = {n.name: n.end_lineno - n.lineno + 1 for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "run" in functions
    assert {name: lines for name, lines in functions.items() if lines > MAX_RUN_LINES} == {}


def test_only_the_command_layer_parses_command_lines() -> None:
    """argparse and the ``main`` entry points live in ``cli/``; the libraries are called, never run."""
    bad = [
        name
        for name, path in MODULES.items()
        if subpackage(name) != "cli"
        and ("argparse" in {m for m, _ in imports(path)} or "\ndef main(" in path.read_text(encoding="utf-8"))
    ]
    assert not bad, bad


def test_the_package_root_holds_only_its_face_and_folders() -> None:
    """A user opening ``simcse_weince/`` meets the product's rooms: the utilities live in ``core/``."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py"]


def lab_imports(source: str) -> set[str]:
    return {module for module, _ in source_imports(source) if module.split(".")[0] == "weince_lab"}


def test_the_lab_check_sees_every_import() -> None:
    """An import of the lab is found at the top of a module and inside a function; a look-alike name is not one."""
    source = "def f():\n    from weince_lab.simulation import universe\nimport weince_lab\nimport weince_labs\n"
    assert lab_imports(source) == {"weince_lab", "weince_lab.simulation"}


def test_the_library_imports_nothing_from_the_lab() -> None:
    """Research code (``weince_lab``: simulation, ``simcse-simulate``, the experiment drivers) stands beside the
    library; ``simcse_weince`` works without it."""
    bad = {name: found for name, path in MODULES.items() if (found := lab_imports(path.read_text("utf-8")))}
    assert bad == {}


def test_the_simulation_uses_the_loss_library_only() -> None:
    bad = [
        f"{path.relative_to(LAB)} imports {module}"
        for path in sorted((LAB / "simulation").rglob("*.py"))
        for module, _ in imports(path)
        if module.startswith("simcse_weince.") and module.split(".")[1] not in SIMULATION_USES
    ]
    assert not bad, bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_forbidden_imports(package: str) -> None:
    bad = [
        f"{src} imports {dst}"
        for src, dsts in graph().items()
        if subpackage(src) == package
        for dst in dsts
        if subpackage(dst) in FORBIDDEN[package]
    ]
    assert not bad, bad


def test_no_import_cycles() -> None:
    edges = graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    assert not cycles, cycles


def test_no_private_names_across_packages() -> None:
    bad = []
    for src, path in MODULES.items():
        for module, names in imports(path):
            if module.startswith("simcse_weince") and subpackage(module) != subpackage(src):
                bad += [f"{src}: from {module} import {n}" for n in names if n.startswith("_")]
    assert not bad, bad


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_runs_as_a_module(command: str) -> None:
    """``python -m simcse_weince.cli.<command>`` runs its ``main`` (the docs use that form)."""
    tree = ast.parse(COMMANDS[command].read_text(encoding="utf-8"))
    guards = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert guards and "SystemExit(main())" in ast.unparse(guards[0])


# A batch's kind (views, pairs, triplets) is its ``kind`` field (losses.layout.BatchKind), decided by the collator;
# no library branches on the shape of its tensors to find it. A shape test may only guard a ``raise``.
SHAPE = re.compile(r"\b(input_ids|attention_mask|keys|sentence_key)\b(\[[^]]*\])?\.(ndim\b|dim\(\)|shape\b)")


def shape_branches(source: str) -> list[str]:
    """The ``if`` tests (and conditional expressions) of ``source`` that read a batch tensor's shape and do more
    than raise, and every membership test of a second text column (``"input_ids_1" in ...``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If | ast.IfExp) and SHAPE.search(ast.unparse(node.test)):
            body = node.body if isinstance(node, ast.If) else [node.body]
            if not all(isinstance(b, ast.Raise) for b in body):
                found.append(ast.unparse(node.test))
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            left = node.left
            if isinstance(left, ast.Constant) and left.value == "input_ids_1":
                found.append(ast.unparse(node))
    return found


def test_shape_branches_are_found() -> None:
    """The check finds the spellings that inferred supervision before the batch had a kind."""
    old = (
        "if input_ids.ndim == 3:\n    return rows()\n"
        "if keys is None or keys.ndim != 2 or keys.shape[1] < 3:\n    return None\n"
        "if 'input_ids_1' in rows[0]:\n    pass\n"
        "x = a if keys.ndim == 2 else b\n"
    )
    assert len(shape_branches(old)) == 4
    assert shape_branches("if input_ids.dim() != 2:\n    raise ValueError('x')\n") == []


def test_no_library_infers_the_batch_kind_from_a_shape() -> None:
    bad = {
        name: found
        for name, path in MODULES.items()
        if subpackage(name) in {"text", "training", "losses", "vision"}
        and (found := shape_branches(path.read_text(encoding="utf-8")))
    }
    assert bad == {}


def test_losses_are_named_only_through_the_registry() -> None:
    """Outside ``losses/`` (and the package's own ``__init__``, which re-exports the public classes) no module
    imports a concrete loss class: the others reach a loss through ``LOSSES`` / ``loss_class`` by its name, so that
    adding a loss is one file and one registry line."""
    from simcse_weince.losses import LOSSES

    concrete = {cls.__name__ for cls in LOSSES.values()}
    bad = [
        f"{name} imports {sorted(concrete & set(names))}"
        for name, path in MODULES.items()
        if subpackage(name) != "losses" and name != "simcse_weince"
        for module, names in imports(path)
        if module.startswith("simcse_weince") and concrete & set(names)
    ]
    assert not bad, bad
