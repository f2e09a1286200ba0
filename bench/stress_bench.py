"""Card latency under a busy table PC: the same cards through the real daemon, quiet and
stressed, in alternated runs (bench part ``stress``).

Both runs are bench/latency_bench.py's daemon path (simulated Bee-Tek shoe and line panel on
ptys -> daemon -> journal -> MQTT subscriber on mosquitto and HTTP server, one card at a time)
with the dealer display on (``display.max_clients`` 16) and the same shoe. Stressed, from the
first round to the last, a load process (this file with ``--load``) runs beside it:

* 16 Server-Sent Events clients reading the display's ``/events``;
* ``status`` 10 times a second over the control socket (a new connection each, as the
  ``pokdeng-table status`` command makes);
* ``pokdeng-table journal verify`` then ``journal archive --older-than 7d`` on the daemon's
  journal, back to back, each a whole process as an operator runs it;
* an MQTT catch-up on the same broker: a persistent-session subscriber goes away while 1,000
  QoS 1 messages are queued for it, comes back and is delivered the backlog, over and over.

The quiet runs have the display on and nobody connected. Both run the daemon as its unit does
(systemd/pokdeng-table.service's ``Nice=`` and ``LimitRTPRIO=``, when the bench runs as root;
the load at the default priority, as the kiosk's browser and an operator's commands would).
The bench's receivers stand for a backend on another machine: as root they run at a
real-time priority above the daemon's, so the load slows the table, not the measuring
(``--receivers-normal`` puts them beside the load, as before 2026-12-01). The broker runs at
the normal priority.

As root, the table (its daemon and screen process), the broker and the load each run in a CPU
cgroup of their own, as systemd places units (bench/cpu_groups.py): the table at its unit's
``CPUWeight=`` (``--table-weight``), the load at systemd's default 100. Without them the
kernel groups the processes by session instead, and the bench's session (the daemon, the
broker, the bench) shared one share against the load's.

The broker stands for the studio's, which has a machine of its own (docs/backend.md): its
group has the table's weight and its store is in memory (``/dev/shm``), so neither the load
takes its cores nor its saves share the table's disk, as neither would in a studio.
``--broker-on-pc`` runs it as a broker on the table PC instead: systemd's default weight, its
store on the bench's disk beside the journal.

A pair is three runs: quiet, stressed, and quiet again (the A/A copy: the quiet run against
itself, this machine's noise); odd pairs reverse the order. Goals, judged by bench/verdict.py
against that floor: the median pair's stressed p99 <= x1.3 the quiet p99 (x1.5 until
2026-12-02), and no stressed card over 20 ms. With ``--trace FILE`` every card slower than
``--trace-over`` ms gets a line in FILE: what the daemon's threads waited for and what it wrote
across that card (bench/card_trace.py).

    python bench/stress_bench.py [--rounds 8] [--pairs 5] [--json FILE] [--trace FILE]
                                 [--stressors pages,status,journal,catchup]
                                 [--table-weight N] [--broker-on-pc]

``--stressors`` gives the stressed runs some of the load only: what each part costs alone.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import cpu_groups, harness  # noqa: E402
from bench.card_trace import CardTrace, delay_accounting_on  # noqa: E402
from bench.measuring import PAIRS, ROUNDS, save_json  # noqa: E402
from bench.verdict import Floor, judge_count, pair_ratios  # noqa: E402

SSE_CLIENTS = 16
STATUS_HZ = 10.0
BACKLOG = 1000            # messages queued for the catch-up subscriber each cycle
GOAL_P99_RATIO = 1.3      # stressed p99 / quiet p99 (x1.5 until 2026-12-02)
TRACE_OVER_MS = 10.0      # cards slower than this get a line in the trace
#: the stressors (``--stressors`` runs some of them: what each costs on its own)
STRESSORS = ("pages", "status", "journal", "catchup")
DISPLAY_CONFIG = 'display: {{listen: "127.0.0.1:{port}", max_clients: 16}}\n'  # formatted here only


# --- the load (its own process: its threads must not share the receivers' interpreter) ------

def load_main(display_port: int, control_socket: str, journal: str, mqtt_port: int,
              stressors: tuple[str, ...] = STRESSORS) -> int:
    """Run every stressor until killed; print counts of what each did, once a second."""
    counts = {"sse_messages": 0, "sse_clients": 0, "status_answers": 0, "journal_runs": 0,
              "journal_failed": 0, "backlog_delivered": 0}
    lock = threading.Lock()

    def count(name: str, n: int = 1) -> None:
        with lock:
            counts[name] += n

    def sse_client(source: str) -> None:
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", display_port, timeout=30,
                                                  source_address=(source, 0))
                conn.request("GET", "/events")
                response = conn.getresponse()
                if response.status != 200:
                    time.sleep(0.5)
                    continue
                count("sse_clients")
                while line := response.fp.readline():
                    if line.startswith(b"event:"):
                        count("sse_messages")
            except OSError:
                time.sleep(0.2)

    def status_poller() -> None:
        due = time.monotonic()
        while True:
            due += 1.0 / STATUS_HZ
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(5)
                    sock.connect(control_socket)
                    sock.sendall(b'{"cmd": "status"}\n')
                    answer = b""
                    while not answer.endswith(b"\n"):
                        chunk = sock.recv(65536)
                        if not chunk:
                            break
                        answer += chunk
                if answer.endswith(b"\n"):
                    count("status_answers")
            except OSError:
                pass
            time.sleep(max(0.0, due - time.monotonic()))

    def journal_runs() -> None:
        commands = (["journal", "verify", journal],
                    ["journal", "archive", journal, "--older-than", "7d"])
        while True:
            for command in commands:
                done = subprocess.run([sys.executable, "-m", "controller", *command], cwd=ROOT,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                count("journal_runs" if done.returncode == 0 else "journal_failed")

    def mqtt_catch_up() -> None:
        import paho.mqtt.client as mqtt

        received = threading.Semaphore(0)

        def on_message(client: Any, userdata: Any, message: Any) -> None:
            count("backlog_delivered")
            received.release()

        subscriber = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="stress-catch-up",
                                 clean_session=False)
        subscriber.on_message = on_message
        subscriber.connect("127.0.0.1", mqtt_port)
        subscriber.subscribe("stress/backlog", qos=1)
        subscriber.loop_start()
        publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="stress-publisher")
        publisher.max_inflight_messages_set(BACKLOG)
        publisher.connect("127.0.0.1", mqtt_port)
        publisher.loop_start()
        time.sleep(0.5)
        body = json.dumps({"type": "card_dealt", "data": {"filler": "x" * 200}})
        while True:
            subscriber.disconnect()   # away: the broker queues for its session
            subscriber.loop_stop()
            infos = [publisher.publish("stress/backlog", body, qos=1) for _ in range(BACKLOG)]
            for info in infos:
                info.wait_for_publish(10)
            subscriber.reconnect()     # back: the backlog is delivered
            subscriber.loop_start()
            for _ in range(BACKLOG):
                if not received.acquire(timeout=10):
                    break
            time.sleep(0.5)

    # 16 pages from 4 machines' worth of loopback addresses: the display lets one address hold
    # 8 streams at most (controller/display/admission.py), as a studio's screens would be spread
    pages = [functools.partial(sse_client, f"127.0.0.{2 + n % 4}") for n in range(SSE_CLIENTS)]
    chosen: dict[str, list[Callable[[], None]]] = {
        "pages": pages, "status": [status_poller], "journal": [journal_runs],
        "catchup": [mqtt_catch_up]}
    workers = [worker for name in stressors for worker in chosen[name]]
    for worker in workers:
        threading.Thread(target=worker, daemon=True).start()
    print("ready", flush=True)
    while True:
        time.sleep(1.0)
        with lock:
            print(json.dumps(counts), flush=True)


def stress_load(display_port: int, mqtt_port: int, counts: list[dict[str, int]],
                stressors: tuple[str, ...] = STRESSORS,
                priority: harness.UnitPriority | None = None
                ) -> Callable[[Path], AbstractContextManager[None]]:
    """The load for a run's daemon (``work``: the run's directory), as harness.deal takes it,
    run at ``priority`` (the PC's other work: its group, where the bench made one); its last
    counts are appended to ``counts``."""

    @contextlib.contextmanager
    def load(work: Path) -> Iterator[None]:
        journal = work / "state" / "journal.sqlite"
        proc = subprocess.Popen([sys.executable, __file__, "--load", str(display_port),
                                 str(work / "control.sock"), str(journal), str(mqtt_port),
                                 ",".join(stressors)],
                                stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                start_new_session=True,  # its journal commands die with it
                                preexec_fn=(priority or harness.UnitPriority()).apply)
        assert proc.stdout is not None
        try:
            if proc.stdout.readline().strip() != "ready":
                raise harness.Stalled("the stress load did not start")
            # every page connected before the first card
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if line and ("pages" not in stressors
                             or json.loads(line)["sse_clients"] >= SSE_CLIENTS):
                    break
            yield
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
            last: dict[str, int] = {}
            for line in proc.stdout.read().splitlines():
                last = json.loads(line)
            counts.append(last)

    return load


# --- the bench ---------------------------------------------------------------------------------

MEMORY = Path("/dev/shm")


def _memory_store(stack: contextlib.ExitStack) -> Path | None:
    """A directory in memory for the broker's store, removed with ``stack``; None where the
    machine has no ``/dev/shm`` (the store then stays on the bench's disk, and says so)."""
    if not MEMORY.is_dir():
        return None
    store = Path(tempfile.mkdtemp(prefix="pokdeng-broker-", dir=MEMORY))
    stack.callback(shutil.rmtree, store, True)
    return store


#: the bench's own receivers stand for a backend on another machine: as root they run at this
#: real-time priority, above the daemon's, so the load slows the table and not the measuring
#: (``--receivers-normal``: at the normal priority, beside the load). The broker stays at the
#: normal priority, in its own CPU group (above): the catch-up load it delivers must not go
#: before the table's cards.
RECEIVERS_RTPRIO = 20
#: a pair: quiet, stressed, and the quiet run's A/A copy (odd pairs reverse the order)
CASES = ("quiet", "stressed", "quiet-aa")


@contextlib.contextmanager
def receivers_at(realtime: bool) -> Iterator[None]:
    """This process (and the receivers' threads it starts) at RECEIVERS_RTPRIO, if asked."""
    own_policy, own_param = os.sched_getscheduler(0), os.sched_getparam(0)
    if realtime:  # before the receivers' threads start: they inherit it
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(RECEIVERS_RTPRIO))
    try:
        yield
    finally:
        os.sched_setscheduler(0, own_policy, own_param)  # the caller's own priority again


def measure(rounds: int = 8, pairs: int = 5, state_dir: str | None = None,
            stressors: tuple[str, ...] = STRESSORS, priority: harness.UnitPriority | None = None,
            receivers_rt: bool = True, trace_file: Path | None = None,
            trace_over_ms: float = TRACE_OVER_MS, table_weight: int | None = None,
            broker_on_pc: bool = False) -> dict[str, Any]:
    """``pairs`` alternated pairs of runs (quiet, stressed, quiet again), fresh daemon and
    journal each; per transport, each run's figures, and the goals judged. The daemon runs at
    ``priority`` (default: its unit's), its CPU group at ``table_weight`` (default: its
    unit's); the broker as the studio's (the table's weight, its store in memory) unless
    ``broker_on_pc``; cards over ``trace_over_ms`` get a line in ``trace_file`` (default:
    none)."""
    if missing := harness.mosquitto_missing():
        raise SystemExit(missing)
    priority = harness.unit_priority() if priority is None else priority
    receivers_rt = receivers_rt and os.geteuid() == 0
    work = Path(state_dir or tempfile.mkdtemp(prefix="pokdeng-stress-"))
    work.mkdir(parents=True, exist_ok=True)
    load_counts: list[dict[str, int]] = []
    stalled: list[str] = []
    with contextlib.ExitStack() as stack:
        stack.callback(lambda: None if state_dir else shutil.rmtree(work, ignore_errors=True))
        trace = None
        if trace_file:
            stack.enter_context(delay_accounting_on())
            trace = CardTrace(stack.enter_context(trace_file.open("w")), trace_over_ms)
            stack.callback(trace.close)
        # the units' CPU groups (bench/cpu_groups.py) before any process that joins one
        weights = cpu_groups.Weights(table_weight or harness.unit_cpu_weight(),
                                     cpu_groups.DEFAULT_WEIGHT if broker_on_pc else None)
        groups = stack.enter_context(cpu_groups.unit_groups(weights))
        placed = isinstance(groups, cpu_groups.CpuGroups)
        priority = dataclasses.replace(priority, cpu_group=groups.table) if placed else priority
        broker_priority = harness.UnitPriority(cpu_group=groups.broker if placed else None)
        load_priority = harness.UnitPriority(cpu_group=groups.load if placed else None)
        store = None if broker_on_pc else _memory_store(stack)
        stack.enter_context(receivers_at(receivers_rt))
        backends = stack.enter_context(harness.receivers(work, broker_priority=broker_priority,
                                                         broker_store=store))

        def run(case: str, pair: int) -> dict[str, dict[str, float]]:
            run_dir = Path(tempfile.mkdtemp(prefix=f"{case}{pair + 1}-", dir=work))
            display_port = harness.free_port()
            load = stress_load(display_port, backends.mqtt_port, load_counts, stressors,
                               load_priority)
            with harness.start_daemon(run_dir, backends, priority=priority,
                                      extra_config=DISPLAY_CONFIG.format(port=display_port)
                                      ) as table:
                samples = harness.deal(table, backends, rounds,
                                       load=load if case == "stressed" else None,
                                       trace=trace, label=f"{case} {pair + 1}")
            return {t: harness.figures(v) for t, v in samples.items()}

        runs = harness.alternate(CASES, pairs, run, stalled)
    summary: dict[str, Any] = {"cards": rounds * harness.CARDS_A_ROUND, "pairs": pairs,
                               "runs": runs, "daemon_nice": priority.nice,
                               "daemon_rtprio": priority.rtprio,
                               "receivers_rtprio": RECEIVERS_RTPRIO if receivers_rt else 0,
                               "stressors": list(stressors), "load": load_counts,
                               "cpu_groups": groups.description if placed else groups,
                               "broker_store": "on the bench's disk" if store is None
                               else "in memory",
                               "stalled": stalled,
                               "trace": {"file": str(trace_file) if trace_file else None,
                                         "over_ms": trace_over_ms,
                                         "block_io_counted": bool(trace and
                                                                  trace.block_io_counted),
                                         "cards": trace.traced if trace else 0,
                                         "disk": trace.disk_text() if trace else ""},
                               "transports": {}}
    for t in backends.names:
        def per_run(case: str, figure: str, t: str = t) -> list[float]:
            return [run[t][figure] for run in runs[case]]

        quiet_over = sum(per_run("quiet", "over_goal") + per_run("quiet-aa", "over_goal"))
        quiet_cards = int(sum(per_run("quiet", "cards") + per_run("quiet-aa", "cards")))
        stressed_over = int(sum(per_run("stressed", "over_goal")))
        stressed_cards = int(sum(per_run("stressed", "cards")))
        summary["transports"][t] = {
            case: {f: statistics.median(per_run(case, f)) for f in ("p50", "p99")}
            | {"max": max(per_run(case, "max")), "over_goal": int(sum(per_run(case, "over_goal")))}
            for case in CASES
        } | {"p99": harness.judged(per_run("stressed", "p99"), per_run("quiet", "p99"),
                                   GOAL_P99_RATIO,
                                   aa=(per_run("quiet-aa", "p99"), per_run("quiet", "p99"))),
             "p50_ratio": statistics.median(pair_ratios(per_run("stressed", "p50"),
                                                        per_run("quiet", "p50"))),
             "p50_floor": Floor.of(pair_ratios(per_run("quiet-aa", "p50"),
                                               per_run("quiet", "p50"))).text(),
             "over_goal": {"stressed": stressed_over, "quiet": int(quiet_over),
                           "verdict": judge_count(stressed_over, stressed_cards, int(quiet_over),
                                                  quiet_cards)}}
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    print(f"card frame on the pty -> card_dealt: {summary['cards']} cards a run, "
          f"{summary['pairs']} alternated pairs of quiet, stressed and quiet again; "
          f"stressed: {','.join(summary['stressors'])}; daemon at nice "
          f"{summary['daemon_nice']}, real-time grant {summary['daemon_rtprio'] or 'none'}; "
          f"receivers at real-time {summary['receivers_rtprio'] or 'no'}; "
          f"ms, median of the runs' figures (max: of all runs)")
    print(f"  CPU: {summary['cpu_groups']}; the broker's store {summary['broker_store']}")
    for load in summary["load"]:
        if load:
            print("  load: " + ", ".join(f"{k} {v}" for k, v in load.items()))
    print(f"{'':<18}{'p50':>8}{'p99':>8}{'max':>8}{'> 20 ms':>9}")
    for transport, f in summary["transports"].items():
        for case in CASES:
            k = f[case]
            print(f"{transport.upper() + ' ' + case:<18}{k['p50']:>8.2f}{k['p99']:>8.2f}"
                  f"{k['max']:>8.2f}{k['over_goal']:>9}")
        over = f["over_goal"]
        print(f"{transport.upper()} p99 stressed / quiet: x{f['p99']['ratio']:.2f}, "
              f"{f['p99']['note']}; p50 x{f['p50_ratio']:.2f} (A/A floor {f['p50_floor']})")
        print(f"{transport.upper()} stressed cards over {harness.GOAL_MAX_MS:g} ms: "
              f"{over['stressed']} (quiet: {over['quiet']}), goal none: {over['verdict']}")
    for stall in summary["stalled"]:
        print(f"run again after: {stall}")
    trace = summary["trace"]
    if trace["file"]:
        print(f"cards over {trace['over_ms']:g} ms traced: {trace['cards']}, in {trace['file']}"
              + (f"; asleep on the disk in: {trace['disk']}" if trace["disk"] else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=ROUNDS, default=8, help="rounds (13 cards each) per run")
    parser.add_argument("--pairs", type=PAIRS, default=5,
                        help="alternated pairs of runs: quiet, stressed, quiet again (default 5)")
    parser.add_argument("--state-dir", default=None, help="work directory (default: temporary)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--trace", type=Path, metavar="FILE",
                        help="write a line for every card slower than --trace-over to FILE: "
                             "what the daemon's threads waited for, what it wrote")
    parser.add_argument("--trace-over", type=float, default=TRACE_OVER_MS, metavar="MS",
                        help=f"the trace's threshold (default {TRACE_OVER_MS:g} ms)")
    parser.add_argument("--stressors", default=",".join(STRESSORS),
                        help=f"the stressed runs' load, some of {','.join(STRESSORS)} "
                             f"(default all)")
    parser.add_argument("--daemon-nice", type=int, default=None, metavar="N",
                        help="the daemon's niceness (default: its unit's Nice=, as root)")
    parser.add_argument("--daemon-rtprio", type=int, default=None, metavar="N",
                        help="the real-time priority the daemon's config asks for, 0 for none "
                             "(default: its unit's LimitRTPRIO=, as root)")
    parser.add_argument("--receivers-normal", action="store_true",
                        help="the bench's receivers at the normal priority, beside the load "
                             "(default as root: real-time, as a backend elsewhere)")
    parser.add_argument("--table-weight", type=int, default=None, metavar="N",
                        help="the table's CPU cgroup weight (default: its unit's CPUWeight=)")
    parser.add_argument("--broker-on-pc", action="store_true",
                        help="the broker as one on the table PC: systemd's default CPU weight, "
                             "its store on the bench's disk (default: the studio's broker, as "
                             "on a machine of its own: the table's weight, its store in memory)")
    parser.add_argument("--load", nargs=5, help=argparse.SUPPRESS,
                        metavar=("DISPLAY_PORT", "SOCKET", "JOURNAL", "MQTT_PORT", "STRESSORS"))
    args = parser.parse_args()
    if args.load:
        port, sock, journal, mqtt_port, stressors = args.load
        return load_main(int(port), sock, journal, int(mqtt_port),
                         tuple(stressors.split(",")))
    stressors = tuple(s for s in args.stressors.split(",") if s)
    if not stressors or set(stressors) - set(STRESSORS):
        parser.error(f"--stressors: some of {','.join(STRESSORS)}")
    unit = harness.unit_priority()
    priority = harness.UnitPriority(
        unit.nice if args.daemon_nice is None else args.daemon_nice,
        unit.rtprio if args.daemon_rtprio is None else args.daemon_rtprio)
    summary = measure(args.rounds, args.pairs, args.state_dir, stressors, priority,
                      not args.receivers_normal, args.trace, args.trace_over,
                      args.table_weight, args.broker_on_pc)
    print_summary(summary)
    save_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
