"""The wings of the house import only the wings below them (README "Layout").

    rules  <-  table  <-  transports  <-  durability, drivers  <-  service  <-  commands

A module may import its own wing and any wing below it; an import that reaches up (or across,
between durability and drivers) fails here with the module, the line and the import. Imports
inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WINGS = {  # package prefix -> level; the most specific prefix wins
    "controller.rules": 0,
    "controller.table": 1,
    "controller.transports": 2,
    "controller.durability": 3,
    "drivers": 3,
    "controller.display": 3,  # the screens: above rules and table, below service
    "controller.service": 4,
    "controller.commands": 5,
    "controller.__main__": 5,  # `python -m controller` runs the command line
    "controller.plugins": 0,  # shared utility: drivers and transports load plugins by name
    "controller": 0,  # the package itself (its version) is below everything
}
#: wings that may import sideways at their own level: `python -m controller` is the CLI
SIDEWAYS_ALLOWED: set[tuple[str, str]] = {("controller.__main__", "controller.commands")}


def wing(module: str) -> str | None:
    for prefix in sorted(WINGS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from controller import faults` imports the module controller.faults
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def sources() -> list[Path]:
    return sorted(p for top in ("controller", "drivers") for p in (ROOT / top).rglob("*.py"))


def upward_imports(modules: list[tuple[Path, str]]) -> list[str]:
    problems = []
    for path, here in modules:
        own = wing(here)
        assert own is not None, f"{here} is in no wing"
        reported: set[tuple[int, str]] = set()
        for line, target in imports_of(path):
            other = wing(target)
            if other is None or other == own or (line, other) in reported:
                continue
            if WINGS[other] > WINGS[own] or (
                    WINGS[other] == WINGS[own] and (own, other) not in SIDEWAYS_ALLOWED):
                reported.add((line, other))
                problems.append(f"{path.name}:{line}: {here} ({own}) imports {target} ({other})")
    return problems


def test_every_wing_imports_only_the_wings_below_it() -> None:
    problems = upward_imports([(path, module_name(path)) for path in sources()])
    assert not problems, "upward imports:\n" + "\n".join(problems)


@pytest.mark.parametrize("top", ["controller", "drivers"])
def test_every_module_belongs_to_a_wing(top: str) -> None:
    for path in (ROOT / top).rglob("*.py"):
        assert wing(module_name(path)) is not None, path


def test_the_check_sees_upward_and_sideways_imports(tmp_path: Path) -> None:
    """The check itself can fail: a lazy import of the daemon from the rules, and a driver
    importing the journal, are both caught; an import downwards is not."""
    rules = tmp_path / "hands.py"
    rules.write_text("def f():\n    from controller.service.daemon import Daemon\n")
    driver = tmp_path / "shoe.py"
    driver.write_text("from controller.durability import journal\n"
                      "from controller.table.inputs import CardScan\n")
    problems = upward_imports([(rules, "controller.rules.hands"), (driver, "drivers.shoe")])
    assert problems == [
        "hands.py:2: controller.rules.hands (controller.rules) imports "
        "controller.service.daemon (controller.service)",
        "shoe.py:1: drivers.shoe (drivers) imports controller.durability (controller.durability)",
    ]


def test_the_product_imports_only_the_product() -> None:
    """bench/ and testkit/ ship with the clone, not the package: no product module imports
    them (`pokdeng-table bench` runs bench/report.py as a process of its own)."""
    problems = []
    for path in sources():
        for line, target in imports_of(path):
            if target.split(".")[0] in ("bench", "testkit"):
                problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target}")
    assert not problems, "\n".join(problems)


def test_the_product_and_the_benchmarks_do_not_import_the_tests() -> None:
    """`pokdeng-table bench` loads bench/ and testkit/ from the clone: neither they nor the
    product may reach into tests/ (or need pytest, a test-only dependency)."""
    problems = []
    for top in ("controller", "drivers", "bench", "testkit"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, target in imports_of(path):
                if target.split(".")[0] in ("tests", "support", "pytest", "hypothesis"):
                    problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target}")
    assert not problems, "\n".join(problems)


def import_circles(modules: list[tuple[Path, str]]) -> list[list[str]]:
    """The circles of the modules' imports of each other (type-checking imports count: a
    circle there is one a newcomer must hold in mind all the same), each as its modules."""
    known = {name for _, name in modules}
    graph = {name: sorted({target for _, target in imports_of(path)
                           if target in known and target != name})
             for path, name in modules}
    circles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def test_no_module_imports_itself_round_a_circle() -> None:
    circles = import_circles([(path, module_name(path)) for path in sources()])
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_sees_a_circle_behind_type_checking(tmp_path: Path) -> None:
    machine = tmp_path / "machine.py"
    machine.write_text("from controller.table import views\n")
    views = tmp_path / "views.py"
    views.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from controller.table.machine import TableMachine\n")
    leaf = tmp_path / "leaf.py"
    leaf.write_text("import json\n")
    modules = [(machine, "controller.table.machine"), (views, "controller.table.views"),
               (leaf, "controller.table.leaf")]
    assert import_circles(modules) == [["controller.table.machine", "controller.table.views"]]
