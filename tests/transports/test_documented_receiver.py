"""docs/backend.md's in-order receiver, run from the page: what a backend does with each
event, each (re)connect and each tick of its timer."""

from __future__ import annotations

from controller.durability.delivery.held import held_of
from support.journal_helpers import event
from testkit.backends import documented_receiver


def receiver():
    return documented_receiver().InOrder()


def test_in_order_events_are_stored_and_repeats_dropped():
    r = receiver()
    assert r.accept(event(1), 0.0) == ([event(1)], None)
    assert r.accept(event(2), 0.1) == ([event(2)], None)
    assert r.accept(event(1), 0.2) == ([], None)
    assert r.due(100.0) is None  # nothing missing: the timer never asks


def test_a_gap_held_back_by_the_rate_limit_is_asked_for_by_the_timer():
    """The events after a gap all come within 5 s of the last ask and then nothing does (a
    paused table): the timer asks once the 5 s are up, not at the next event."""
    r = receiver()
    assert r.connected(False, 0.0) == 1  # a new session: ask from 1
    assert r.accept(event(1), 0.5) == ([event(1)], None)
    assert r.accept(event(3), 1.0) == ([], None)  # a gap, but asked 1 s ago: held back
    assert r.accept(event(4), 1.1) == ([], None)
    assert r.due(4.9) is None
    assert r.due(5.0) == 2  # the gap is still open: ask
    assert r.due(6.0) is None  # and not again within 5 s
    assert r.accept(event(2), 6.5) == ([event(2)], None)  # the resend
    assert r.accept(event(3), 6.5) == ([event(3)], None)
    assert r.due(20.0) == 4  # 4 came once and is still missing
    assert r.accept(event(4), 20.1) == ([event(4)], None)
    assert r.due(40.0) is None  # caught up


def test_the_first_gap_asks_at_once_and_a_session_kept_asks_nothing():
    r = receiver()
    assert r.connected(True, 0.0) is None
    assert r.accept(event(2), 0.1) == ([], 1)
    assert r.accept(event(3), 0.2) == ([], None)
    assert r.due(5.2) == 1


def test_where_the_receiver_stands_is_what_the_table_compares():
    r = receiver()
    assert r.held() == {"seq": 0}
    anchored = [{**event(seq), "anchor": {"record": 2 * seq, "hash": f"{seq:064x}"}}
                for seq in (1, 2, 3, 5)]
    for e in anchored:
        r.accept(e, 0.0)
    assert r.held() == held_of(anchored) == held_of(anchored[:3])  # 1-3: 5 waits for 4
    assert r.held()["seq"] == 3


def test_the_receivers_digest_is_the_rfc_8785_one_for_an_older_tables_15_0():
    """An older table sent ``"betting_seconds":15.0``: the page's receiver hashes its RFC 8785
    form (``15``), as a JavaScript backend does, and the table compares that digest."""
    r = receiver()
    opened = {**event(1, "round_opened", betting_seconds=15.0, last_round=False),
              "anchor": {"record": 2, "hash": "1" * 64}}
    r.accept(opened, 0.0)
    assert r.held() == held_of([opened]) == held_of([{**opened, "data": {
        "betting_seconds": 15, "last_round": False}}])
