"""Every benchmark in one table: ``pokdeng-table bench`` (or ``python bench/report.py``).

Runs, in this order, and prints one table of figures at the end:

- exact RTP: the whole ``pokdeng-table rtp`` process, timed (start-up included), 3 runs;
- replay: rounds/s and one whole shoe's replay time, 3 runs (bench/replay_bench.py);
- journal: appends/s with an fsync per input, p50/p99 (bench/journal_bench.py, on --dir);
  how late a writer gets the journal after another process's write transaction
  (bench/write_lock_bench.py);
- latency: card frame on the shoe's pty -> ``card_dealt`` at an MQTT subscriber and at an HTTP
  server, through the real daemon, against a durable relay (read, parse, one fsync'd SQLite
  commit, send), its A/A copy and the same relay on the daemon's threads, in --pairs alternated
  pairs (bench/latency_bench.py; needs mosquitto);
- burst: 13 card frames posted at once -> the last one journaled, grouped in one transaction
  against one transaction each (bench/burst_bench.py);
- catchup: an MQTT backlog of 3,000 events through loopback and a 10 ms link, several batches
  in flight against one (bench/catchup_bench.py; needs mosquitto);
- fleet: 5 and 40 tables dealing while their broker is down 10 s, then back: seconds from the
  broker accepting connections to the last backlog delivered (bench/fleet_bench.py; needs
  mosquitto);
- daemon: start to READY, idle RSS and CPU (bench/daemon_bench.py; idle window --idle-seconds,
  20 s by default, --full for 60 s);
- display: idle RSS and CPU with the dealer display on and two pages connected, and a button
  press -> the page's status, p50/max (bench/display_bench.py; same idle window);
- start: start to READY and ``journal verify`` on journals of 1, 50 and 500 shoes (--full adds
  1,500), built once and cached (bench/start_bench.py); then (unless --start-shoes names the
  sizes) dealing right after a start on 500 shoes (--full 1,500) against 1 shoe and its A/A
  copy, archiving off and on, in --pairs alternated pairs (bench/start_deal_bench.py);
- stress: card -> backend latency through the real daemon, quiet, stressed (16 display
  pages, ``status`` 10 Hz, ``journal verify``/``archive`` running, an MQTT catch-up on the
  broker) and quiet again (the A/A copy), in --pairs alternated pairs; slow cards traced to a
  file (bench/stress_bench.py; needs mosquitto);
- cli: each command's whole process against ``python -c pass``: ``--version``, ``status --json``
  (a running daemon), a shoe's ``replay``, ``rtp --json``; min / median / max of 5
  (bench/cli_bench.py);
- soak: a short soak of --soak-shoes shoes with every fault kind (bench/soak/; needs
  mosquitto), and the figures of the last recorded long soak (docs/soak-figures.json).

Every ratio with a goal is the median of its pairs, printed with the A/A floor measured in the
same run and one word: met, not met, or cannot tell on this machine (the rule:
bench/verdict.py). ``--skip latency,soak`` leaves parts out. Each part is also runnable alone
(see its file).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PARTS = ("rtp", "replay", "journal", "latency", "burst", "catchup", "fleet", "daemon", "display",
         "start", "stress", "cli", "soak")
SOAK_RECORD = REPO / "docs" / "soak-figures.json"

from bench.harness import GOAL_MAX_MS, mosquitto_missing, stalled_text  # noqa: E402
from bench.measuring import PAIRS, ROUNDS, save_json, span, whole, writable  # noqa: E402
from controller.commands.bench import run_to_its_end  # noqa: E402

Row = tuple[str, str, str]  # figure, value, goal or note


RUNS = 3  # the RTP and replay rows: min / median / max of this many runs


def spread(values: list[float], unit: str, digits: int) -> str:
    """``min / median / max unit`` of the runs."""
    ordered = sorted(values)
    return " / ".join(f"{v:.{digits}f}" for v in (ordered[0], ordered[len(ordered) // 2],
                                                   ordered[-1])) + f" {unit}"


def rtp_rows() -> list[Row]:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "controller", "rtp", "--json"],
                              capture_output=True, text=True, timeout=600)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            return [("exact RTP (pokdeng-table rtp)", "FAILED", done.stderr.strip()[:80])]
    return [("exact RTP, whole process", spread(times, "s", 2),
             f"min / median / max of {RUNS} runs; 8 decks, exact; goal < 0.5 s")]


def replay_rows(shoes: int) -> list[Row]:
    from bench.replay_bench import measure

    runs = [measure(shoes) for _ in range(RUNS)]
    machine, json_lines = runs[-1]["machine"], runs[-1]["json"]
    return [
        ("replay rounds/s (machine)", f"{machine['rounds_per_s']:,.0f}", f"{shoes} shoes"),
        ("replay rounds/s (+ JSON lines)", f"{json_lines['rounds_per_s']:,.0f}", ""),
        ("replay one shoe", spread([run["machine"]["shoe_median_ms"] for run in runs], "ms", 1),
         f"min / median / max of {RUNS} runs' median shoe; goal < 8 ms"),
    ]


def journal_rows(shoes: int, directory: str | None) -> list[Row]:
    from bench.journal_bench import measure

    f = measure(shoes, directory)
    return [
        ("journal appends/s (fsync each)", f"{f['inputs_per_s']:,.0f}",
         f"{f['events_per_s']:,.0f} events/s; on {f['directory']}"),
        ("journal append p50 / p99", f"{f['p50_ms']:.2f} / {f['p99_ms']:.2f} ms", ""),
        ("journal verify", f"{f['verify_records_per_s']:,.0f} records/s", ""),
        *write_lock_rows(),
    ]


def write_lock_rows() -> list[Row]:
    """How late a writer gets the journal after another process's 4 ms transaction."""
    from bench.write_lock_bench import measure

    late = {row["case"]: row for row in measure()["rows"] if row["hold_ms"] == 4.0}
    busy, ours = (late[f"process, {how}"] for how in ("SQLite's busy handler",
                                                       "write_lock.begin"))
    return [("journal write lock, late after 4 ms held",
             f"{ours['p50']:.2f} / {ours['max']:.2f} ms",
             f"p50 / max after another process's commit; SQLite's busy handler "
             f"{busy['p50']:.2f} / {busy['max']:.2f} ms")]


