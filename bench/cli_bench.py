"""Command-line start-up: each command as a whole process, the way a shell or a script runs it.

Side by side in one run, ``--repeat`` times each (min / median / max), the runs interleaved
and every other round in the reverse order (bench/harness.py ``alternate``), so that a busy
moment of the machine falls on every command alike:

- ``python -c pass``: the interpreter alone, the floor every command stands on;
- ``pokdeng-table --version``;
- ``pokdeng-table status --json`` against a running daemon (``run`` on a simulated Bee-Tek
  shoe and a line panel, as bench/daemon_bench.py starts it; READY before the first status);
- ``pokdeng-table replay`` of one whole 8-deck shoe
  (``controller.table.generators.scriptgen --seed 1``);
- ``pokdeng-table rtp --json`` (8 decks: mostly the exact enumeration itself);
- ``python -c pass`` again, at the other end of each round: the interpreter's A/A copy;

each with its median's ratio to ``python -c pass``, what it adds to it (median minus median:
the part that is ours; the interpreter's own start-up depends on the machine and on the .pth
files of its site-packages) and the goal (issue 13): ``--version`` and ``status --json``
within x3 of the interpreter (judged by bench/verdict.py, each round a pair, against the A/A
floor of the two ``python -c pass``), a shoe's replay under 0.2 s. The CPU time (user + system,
median) is shown beside the wall time: on a machine shared with other work it is the steadier
of the two.

The commands run the console script next to this interpreter (``pokdeng-table``, as an
installed table runs it; ``python -m controller`` when there is none) with the clone's code
first on PYTHONPATH, or with ``--repo DIR``'s (an older checkout: the "before" figures). They
get a bytecode cache of their own (PYTHONPYCACHEPREFIX in a temporary directory, filled by one
untimed run of each), as an installed package has its .pyc files; without one every run would
compile the sources again.

    python bench/cli_bench.py [--repeat 5] [--repo DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.harness import alternate, judged, notified_table, stop  # noqa: E402
from bench.measuring import save_json  # noqa: E402
from bench.verdict import Floor, pair_ratios  # noqa: E402

PASS = "python -c pass"
AGAIN = "python -c pass, again"  # the interpreter's A/A copy, at the other end of each round
GOALS = {  # command -> (the most its median may be, as a ratio to python -c pass, or seconds)
    "--version": ("ratio", 3.0),
    "status --json": ("ratio", 3.0),
    "replay (one shoe)": ("seconds", 0.2),
}


def command_prefix() -> list[str]:
    """How a user starts pokdeng-table with this interpreter."""
    script = Path(sys.executable).with_name("pokdeng-table")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "controller"]


def environment(repo: Path, pycache: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONPYCACHEPREFIX": str(pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@contextmanager
def running_daemon(repo: Path, work: Path, env: dict[str, str]) -> Iterator[Path]:
    """``pokdeng-table run`` of ``repo`` on simulated devices, READY; yields its socket."""
    with notified_table(work, level="warning", repo=repo, env=env) as table:
        daemon = table.spawn()
        try:
            table.notify.wait_ready(daemon)
            yield work / "control.sock"
        finally:
            stop(daemon, 20)


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one process from start to exit; a failure stops the benchmark.
    The CPU time (user + system) hardly moves when other work shares the machine; the wall
    time does."""
    cpu_before = cpu_of_children()
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=300)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[-3:])} exited {done.returncode}: "
                           f"{done.stderr.decode(errors='replace').strip()[-200:]}")
    return elapsed, cpu_of_children() - cpu_before


