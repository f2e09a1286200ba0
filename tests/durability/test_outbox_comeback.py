"""The outbox retries at once when its transport comes back (``Transport.came_back``), and a
transport that keeps coming back and failing is still paced by the backoff, never spun."""

from __future__ import annotations

import threading
import time

import pytest

from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.transports import TransientError, Transport
from support.journal_helpers import fill
from support.waiting import wait_until


class Switchable(Transport):
    """A backend that fails while ``down`` is set (with ``retry_after`` if given); records the
    monotonic time of every attempt and the seqs it took."""

    kind = "switchable"

    def __init__(self, initial: float, cap: float, retry_after: float | None = None):
        super().__init__("switchable")
        self.backoff_initial_s, self.backoff_max_s = initial, cap
        self.retry_after = retry_after
        self.down = threading.Event()
        self.attempts: list[float] = []
        self.delivered: list[int] = []

    def deliver(self, events):
        self.attempts.append(time.monotonic())
        if self.down.is_set():
            raise TransientError("backend down", self.retry_after)
        self.delivered += [e["seq"] for e in events]


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "journal.db")
    yield j
    j.close()


def fail_once(journal: Journal, outbox: Outbox, transport: Switchable) -> None:
    """Journal events while the backend is down; return once an attempt has failed."""
    transport.down.set()
    fill(journal, 6)
    outbox.notify()
    wait_until(lambda: outbox.status()[transport.name]["state"] == "retrying", 10,
               "a failed attempt")


def test_a_transport_that_comes_back_ends_a_long_backoff(journal):
    # Every backoff is 20 s (jitter pinned at its ceiling): only a comeback delivers in time.
    backend = Switchable(initial=20.0, cap=30.0)
    with Outbox(journal.path, [backend], rand=lambda: 1.0) as outbox:
        fail_once(journal, outbox, backend)
        backend.down.clear()
        back_at = time.monotonic()
        backend.came_back()
        assert outbox.wait_delivered(journal.last_event_seq(), 10), \
            "delivery waited out its backoff after the transport came back"
        assert time.monotonic() - back_at < 5.0
    assert backend.delivered == list(range(1, journal.last_event_seq() + 1))


def test_without_a_comeback_the_backoff_holds(journal):
    # The control: the same 20 s backoff, the backend up again but nobody says so.
    backend = Switchable(initial=20.0, cap=30.0)
    with Outbox(journal.path, [backend], rand=lambda: 1.0) as outbox:
        fail_once(journal, outbox, backend)
        backend.down.clear()
        assert not outbox.wait_delivered(journal.last_event_seq(), 1.5)
        assert len(backend.attempts) == 1


def test_a_flapping_transport_is_paced_not_spun(journal):
    """The transport says it is back every millisecond and fails every attempt: the outbox
    retries early a few times, each early retry later than the one before, then no faster
    than its backoff. Spinning would make thousands of attempts in these 3 s."""
    backend = Switchable(initial=0.05, cap=0.4)
    flapping = threading.Event()

    def flap() -> None:
        while not flapping.wait(0.001):
            backend.came_back()

    flapper = threading.Thread(target=flap, daemon=True)
    with Outbox(journal.path, [backend], rand=lambda: 1.0) as outbox:
        fail_once(journal, outbox, backend)
        started = time.monotonic()
        flapper.start()
        time.sleep(3.0)
        flapping.set()
        flapper.join(5)
        attempts = [at for at in backend.attempts if at < started + 3.0]
        backend.down.clear()
        backend.came_back()
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
    # Backoff ceilings 0.05, 0.1, 0.2, 0.4 s …; early retries after 0, 0.05, 0.1, 0.2, 0.4 s …:
    # at most 6 attempts in the first 0.4 s, then one per 0.4 s: 13 in 3 s (fewer when loaded).
    assert len(attempts) <= 14, f"{len(attempts)} attempts in 3 s: the comebacks spun it"
    gaps = [b - a for a, b in zip(attempts[6:], attempts[7:], strict=False)]
    assert gaps and min(gaps) >= 0.35, f"retries {gaps} s apart once paced at the 0.4 s cap"
    assert backend.delivered == list(range(1, journal.last_event_seq() + 1))


def test_a_comeback_does_not_cut_a_retry_after(journal):
    # The backend said "not before 2 s"; its connection coming back does not overrule that.
    backend = Switchable(initial=0.05, cap=30.0, retry_after=2.0)
    with Outbox(journal.path, [backend], rand=lambda: 0.0) as outbox:
        fail_once(journal, outbox, backend)
        failed_at = backend.attempts[0]
        backend.down.clear()
        backend.came_back()
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
    assert backend.attempts[1] - failed_at >= 1.9
