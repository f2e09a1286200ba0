"""The soak's options, figures and process samples."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLE = "SOAK"
DECKS = 8
ROUND_STATES = ("betting", "dealing", "revealing")
# Fault kinds thrown during rounds; "sigkill" is scheduled separately (a few, early).
ROUND_FAULTS = ("supervisor_pause", "switch_pause", "cancel_round", "misread", "shoe_unplug",
                "panel_unplug", "garbage", "http_503", "http_down", "mqtt_cut")
FAULT_KINDS = ROUND_FAULTS + ("sigkill",)
STEP_TIMEOUT_S = 30.0     # real seconds the daemon may take to react to one action

class SoakFailure(Exception):
    """The soak could not go on (the daemon stopped reacting, a device never came back…)."""


@dataclass
class SoakOptions:
    shoes: int = 3
    seed: int = 1
    clock_speed: float = 10.0
    fault_rate: float = 0.2          # chance per round of one random fault
    kills: int = 3                   # SIGKILL restarts, all before the end of shoe rss_from
    rss_from: int = 20               # the RSS/thread/fd reference shoe (clamped to shoes - 1)
    workdir: str | None = None
    verbose: bool = False


@dataclass
class ProcSample:
    shoe: int
    pid: int
    rss_kb: int
    threads: int
    fds: int
    cpu_s: float
    fd_targets: list[str] = field(default_factory=list)


@dataclass
class SoakResult:
    shoes: int = 0
    rounds: int = 0
    cancelled: int = 0
    events: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    pause_codes: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    duration_s: float = 0.0
    samples: list[ProcSample] = field(default_factory=list)
    reference: ProcSample | None = None
    final: ProcSample | None = None
    http_repeats: int = 0
    mqtt_repeats: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def figures(self) -> dict[str, Any]:
        ref, fin = self.reference, self.final
        growth = (100.0 * (fin.rss_kb - ref.rss_kb) / ref.rss_kb) if ref and fin else None
        return {
            "shoes": self.shoes, "rounds": self.rounds, "rounds_cancelled": self.cancelled,
            "events": self.events, "faults_injected": dict(sorted(self.faults.items())),
            "pauses_by_code": dict(sorted(self.pause_codes.items())),
            "restarts": self.restarts, "duration_s": round(self.duration_s, 1),
            "reference_shoe": ref.shoe if ref else None,
            "rss_kb_reference": ref.rss_kb if ref else None,
            "rss_kb_last": fin.rss_kb if fin else None,
            "rss_growth_pct": round(growth, 2) if growth is not None else None,
            "threads_reference": ref.threads if ref else None,
            "threads_last": fin.threads if fin else None,
            "fds_reference": ref.fds if ref else None, "fds_last": fin.fds if fin else None,
            "daemon_cpu_s_last_stretch": round(fin.cpu_s - ref.cpu_s, 1) if ref and fin else None,
            "http_repeats": self.http_repeats, "mqtt_repeats": self.mqtt_repeats,
            "ok": self.ok, "problems": self.problems,
        }



def proc_sample(pid: int, shoe: int) -> ProcSample:
    status_lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status_lines if ":" in line)
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed while we looked
    return ProcSample(shoe=shoe, pid=pid, rss_kb=int(fields["VmRSS"].split()[0]),
                      threads=int(fields["Threads"]), fds=len(targets), cpu_s=cpu,
                      fd_targets=sorted(targets))



def print_figures(result: SoakResult, out: Any = sys.stdout) -> None:
    figures = result.figures()
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        if key == "problems":
            continue
        out.write(f"{key:<{width}}  {value}\n")
    for problem in result.problems:
        out.write(f"PROBLEM: {problem}\n")
    out.write("soak: OK\n" if result.ok else "soak: FAILED\n")
