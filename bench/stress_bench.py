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
the normal priority: on the table PC it is other work. Goals (issue 21):
stressed p99 <= 1.5x quiet p99, and no card over 20 ms.

    python bench/stress_bench.py [--rounds 8] [--repeat 3] [--json FILE]
                                 [--stressors pages,status,journal,catchup]

``--stressors`` gives the stressed runs some of the load only: what each part costs alone.
"""

from __future__ import annotations

import argparse
import contextlib
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

from bench import latency_bench as lb  # noqa: E402
from bench.measuring import percentile  # noqa: E402

SSE_CLIENTS = 16
STATUS_HZ = 10.0
BACKLOG = 1000            # messages queued for the catch-up subscriber each cycle
GOAL_P99_RATIO = 1.5      # stressed p99 / quiet p99
GOAL_MAX_MS = 20.0        # no card slower than this
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
                stressors: tuple[str, ...] = STRESSORS
                ) -> Callable[[Path], AbstractContextManager[None]]:
    """The load for a run's daemon (``work``: the run's directory), as run_daemon_phase takes
    it; the load's last counts are appended to ``counts``."""

    @contextlib.contextmanager
    def load(work: Path) -> Iterator[None]:
        journal = work / "state" / "journal.sqlite"
        proc = subprocess.Popen([sys.executable, __file__, "--load", str(display_port),
                                 str(work / "control.sock"), str(journal), str(mqtt_port),
                                 ",".join(stressors)],
                                stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                start_new_session=True,  # its journal commands die with it
                                preexec_fn=lb.UnitPriority().apply)  # the PC's other work
        assert proc.stdout is not None
        try:
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit("the stress load did not start")
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

def figures(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values),
            "over_goal": sum(1 for v in values if v > GOAL_MAX_MS), "cards": len(values)}


#: the bench's own receivers stand for a backend on another machine: as root they run at this
#: real-time priority, above the daemon's, so the load slows the table and not the measuring
#: (``--receivers-normal``: at the normal priority, beside the load). The broker stays at the
#: normal priority: on the table PC it is the PC's other work (the catch-up load is its).
RECEIVERS_RTPRIO = 20