def latency_rows(rounds: int, pairs: int) -> list[Row]:
    if missing := mosquitto_missing():
        return [("card -> backend latency", "skipped", missing)]
    summary = run_json("latency_bench.py", "--rounds", str(rounds), "--pairs", str(pairs),
                       timeout=300 * pairs)
    rows: list[Row] = []
    runs = f"median of {summary['pairs']} alternated pairs of {summary['cards']} cards" + \
        stalled_text(summary["stalled"])
    for transport in summary["transports"]:
        name = transport.upper()
        for path, label, note in (("daemon", f"card -> {name}", runs),
                                  ("durable", f"  durable relay -> {name}",
                                   "read, parse, fsync'd commit, send"),
                                  ("durable-aa", f"  durable relay again -> {name}",
                                   "its A/A copy: the same relay, the machine's noise"),
                                  ("threaded", f"  threaded durable relay -> {name}",
                                   "the same on the daemon's threads")):
            f = summary["paths"][path][transport]
            rows.append((f"{label} p50 / p99", f"{f['p50']:.2f} / {f['p99']:.2f} ms", note))
        for goal in summary["goals"][transport]:
            against = "durable relay" if goal["against"] == "durable" else \
                "threaded durable relay"
            rows.append((f"  {name} {goal['figure']} / {against}", f"x{goal['ratio']:.2f}",
                         goal["note"]))
    return rows


