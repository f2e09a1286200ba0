"""Start-up's objects set aside from the garbage collector at READY (controller/service/heap.py):
start-up's garbage goes first, the rest is never walked again, and what is made afterwards is
still collected. In a fresh interpreter each (a freeze lasts for the process), and in a real
daemon."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import LinePanelPty, daemon_config, log_records, running_daemon

REPO = Path(__file__).resolve().parents[2]

# automatic collection off: only set_start_up_aside's own collection can free the garbage
SET_ASIDE = """
import gc, json, weakref
gc.disable()
from controller.service.heap import set_start_up_aside

class Node:
    pass

kept = [Node() for _ in range(5000)]
for a, b in zip(kept, kept[1:]):  # long-lived cycles, as start-up leaves them
    a.next, b.prev = b, a
garbage = Node(); garbage.me = garbage; startup_garbage = weakref.ref(garbage); del garbage
frozen = set_start_up_aside()
walked = {id(o) for o in gc.get_objects()}
later = Node(); later.me = later; later_garbage = weakref.ref(later); del later
gc.collect()
print(json.dumps({"frozen": frozen, "startup_garbage_gone": startup_garbage() is None,
                  "kept_walked": sum(id(n) in walked for n in kept),
                  "walked": len(walked), "later_garbage_gone": later_garbage() is None}))
"""


def test_start_up_garbage_goes_and_what_is_left_is_never_walked_again() -> None:
    done = subprocess.run([sys.executable, "-c", SET_ASIDE], capture_output=True, text=True,
                          cwd=REPO, timeout=60, check=True)
    seen = json.loads(done.stdout)
    assert seen["startup_garbage_gone"]
    assert seen["frozen"] >= 5000
    assert seen["kept_walked"] == 0  # none of start-up's survivors is walked by a collection
    assert seen["walked"] < seen["frozen"] / 4  # what is walked is what was made since
    assert seen["later_garbage_gone"]  # the collector still reclaims what comes after


@pytest.mark.slow
def test_a_daemon_sets_its_start_up_aside_before_ready(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    config = daemon_config(short_dir, short_dir / "shoe", devices[1].path)
    with running_daemon(config, short_dir, devices[1]) as (_, log):
        [ready] = log_records(log, "ready")
    # a daemon holds tens of thousands of objects after start-up (modules, config, machine)
    assert ready["objects_frozen"] > 20_000, ready
