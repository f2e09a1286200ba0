"""How long the garbage collector held each Python process of a run: a full collection stops
every thread of its process, so a card in the daemon waits for it whatever its priority.

    python bench/gc_pauses.py -- python -m bench.soak --shoes 40 --kills 0

runs the command with a hook in every Python process it starts (bench/gc_hook/sitecustomize.py:
the daemon, its screen process, the journal commands) and then prints, per kind of process,
how many collections of each generation it made and the longest, then each process's
collections of ``--over`` ms or more, with when they began (seconds after its first one).
The hook reaches the processes that inherit PYTHONPATH: the soak's daemon does, and so do
the stress and latency parts' daemons (bench/harness.py keeps it behind the repository).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HOOK = Path(__file__).resolve().parent / "gc_hook"
OVER_MS = 5.0


@dataclass
class Process:
    """One process's collections: its command line, then (start_s, ms, generation) each."""
    command: str
    collections: list[tuple[float, float, int]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``controller run``, ``controller.service.trust.journal_check``, ``python3
        pokdeng-table``: what the process is, from its command line."""
        words = self.command.split()
        if "-m" in words[:-1]:
            module_and_command = words[words.index("-m") + 1:][:2]
            return " ".join(module_and_command if module_and_command[0] == "controller"
                            else module_and_command[:1])
        return " ".join(Path(word).name for word in words[:2])


def watched_env(directory: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ours) with the hook first on PYTHONPATH, writing into ``directory``."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK), env.get("PYTHONPATH")) if p)
    env["POKDENG_GC_WATCH"] = str(directory)
    return env


def read(directory: Path) -> list[Process]:
    """Every process's collections from ``directory`` (the hook's files)."""
    found = []
    for path in sorted(directory.glob("*.gc")):
        lines = path.read_text().splitlines()
        if not lines:
            continue
        process = Process(lines[0].removeprefix("# "))
        for line in lines[1:]:
            start, ms, generation, _ = line.split()
            process.collections.append((float(start), float(ms), int(generation)))
        found.append(process)
    return found


def report(processes: list[Process], over_ms: float = OVER_MS) -> list[str]:
    """Per kind: collections by generation with the longest; then each process's long ones."""
    kinds: dict[str, list[Process]] = collections.defaultdict(list)
    for process in processes:
        kinds[process.kind].append(process)
    lines = []
    for kind, members in sorted(kinds.items()):
        by_generation: dict[int, list[float]] = collections.defaultdict(list)
        for process in members:
            for _, ms, generation in process.collections:
                by_generation[generation].append(ms)
        counts = ", ".join(f"gen {g}: {len(v)} (longest {max(v):.2f} ms)"
                           for g, v in sorted(by_generation.items()))
        lines.append(f"{kind} ({len(members)} process(es)): {counts or 'none'}")
        for number, process in enumerate(members, 1):
            if not process.collections:
                continue
            first = process.collections[0][0]
            long_ones = [f"gen {g} {ms:.1f} ms at {start - first:.1f} s"
                         for start, ms, g in process.collections if ms >= over_ms]
            if long_ones:
                lines.append(f"  process {number}, {over_ms:g} ms or more: "
                             + "; ".join(long_ones))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--over", type=float, default=OVER_MS, metavar="MS",
                        help=f"list each process's collections this long or longer "
                             f"(default {OVER_MS:g})")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command: give one after --")
    with tempfile.TemporaryDirectory(prefix="pokdeng-gc-") as directory:
        returncode = subprocess.call(command, env=watched_env(Path(directory)))
        print("\n".join(["garbage collections, per kind of process:",
                         *report(read(Path(directory)), args.over)]))
    return returncode


if __name__ == "__main__":
    sys.exit(main())
