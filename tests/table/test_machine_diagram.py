"""docs/state-diagram.md is generated from the machine's own transition tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from controller.table.generators.diagram import mermaid_diagram
from controller.table.machine import MachineSettings, TableMachine
from controller.table.procedure import (
    HOLD_TRANSITIONS,
    PROCEDURE_STATES,
    PROCEDURE_TRANSITIONS,
    HoldTriggers,
    ProcedureTriggers,
)

ROOT = Path(__file__).resolve().parents[2]


def test_state_diagram_doc_matches_the_machine() -> None:
    committed = (ROOT / "docs" / "state-diagram.md").read_text(encoding="utf-8")
    assert committed == mermaid_diagram(), (
        "docs/state-diagram.md drifted: run "
        "`python -m controller.table.generators.diagram > docs/state-diagram.md`")


def test_mermaid_command_prints_the_diagram() -> None:
    out = subprocess.run([sys.executable, "-m", "controller.table.generators.diagram"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout == mermaid_diagram()


def test_the_diagram_shows_every_state_and_trigger_the_machine_has() -> None:
    machine = TableMachine(MachineSettings())
    diagram = mermaid_diagram()
    assert list(machine._procedure.states) == list(PROCEDURE_STATES)
    for state in PROCEDURE_STATES:
        assert f"    {state}: {state}" in diagram
        for trigger in machine._procedure.get_triggers(state):
            assert f"{state} --> " in diagram and f": {trigger}" in diagram
    triggers = {t["trigger"] for t in PROCEDURE_TRANSITIONS + HOLD_TRANSITIONS}
    built = set(machine._procedure.events) | set(machine._holding.transitions.events)
    assert triggers == built


def test_the_declared_triggers_are_the_ones_transitions_adds() -> None:
    declared = set(ProcedureTriggers.__annotations__) - {"state"}
    assert declared == {t["trigger"] for t in PROCEDURE_TRANSITIONS}
    assert set(HoldTriggers.__annotations__) - {"state"} == {t["trigger"] for t in HOLD_TRANSITIONS}
    machine = TableMachine(MachineSettings())
    for trigger in declared:  # bound by transitions, not shadowed by the declaration
        assert callable(getattr(machine, trigger))
