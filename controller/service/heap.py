"""The start-up's objects set aside from the garbage collector, once, before the first card.

Python's cyclic garbage collector stops every thread of the daemon while it runs, and a full
collection walks every object the process holds. Most of them were made at start-up and live
as long as the daemon: modules, classes, the config, the recovered machine. A soak of 40 shoes
(docs/benchmarks.md, "Collections in the card's process") saw the daemon's full collections
take 24-29 ms: one fell among the dealt cards after a minute, and a card in flight waits for
it, whatever its thread's priority.

So at READY, after start-up and recovery, the daemon collects once (start-up's own garbage
goes) and freezes what is left (``gc.freeze``): those objects move to a generation the
collector never walks again. A full collection later walks only what was made since: 0.5 ms
in the same soak. The price: a frozen object that later becomes part of a reference cycle is
never reclaimed. Start-up's survivors are long-lived by nature, so that is a few objects once,
not a leak that grows (the soak's RSS check covers it).
"""

from __future__ import annotations

import gc


def set_start_up_aside() -> int:
    """Collect once, then freeze every object the process holds; returns how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