def measure(rounds: int = 8, repeat: int = 3, state_dir: str | None = None,
            stressors: tuple[str, ...] = STRESSORS, priority: lb.UnitPriority | None = None,
            receivers_rt: bool = True) -> dict[str, Any]:
    """``repeat`` pairs of runs (quiet and stressed, the order alternating), fresh daemon and
    journal each; per transport, each run's p50/p99/max in ms and the ratios. The daemon
    runs at ``priority`` (default: its unit's)."""
    if not os.access(lb.MOSQUITTO, os.X_OK):
        raise SystemExit(f"mosquitto not found at {lb.MOSQUITTO} (apt-get install mosquitto)")
    priority = lb.unit_priority() if priority is None else priority
    receivers_rt = receivers_rt and os.geteuid() == 0
    own_policy, own_param = os.sched_getscheduler(0), os.sched_getparam(0)
    if receivers_rt:  # before the receivers' threads start: they inherit it
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(RECEIVERS_RTPRIO))
    try:
        work = Path(state_dir or tempfile.mkdtemp(prefix="pokdeng-stress-"))
        work.mkdir(parents=True, exist_ok=True)
        arrivals = lb.Arrivals()
        broker = lb.Broker(work)
        server = lb.start_http(arrivals)
        subscriber = lb.start_subscriber(broker.port, arrivals)
        http_port = server.server_address[1]
        runs: dict[str, list[dict[str, dict[str, float]]]] = {"quiet": [], "stressed": []}
        load_counts: list[dict[str, int]] = []
        try:
            for n in range(repeat):
                order = ("quiet", "stressed") if n % 2 == 0 else ("stressed", "quiet")
                for kind in order:
                    run_dir = work / f"{kind}{n + 1}"
                    run_dir.mkdir()
                    display_port = lb.free_port()
                    arrivals.clear()
                    load = stress_load(display_port, broker.port, load_counts, stressors)
                    samples = lb.run_daemon_phase(
                        run_dir, rounds, arrivals, http_port, broker.port,
                        extra_config=DISPLAY_CONFIG.format(port=display_port),
                        load=load if kind == "stressed" else None, priority=priority)
                    runs[kind].append({t: figures(v) for t, v in samples.items()})
        finally:
            subscriber.loop_stop()
            subscriber.disconnect()
            server.shutdown()
            broker.stop()
            if not state_dir:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        os.sched_setscheduler(0, own_policy, own_param)  # the caller's own priority again
    summary: dict[str, Any] = {"cards": rounds * lb.CARDS_A_ROUND, "repeat": repeat, "runs": runs,
                               "daemon_nice": priority.nice,
                               "daemon_rtprio": priority.rtprio,
                               "receivers_rtprio": RECEIVERS_RTPRIO if receivers_rt else 0,
                               "stressors": list(stressors),
                               "load": load_counts, "transports": {}}
    for transport in lb.RECEIVERS:
        quiet = [run[transport] for run in runs["quiet"]]
        stressed = [run[transport] for run in runs["stressed"]]
        p99_ratios = [s["p99"] / q["p99"] for q, s in zip(quiet, stressed)]
        p50_ratios = [s["p50"] / q["p50"] for q, s in zip(quiet, stressed)]
        worst = max(s["max"] for s in stressed)
        summary["transports"][transport] = {
            kind: {f: statistics.median(r[f] for r in per_run) for f in ("p50", "p99", "max")}
            | {"over_goal": sum(r["over_goal"] for r in per_run), "max_of_runs":
               max(r["max"] for r in per_run)}
            for kind, per_run in (("quiet", quiet), ("stressed", stressed))
        } | {"p99_ratio": statistics.median(p99_ratios), "p99_ratios": p99_ratios,
             "p50_ratio": statistics.median(p50_ratios),
             "p99_met": statistics.median(p99_ratios) <= GOAL_P99_RATIO,
             "max_met": worst <= GOAL_MAX_MS}
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    print(f"card frame on the pty -> card_dealt: {summary['cards']} cards a run, "
          f"{summary['repeat']} quiet and {summary['repeat']} stressed runs, alternated; "
          f"stressed: {','.join(summary['stressors'])}; daemon at nice "
          f"{summary['daemon_nice']}, real-time grant {summary['daemon_rtprio'] or 'none'}; "
          f"receivers at real-time {summary['receivers_rtprio'] or 'no'}; "
          f"ms, median of the runs' figures (max: of all runs)")
    for load in summary["load"]:
        if load:
            print("  load: " + ", ".join(f"{k} {v}" for k, v in load.items()))
    print(f"{'':<16}{'p50':>8}{'p99':>8}{'max':>8}{'> 20 ms':>9}")
    for transport, f in summary["transports"].items():
        for kind in ("quiet", "stressed"):
            k = f[kind]
            print(f"{transport.upper() + ' ' + kind:<16}{k['p50']:>8.2f}{k['p99']:>8.2f}"
                  f"{k['max_of_runs']:>8.2f}{k['over_goal']:>9}")
        print(f"{transport.upper()} stressed/quiet: p50 x{f['p50_ratio']:.2f}, p99 "
              f"x{f['p99_ratio']:.2f} (runs " + ", ".join(f"x{r:.2f}" for r in f['p99_ratios'])
              + f"; goal <= x{GOAL_P99_RATIO}: {'met' if f['p99_met'] else 'NOT met'}); "
              f"stressed max {f['stressed']['max_of_runs']:.1f} ms (goal <= {GOAL_MAX_MS:g} ms: "
              f"{'met' if f['max_met'] else 'NOT met'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds (13 cards each) per run")
    parser.add_argument("--repeat", type=int, default=3,
                        help="pairs of runs, quiet and stressed (default 3)")
    parser.add_argument("--state-dir", default=None, help="work directory (default: temporary)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
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
    unit = lb.unit_priority()
    priority = lb.UnitPriority(unit.nice if args.daemon_nice is None else args.daemon_nice,
                               unit.rtprio if args.daemon_rtprio is None else args.daemon_rtprio)
    summary = measure(args.rounds, max(1, args.repeat), args.state_dir, stressors, priority,
                      not args.receivers_normal)
    print_summary(summary)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