def measure(repeat: int = 5, repo: Path = REPO) -> dict[str, Any]:
    """min / median / max seconds of each command over ``repeat`` interleaved rounds, and
    each median's ratio to ``python -c pass``."""
    repo = repo.resolve()
    work = Path(tempfile.mkdtemp(prefix="pdc-", dir="/tmp"))
    env = environment(repo, work / "pycache")
    shoe_script = work / "shoe.jsonl"
    shoe_script.write_text(subprocess.run(
        [sys.executable, "-m", "controller.table.generators.scriptgen", "--seed", "1"], env=env,
        cwd=repo, capture_output=True, text=True, check=True).stdout)
    pdt = command_prefix()
    try:
        with running_daemon(repo, work, env) as control:
            commands = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "--version": [*pdt, "--version"],
                "status --json": [*pdt, "status", "--json", "--socket", str(control)],
                "replay (one shoe)": [*pdt, "replay", str(shoe_script)],
                "rtp --json": [*pdt, "rtp", "--json"],
                AGAIN: [sys.executable, "-c", "pass"],
            }
            for argv in commands.values():  # fills the bytecode cache; not timed
                run_once(argv, env, work)
            # a round is a pair: every command once, the order reversed every other round
            runs = alternate(list(commands), repeat,
                             lambda name, _: run_once(commands[name], env, work))
            times = {name: [wall for wall, _ in runs[name]] for name in commands}
            cpu = {name: [used for _, used in runs[name]] for name in commands}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    floor = statistics.median(times[PASS])
    cpu_floor = statistics.median(cpu[PASS])
    rows = []
    for name, values in times.items():
        median = statistics.median(values)
        cpu_median = statistics.median(cpu[name])
        rows.append({"command": name, "min_s": min(values), "median_s": median,
                     "max_s": max(values), "ratio": median / floor, "runs": len(values),
                     "added_s": median - floor,
                     "cpu_median_s": cpu_median, "cpu_ratio": cpu_median / cpu_floor,
                     "goal": goal_text(name), "met": goal_met(name, median, median / floor),
                     "judged": judged_ratio(name, times)})
    return {"repo": str(repo), "runs_as": " ".join(Path(part).name for part in pdt),
            "repeat": repeat, "rows": rows,
            "aa_floor": Floor.of(pair_ratios(times[AGAIN], times[PASS])).text()}


def judged_ratio(name: str, times: dict[str, list[float]]) -> dict[str, Any] | None:
    """A ratio goal judged on the runs as pairs (each round of the interleaved runs one pair)
    against the interpreter's A/A floor: ``python -c pass`` at one end of each round against
    itself at the other (bench/verdict.py)."""
    kind, limit = GOALS.get(name, ("", 0.0))
    if kind != "ratio":
        return None
    return judged(times[name], times[PASS], limit, aa=(times[AGAIN], times[PASS]))


def goal_text(name: str) -> str:
    kind, limit = GOALS.get(name, ("", 0.0))
    return {"ratio": f"<= x{limit:g}", "seconds": f"< {limit:g} s"}.get(kind, "")


def goal_met(name: str, median: float, ratio: float) -> bool | None:
    """Against its goal, the median; a ratio's verdict against the A/A floor is ``judged``."""
    kind, limit = GOALS.get(name, ("", 0.0))
    if kind == "ratio":
        return ratio <= limit
    if kind == "seconds":
        return median < limit
    return None


def table(figures: dict[str, Any]) -> str:
    lines = [f"{'':<20} {'wall time':^35}        {'CPU time':^16}",
             f"{'command':<20} {'min':>8} {'median':>8} {'max':>8} {'added':>8} {'ratio':>6}"
             f"  {'median':>8} {'ratio':>6}  goal (wall median)", "-" * 105]
    for row in figures["rows"]:
        met = f": {row['judged']['note'].split(': ', 1)[1]}" if row["judged"] else \
            {True: " met", False: " NOT met", None: ""}[row["met"]]
        ms = [f"{row[key] * 1000:6.0f}ms" for key in ("min_s", "median_s", "max_s")]
        lines.append(f"{row['command']:<20} {' '.join(ms)} {row['added_s'] * 1000:+6.0f}ms"
                     f" {row['ratio']:5.1f}x"
                     f"  {row['cpu_median_s'] * 1000:6.0f}ms {row['cpu_ratio']:5.1f}x"
                     f"  {row['goal']}{met}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each (default 5)")
    parser.add_argument("--repo", type=Path, default=REPO,
                        help="time this checkout's code instead (e.g. an older one: before)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 3:
        parser.error("--repeat must be at least 3")
    figures = measure(args.repeat, args.repo)
    print(f"pokdeng-table start-up, {figures['repo']}, run as {figures['runs_as']}, "
          f"{figures['repeat']} interleaved runs each, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(table(figures))
    save_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
