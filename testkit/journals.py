"""Long journals built fast, for the start-time tests and benchmarks.

``build_journal`` plays whole shoes (controller/table/generators/scriptgen.py) through a real
``TableMachine`` and a real ``Journal``, exactly as the daemon journals them (one ``append``
per input, and the shoe-end checkpoint after each shoe's last entry unless
``checkpoints=False``, which gives a journal as written before checkpoints existed). Only the
fsync is left out while building (``synchronous=OFF``: a test or a bench needs the bytes, not
power-cut safety), which makes ~50 shoes a second instead of ~2.

``cached_journal`` keeps each size under one temporary directory so a second run copies it.
No pytest here: bench/ imports this too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from controller.durability import checkpoints as shoe_checkpoints
from controller.durability.journal import Journal
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import Input
from controller.table.machine import MachineSettings, TableMachine

FIRST_AT = 1_760_000_000.0   # the first shoe's table time (Unix seconds, October 2025)
SHOE_GAP_S = 120.0           # between one shoe's last input and the next shoe's new_shoe
CACHE = Path(tempfile.gettempdir()) / "pokdeng-journals"


def build_journal(path: str | Path, shoes: int, settings: MachineSettings, *,
                  checkpoints: bool = True, seed: int = 1,
                  partial: list[Input] | None = None) -> TableMachine:
    """Journal ``shoes`` whole shoes at ``path`` (a new file); then the inputs of ``partial``,
    if given (e.g. a shoe stopped mid-round). Returns the machine as the journal leaves it."""
    machine = TableMachine(settings)
    with Journal(path) as journal:
        journal.database().execute("PRAGMA synchronous=OFF")
        at = FIRST_AT
        for number in range(shoes):
            script = shoe_script(seed + number, betting_seconds=settings.betting_seconds,
                                 reveal=settings.reveal, start_at=at)
            for inp in script:
                journal.append(inp, machine.handle(inp))
            if checkpoints:
                shoe_checkpoints.save_at_shoe_end(journal, machine)
            at = script[-1].at + SHOE_GAP_S
        for inp in partial or []:
            journal.append(inp, machine.handle(inp))
    return machine


def next_shoe_start(shoes: int, settings: MachineSettings, seed: int = 1) -> float:
    """The table time at which shoe ``shoes + 1`` of ``build_journal`` would start."""
    at = FIRST_AT
    for number in range(shoes):
        at = shoe_script(seed + number, betting_seconds=settings.betting_seconds,
                         reveal=settings.reveal, start_at=at)[-1].at + SHOE_GAP_S
    return at


def journal_in_cache(shoes: int, settings: MachineSettings, *, checkpoints: bool = True,
                     seed: int = 1) -> Path:
    """The cached ``build_journal`` of (size, settings, seed, checkpoints), built the first
    time; never to be written (``cached_journal`` gives a copy)."""
    key = (f"{shoes}-{settings.table_id}-{settings.betting_seconds!r}-{settings.reveal}-"
           f"{settings.decks}-s{seed}-{'cp' if checkpoints else 'nocp'}.db")
    CACHE.mkdir(parents=True, exist_ok=True)
    cached = CACHE / key
    if not cached.exists():
        building = CACHE / f".{key}.{os.getpid()}"
        build_journal(building, shoes, settings, checkpoints=checkpoints, seed=seed)
        os.replace(building, cached)  # whole or not at all, even with two builders
    return cached


def cached_journal(path: str | Path, shoes: int, settings: MachineSettings, *,
                   checkpoints: bool = True, seed: int = 1) -> Path:
    """``build_journal`` once per (size, settings, seed, checkpoints); then a copy at ``path``."""
    cached = journal_in_cache(shoes, settings, checkpoints=checkpoints, seed=seed)
    shutil.copyfile(cached, path)
    os.chmod(path, 0o640)
    return Path(path)
