"""Soak: the real daemon plays many whole shoes at full speed while faults are thrown at it.

    python -m bench.soak --shoes 200  # the long soak (docs/soak.md has its figures)
    python -m bench.soak --shoes 3    # the short one CI runs (tests/commands/test_soak.py)

What runs: ``python -m controller run --config <generated yaml> --clock-speed X`` as a
subprocess (table time X times faster: the 1 s betting window closes in 1/X s); the shoe is a
``ShoeSimulator`` (Bee-Tek frames) on a pty, the panel a serial line panel on a pty (this
harness writes the button and key-switch lines); events go to a real HTTP webhook on loopback
(HMAC-checked, counting repeats) and to a real mosquitto on a free loopback port, reached
through a TCP relay the harness can cut. A subscriber reads the broker directly.

This harness is the dealer (follows the daemon's sealed status from ``watch``: new shoe, flip
card and burns, start round, deal the shoe's cards in order, cut card where it lies) and the
supervisor (resumes, enters misread cards, turns the key back), and injects faults at random
rounds (seeded): supervisor pause, key-switch pause, cancel round, misread fixed with
``enter-card``, shoe unplug, panel unplug, garbage on the shoe line, HTTP 503 spell, HTTP
server gone (connection refused), MQTT relay cut, SIGKILL of the daemon and restart. Every
kind happens at least once in the first shoe. The SIGKILLs fall before the end of shoe
``--rss-from`` (default 20), so RSS, threads and fds are compared over a stretch with no
restart: from the end of that shoe to the end of the last one.

At the end it checks, and exits 1 when any fails:

- each ``round_result`` equals ``controller.rules.hands.round_result_data`` on the cards this
  harness actually sent (or entered) for each position of that round, and names those same cards;
- each backend (HTTP, MQTT) received every journaled event, first copies in seq order, no id
  missing, repeats identical to the first copy;
- ``journal verify`` passes;
- RSS grew less than 10 % and threads and fds did not grow between the two samples.

``run_soak(options) -> SoakResult`` is the same as a function (tests, ``pokdeng-table bench``).

The parts: ``results`` (options, figures, process samples), ``devices`` (the panel pty, the
MQTT subscriber, the status watch), ``harness`` (the dealer: set-up, the loop, dealing),
``faults`` (the fault injector and its outages), ``supervisor`` (resumes, enter-card, the key
switch), ``checks`` (delivery, round results, footprint), ``cli`` (the command line).
"""

from __future__ import annotations

from bench.soak.checks import check_delivery, check_round
from bench.soak.harness import Soak, run_soak
from bench.soak.results import (
                                FAULT_KINDS,
                                ROUND_FAULTS,
                                SoakFailure,
                                SoakOptions,
                                SoakResult,
                                print_figures,
)

__all__ = ["FAULT_KINDS", "ROUND_FAULTS", "Soak", "SoakFailure", "SoakOptions", "SoakResult",
           "check_delivery", "check_round", "print_figures", "run_soak"]