def run_json(script: str, *args: str, timeout: float = 900) -> Any:
    """Run ``bench/<script>`` with ``--json``; its figures, or a FAILED row's note."""
    with tempfile.TemporaryDirectory(prefix="pokdeng-bench-") as scratch:
        figures = Path(scratch) / "figures.json"
        done = run_to_its_end([sys.executable, str(BENCH / script), *args, "--json",
                               str(figures)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=timeout)
        if done.returncode != 0 or not figures.exists():
            raise RuntimeError(done.stderr.strip()[-100:] or f"{script} exited {done.returncode}")
        return json.loads(figures.read_text())


def burst_rows() -> list[Row]:
    found = run_json("burst_bench.py", "--rounds", "8")
    grouped, single = found["grouped"], found["one by one"]

    def med(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    return [("burst of 13 frames -> last journaled", f"{med(grouped['ms']):.2f} ms",
             f"group commit, {med(grouped['commits']):.0f} commit(s); one by one "
             f"{med(single['ms']):.2f} ms, {med(single['commits']):.0f} commits")]


def catchup_rows() -> list[Row]:
    if missing := mosquitto_missing():
        return [("MQTT catch-up", "skipped", missing)]
    found = run_json("catchup_bench.py", "--events", "3000", "--repeat", "3")
    rows: list[Row] = []
    for delay in sorted({r["delay_ms"] for r in found}):
        by_window = {r["in_flight_batches"]: r for r in found if r["delay_ms"] == delay}
        link = "loopback" if delay == 0 else f"{delay:g} ms each way"
        many = max(by_window)
        rows.append((f"MQTT backlog of 3,000 events, {link}",
                     f"{by_window[many]['seconds_median']:.2f} s",
                     f"{many} batches in flight; one at a time "
                     f"{by_window[min(by_window)]['seconds_median']:.2f} s"))
    return rows


def fleet_rows() -> list[Row]:
    if missing := mosquitto_missing():
        return [("fleet: broker back -> backlogs delivered", "skipped", missing)]
    found = run_json("fleet_bench.py", "--tables", "5,40", "--outage", "10")
    return [(f"fleet of {f['tables']}: broker back -> last backlog",
             f"{f['last_s']:.2f} s",
             f"broker down {f['outage_s']:g} s, {f['backlog_events']} events waiting; median "
             f"table {f['median_s']:.2f} s; goal <= {f['goal_s']:g} s: "
             f"{'met' if f['last_s'] <= f['goal_s'] else 'NOT met'}") for f in found]


def daemon_rows(idle_seconds: float, starts: int) -> list[Row]:
    from bench.daemon_bench import measure

    f = measure(idle_seconds, starts)
    return [
        ("daemon start to READY", f"{f['ready_median_s']:.2f} s",
         f"median of {f['starts']}, first {f['ready_first_s']:.2f} s; goal < 2 s"),
        ("daemon idle RSS", f"{f['rss_mb']:.1f} MB", f"peak {f['hwm_mb']:.1f} MB; goal < 60 MB"),
        ("daemon idle CPU", f"{f['idle_cpu_pct']:.2f} %",
         f"of a core over {f['idle_seconds']:.0f} s; goal < 1 %"),
    ]


def display_rows(idle_seconds: float) -> list[Row]:
    from bench.display_bench import measure

    f = measure(idle_seconds)
    pages = f"display on, {f['clients']} pages"
    return [
        ("daemon idle RSS, display on", f"{f['rss_mb']:.1f} MB",
         f"{pages}; peak {f['hwm_mb']:.1f} MB; goal < 60 MB"),
        ("daemon idle CPU, display on", f"{f['idle_cpu_pct']:.2f} %",
         f"{pages}, over {f['idle_seconds']:.0f} s; goal < 1 %"),
        ("button -> page p50 / max", f"{f['press_to_page_p50_ms']:.0f} / "
         f"{f['press_to_page_max_ms']:.0f} ms", f"{f['presses']} presses; goal < 100 ms"),
    ]


def start_rows(full: bool, sizes: str | None, rounds: int, pairs: int) -> list[Row]:
    from bench.start_bench import FULL_SIZES, SIZES, measure

    chosen = tuple(int(s) for s in sizes.split(",")) if sizes else (
        FULL_SIZES if full else SIZES)
    rows: list[Row] = []
    for f in measure(chosen):
        rows.append((f"start to READY, {f['shoes']} shoes", f"{f['ready_s']:.2f} s",
                     f"{f['records']:,} records; goal < 1 s + interpreter; TimeoutStartSec 30"))
        rows.append((f"journal verify, {f['shoes']} shoes", f"{f['verify_s']:.2f} s",
                     "whole process"))
    if sizes is None:
        from bench import start_deal_bench

        rows.extend(start_deal_bench.rows(start_deal_bench.measure(
            start_deal_bench.FULL_SHOES if full else start_deal_bench.SHOES, rounds=rounds,
            pairs=pairs)))
    return rows


def stress_rows(rounds: int, pairs: int, trace: str | None, trace_over: float) -> list[Row]:
    if missing := mosquitto_missing():
        return [("card -> backend, stressed", "skipped", missing)]
    ours = trace is None  # a file of our own, named in the table: gone if there is no table
    trace = trace or tempfile.mkstemp(prefix="pokdeng-slow-cards-", suffix=".jsonl")[1]
    try:
        found = run_json("stress_bench.py", "--rounds", str(rounds), "--pairs", str(pairs),
                         "--trace", trace, "--trace-over", f"{trace_over:g}",
                         timeout=600 * pairs)
    except BaseException:
        if ours:
            os.unlink(trace)
        raise
    rows: list[Row] = []
    runs = f"median of {found['pairs']} alternated pairs of {found['cards']} cards, display " \
        f"on{stalled_text(found['stalled'])}; {found['cpu_groups']}; the broker's store " \
        f"{found['broker_store']}"
    for transport, f in found["transports"].items():
        name = transport.upper()
        for case, note in (("quiet", runs), ("quiet-aa", "the quiet run's A/A copy"),
                           ("stressed", "16 pages, status 10 Hz, journal verify/archive, "
                                        "MQTT catch-up")):
            k = f[case]
            rows.append((f"card -> {name} {case} p50 / p99 / max",
                         f"{k['p50']:.2f} / {k['p99']:.2f} / {k['max']:.1f} ms",
                         f"{note}; {k['over_goal']} card(s) > {GOAL_MAX_MS:g} ms"))
        rows.append((f"  {name} p99 stressed / quiet", f"x{f['p99']['ratio']:.2f}",
                     f"{f['p99']['note']}; p50 x{f['p50_ratio']:.2f} (A/A floor "
                     f"{f['p50_floor']})"))
        over = f["over_goal"]
        rows.append((f"  {name} stressed cards > {GOAL_MAX_MS:g} ms", str(over["stressed"]),
                     f"goal none: {over['verdict']} (quiet runs: {over['quiet']})"))
    t = found["trace"]
    rows.append(("cards traced (stress)", str(t["cards"]),
                 f"slower than {t['over_ms']:g} ms: what the daemon waited on, in {t['file']}"
                 + (f"; asleep on the disk in: {t['disk']}" if t.get("disk") else "")
                 + ("" if t["block_io_counted"] else
                    " (block I/O waits not counted: kernel.task_delayacct is 0 and the "
                    "bench is not root)")))
    return rows


def cli_rows() -> list[Row]:
    from bench.cli_bench import measure

    f = measure(repeat=5)
    rows: list[Row] = []
    for row in f["rows"]:
        name = row["command"] if row["command"].startswith("python") else \
            f"pokdeng-table {row['command']}"
        # a judged ratio is its median pair, the figure its word is about; any other ratio
        # still shows the interpreter's A/A floor it stands on
        ratio = f"x{row['judged']['ratio']:.2f} python -c pass, median pair; " \
            f"{row['judged']['note']}" if row["judged"] else \
            f"x{row['ratio']:.1f} python -c pass (A/A floor {f['aa_floor']})" + \
            (f"; goal {row['goal']}" if row["goal"] else "")
        rows.append((name, " / ".join(f"{row[key] * 1000:.0f}"
                                      for key in ("min_s", "median_s", "max_s")) + " ms",
                     f"whole process, min / median / max of {row['runs']}; {ratio}"))
    return rows


def soak_rows(shoes: int) -> list[Row]:
    rows: list[Row] = []
    if missing := mosquitto_missing():
        rows.append(("soak (short)", "skipped", missing))
    else:
        try:
            from bench.soak import SoakOptions, run_soak
        except ImportError as exc:  # bench/soak and testkit/ are in the clone, not the wheel
            rows.append(("soak (short)", "skipped", f"needs pip install -e '.[test]' ({exc})"))
        else:
            result = run_soak(SoakOptions(shoes=shoes, seed=1, kills=1))
            f = result.figures()
            rows.append((f"soak {f['shoes']} shoes", "OK" if result.ok else "FAILED",
                         f"{f['rounds']} rounds, {f['events']} events, "
                         f"{sum(f['faults_injected'].values())} faults, {f['restarts']} "
                         f"restarts, {f['duration_s']} s"
                         + ("" if result.ok else "; " + "; ".join(result.problems)[:200])))
    if SOAK_RECORD.exists():
        f = json.loads(SOAK_RECORD.read_text())
        rows.append((f"soak recorded ({f['shoes']} shoes)", "OK" if f.get("ok") else "FAILED",
                     f"{f['rounds']} rounds, {sum(f['faults_injected'].values())} faults, "
                     f"{f['restarts']} restarts, {f['duration_s'] / 60:.0f} min; RSS "
                     f"{f['rss_kb_reference'] / 1024:.1f} -> {f['rss_kb_last'] / 1024:.1f} MB "
                     f"({f['rss_growth_pct']:+.1f} %) shoe {f['reference_shoe']} -> "
                     f"{f['shoes']}; threads {f['threads_reference']} -> {f['threads_last']}, "
                     f"fds {f['fds_reference']} -> {f['fds_last']}"))
    return rows


def load_text() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def print_table(rows: list[Row], out: Any = sys.stdout) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    head = ("figure", "value", "goal / note")
    out.write(f"{head[0]:<{widths[0]}}  {head[1]:>{widths[1]}}  {head[2]}\n")
    out.write(f"{'-' * widths[0]}  {'-' * widths[1]}  {'-' * 11}\n")
    for figure, value, note in rows:
        out.write(f"{figure:<{widths[0]}}  {value:>{widths[1]}}  {note}\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skip", default="", metavar="PARTS",
                        help=f"comma-separated parts to leave out: {', '.join(PARTS)}")
    parser.add_argument("--full", action="store_true",
                        help="the daemon's idle window is 60 s (default 20 s); start times "
                             "also at 1,500 shoes")
    parser.add_argument("--idle-seconds", type=span(1, 3600), default=None,
                        help="the daemon's idle window in seconds (default 20, --full 60)")
    parser.add_argument("--replay-shoes", type=whole(1, 10_000), default=40, metavar="N",
                        help="shoes the replay part plays through the machine (default 40)")
    parser.add_argument("--journal-shoes", type=whole(1, 1_000), default=3, metavar="N",
                        help="shoes the journal part appends, an fsync per input (default 3)")
    parser.add_argument("--journal-dir", help="where the journal benchmark writes (default /tmp)")
    parser.add_argument("--pairs", type=PAIRS, default=5, metavar="N",
                        help="alternated pairs of the latency, start and stress parts, each "
                             "with its A/A copy (default 5): every ratio is the median pair, "
                             "judged against the A/A floor of the same run")
    parser.add_argument("--latency-rounds", type=ROUNDS, default=4, metavar="N",
                        help="rounds of 13 cards a latency run (default 4)")
    parser.add_argument("--latency-repeat", type=PAIRS, default=None, metavar="N",
                        help="the latency part's pairs (default --pairs)")
    parser.add_argument("--deal-rounds", type=ROUNDS, default=3, metavar="N",
                        help="rounds of 13 cards dealt after each start (default 3)")
    parser.add_argument("--stress-rounds", type=ROUNDS, default=4, metavar="N",
                        help="rounds of 13 cards a stress run (default 4)")
    parser.add_argument("--trace", metavar="FILE", type=writable,
                        help="the stress part's trace of slow cards (default: a new file in "
                             "the temporary directory, named in the table)")
    parser.add_argument("--trace-over", type=span(0, 60_000), default=10.0, metavar="MS",
                        help="cards slower than this get a line in the trace (default 10)")
    parser.add_argument("--start-shoes", metavar="SIZES", default=None,
                        help="journal sizes for the start times, e.g. 1,50 (default 1,50,500)")
    parser.add_argument("--soak-shoes", type=whole(1, 1_000), default=3, metavar="N",
                        help="shoes of the short soak, every fault kind (default 3)")
    parser.add_argument("--json", metavar="FILE", type=writable,
                        help="also write the table as JSON")


def run(args: argparse.Namespace) -> int:
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    unknown = skip - set(PARTS)
    if unknown:
        print(f"--skip: unknown part(s) {', '.join(sorted(unknown))}; parts: {', '.join(PARTS)}",
              file=sys.stderr)
        return 2
    if skip == set(PARTS):
        print(f"--skip: every part left out; parts: {', '.join(PARTS)}", file=sys.stderr)
        return 2
    idle = args.idle_seconds if args.idle_seconds is not None else (60.0 if args.full else 20.0)
    parts: list[tuple[str, Callable[[], list[Row]]]] = [
        ("rtp", rtp_rows),
        ("replay", lambda: replay_rows(args.replay_shoes)),
        ("journal", lambda: journal_rows(args.journal_shoes, args.journal_dir)),
        ("latency", lambda: latency_rows(args.latency_rounds, args.pairs
                                         if args.latency_repeat is None else
                                         args.latency_repeat)),
        ("burst", burst_rows),
        ("catchup", catchup_rows),
        ("fleet", fleet_rows),
        ("daemon", lambda: daemon_rows(idle, 5)),
        ("display", lambda: display_rows(idle)),
        ("start", lambda: start_rows(args.full, args.start_shoes, args.deal_rounds,
                                     args.pairs)),
        ("stress", lambda: stress_rows(args.stress_rounds, args.pairs, args.trace,
                                       args.trace_over)),
        ("cli", cli_rows),
        ("soak", lambda: soak_rows(args.soak_shoes)),
    ]
    rows: list[Row] = []
    failed = False
    began, load_before = time.strftime('%Y-%m-%d %H:%M', time.gmtime()), load_text()
    for name, part in parts:
        if name in skip:
            continue
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        try:
            rows += part()
        except (Exception, SystemExit) as exc:  # one broken part must not hide the others
            rows.append((name, "FAILED", f"{type(exc).__name__}: {exc}"[:160]))
        failed |= any(value == "FAILED" for _, value, _ in rows)
    print(f"pokdeng-table benchmarks, {began} to {time.strftime('%H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; load average "
          f"{load_before} at the start, {load_text()} at the end (1 / 5 / 15 min)")
    print_table(rows)
    save_json(args.json, [dict(zip(("figure", "value", "note"), r)) for r in rows])
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pokdeng-table bench",
                                     description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except KeyboardInterrupt:  # each part has stopped what it started on its way out
        print("bench: interrupted; no table", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
