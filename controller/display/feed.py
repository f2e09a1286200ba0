"""The display's feed: published events and the status in, messages to every page out.

Nothing here can slow the table:

* the owner thread only *offers* (``offer_events``, and the status board's change callback
  ``status_changed``): an append to a deque and an ``Event.set()``, never a wait; were the
  feed ever ``INBOX_BATCHES`` behind, the owner stops queueing and the feed rebuilds from the
  history (the journal) instead;
* one feed thread turns events and status into messages (``controller/display/screen.py``)
  and puts each into every page's bounded queue without waiting; a page whose queue is full
  (a stuck browser) is dropped. It starts ``SETTLE_S`` after a change, once the card that
  made it is on its way to the backends.

A page is sent the whole screen when it connects (``state``), then ``status``, ``results`` and
``roadmap`` as they change, and the status again every ``HEARTBEAT_S`` of quiet: the page
notices a dead link when that heartbeat stops.

Two audiences read the feed: the dealer's screen (``/events``) and the players' pages, the
scoreboard and the stream overlay (``/players/events``). The players' status is its own,
smaller message (``controller/display/players.py``): no fault code, no person, no device, so
what a stream shows cannot carry what it must not even by mistake.

Each message is encoded once and the same bytes go to every page: a change is one ``status``
encoding however many pages are open, and the whole screen (``/state.json``, a new page's
``state``) one encoding per change of it, made by its first reader (``encodings`` counts them).

A restarted daemon is caught up from the journal's events of the current shoe (``history``),
then from the live ones.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from controller.display.players import last_result_hold, players_view, players_words
from controller.display.screen import Screen, target_order
from controller.display.studio import StudioSettings
from controller.display.words import CATALOGUE, LANGUAGES, RTL

log = structlog.get_logger("pokdeng.display")

HEARTBEAT_S = 5.0          # the status is re-sent after this much quiet: the page's keep-alive
HEALTH_POLL_S = 2.0        # how often the backends' backlog is read
CLIENT_QUEUE = 64          # messages a page may be behind before it is dropped
RETRY_MS = 1000            # EventSource reconnects after this
INBOX_BATCHES = 10_000     # event batches the feed may be behind before it rebuilds instead
#: the feed waits this long after a change before it renders: the card that made it reaches
#: the backends first (the render and every page's write would compete with its sending for
#: the interpreter), and a burst of changes is one message
SETTLE_S = 0.02

#: who reads a stream: the dealer's screen, or the players' pages (scoreboard, overlay)
DEALER, PLAYERS = "dealer", "players"
AUDIENCES = (DEALER, PLAYERS)

#: (version, sealed status as of now) — the status board's ``versioned_snapshot``
SnapshotSource = Callable[[], tuple[int, dict[str, Any]]]


def sse(event: str, data: Any) -> bytes:
    """One Server-Sent Events message (JSON data on one line)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class Stream:
    """One SSE client: a bounded queue of messages; None tells its thread to end."""

    def __init__(self, audience: str = DEALER) -> None:
        self.audience = audience
        self.queue: queue.Queue[bytes | None] = queue.Queue(CLIENT_QUEUE)
        self.dropped = False

    def offer(self, message: bytes) -> bool:
        try:
            self.queue.put_nowait(message)
            return True
        except queue.Full:
            self.dropped = True
            return False

    def end(self) -> None:
        try:
            self.queue.put_nowait(None)
        except queue.Full:
            self.dropped = True  # its thread sees it at the next timeout


class DisplayFeed:
    """The screens' messages and the pages that receive them; ``start()``, ``close()``."""

    def __init__(self, snapshot: SnapshotSource, *, max_streams: int, rate: float = 1.0,
                 history: Callable[[], list[dict[str, Any]]] | None = None,
                 backends: Callable[[], Mapping[str, Any]] | None = None,
                 live: Callable[[], bool] | None = None, settle_s: float = SETTLE_S,
                 studio: StudioSettings | None = None):
        self.max_streams = max_streams
        #: how long after a change it renders (a screen process, whose daemon already waited
        #: ``SETTLE_S`` before it sent the change, waits only for the rest of that write)
        self.settle_s = settle_s
        #: whether the table is heard from (a screen process asks its daemon's feed): while
        #: not, no heartbeat is sent and no page is taken, so a page sees a frozen table as a
        #: lost link, as it would if the table served it itself
        self.live: Callable[[], bool] = live or (lambda: True)
        self._snapshot_source = snapshot
        self._rate = rate  # real seconds per table second (the demo runs faster)
        self._history = history
        self._backends_source = backends
        self._backends: Mapping[str, Any] = {}
        #: the table's language (``display.language``); a page may ask for another (``?lang=``)
        self.language = "en"
        self._studio = studio or StudioSettings()
        self._screen = Screen(self._studio.zone())
        #: event batches; None: start a new screen (``restart``) before the batches after it
        self._inbox: deque[list[dict[str, Any]] | None] = deque()
        self._resync = False
        self._wake = threading.Event()
        self._status_dirty = True
        #: when (monotonic) the shoe's last result gives way to the shuffle: a status then
        self._hold_ends: float | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()  # guards _streams and _state
        self._streams: set[Stream] = set()
        #: the whole screen per audience, as a new page is sent it first
        self._state: dict[str, dict[str, Any]] = {audience: {} for audience in AUDIENCES}
        self._state_generation = 0        # moves with every change of _state
        self._encode_lock = threading.Lock()
        self._state_encoded: dict[str, tuple[int, bytes]] = {
            audience: (-1, b"") for audience in AUDIENCES}
        self._thread: threading.Thread | None = None
        self.dropped_clients = 0
        #: encodings made, per message kind: one per change however many pages read it
        self.encodings: Counter[str] = Counter()

    # -- the owner thread's side: never waits -------------------------------------------------
    def offer_events(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        if len(self._inbox) >= INBOX_BATCHES:
            # The feed thread is far behind (it should never be): stop queueing and have it
            # rebuild from the journal, which holds every event handed over here.
            self._resync = True
        else:
            self._inbox.append(events)
        self._wake.set()

    def status_changed(self) -> None:
        self._status_dirty = True
        self._wake.set()

    def restart(self, events: list[dict[str, Any]]) -> None:
        """Forget the screen and rebuild it from ``events`` (the shoe so far), in order with
        the batches offered before and after: the screen process's catch-up, sent by the
        daemon (a feed without its own ``history``)."""
        self._inbox.append(None)
        self._inbox.append(events)
        self._wake.set()

    def backlog(self) -> int:
        """Event batches not yet taken by the feed thread."""
        return len(self._inbox)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """The whole screen as it stands (the history, then what was offered so far), then
        the feed thread: a page served from then on is shown the table, never a blank
        screen of the moment before."""
        self._render_all()
        self._catch_up()
        self._thread = threading.Thread(target=self._feed, name="display-feed", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        with self._lock:
            for stream in self._streams:
                stream.end()
        if self._thread is not None:
            self._thread.join(2.0)

    # -- the feed thread ----------------------------------------------------------------------
    def _load_history(self) -> None:
        if self._history is None:
            return
        try:
            events = self._history()
        except Exception as exc:  # a screen without history still shows the table
            log.warning("display cannot read the shoe's events; the roadmap starts empty",
                        error=str(exc))
            return
        for event in events:
            self._screen.apply(event)

    def _feed(self) -> None:
        last_status = last_health = time.monotonic()
        while not self._closed.is_set():
            timeout = min(HEARTBEAT_S, HEALTH_POLL_S)
            if self._hold_ends is not None:
                timeout = max(0.0, min(timeout, self._hold_ends - time.monotonic()))
            if self._wake.wait(timeout):
                self._closed.wait(self.settle_s)
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                last_status, last_health = self._feed_once(last_status, last_health)
            except Exception:  # the screens must outlive any one bad message
                log.exception("display feed failed; carrying on")
                self._status_dirty = True

    def _catch_up(self) -> None:
        """The shoe so far from the history, then whatever arrived live meanwhile (live events
        the history already holds are skipped by seq); the whole screen to every page."""
        self._resync = False
        if self._history is not None:  # without one, the inbox is all there is: keep it
            self._inbox.clear()
            self._screen = Screen(self._studio.zone())
            self._load_history()
        self._take_events()
        self._poll_backends()
        for messages in (self._render_results(), self._render_roadmap(), self._render_status()):
            self._broadcast(messages)

    def _feed_once(self, last_status: float, last_health: float) -> tuple[float, float]:
        now = time.monotonic()
        if self._resync:
            self._catch_up()
            return now, now
        if now - last_health >= HEALTH_POLL_S:
            last_health = now
            if self._poll_backends():
                self._status_dirty = True
        if self._hold_ends is not None and now >= self._hold_ends:
            self._status_dirty = True
        changed = self._take_events()
        if "results" in changed:
            self._broadcast(self._render_results())
        if "roadmap" in changed:
            self._broadcast(self._render_roadmap())
        quiet = now - last_status >= HEARTBEAT_S and self.live()
        if self._status_dirty or "status" in changed or quiet:
            last_status = now
            self._broadcast(self._render_status())
        return last_status, last_health

    def _take_events(self) -> set[str]:
        changed: set[str] = set()
        while self._inbox:
            batch = self._inbox.popleft()
            if batch is None:
                self._screen = Screen(self._studio.zone())
                changed |= {"results", "roadmap"}
                continue
            for event in batch:
                changed |= self._screen.apply(event)
        for problem in self._screen.problems:
            log.warning("display: roadmap refused an event", problem=problem)
        self._screen.problems.clear()
        return changed

    def _poll_backends(self) -> bool:
        if self._backends_source is None:
            return False
        try:
            backends = dict(self._backends_source())
        except Exception as exc:
            backends = {"backend": {"error": str(exc)}}
        changed = backends != self._backends
        self._backends = backends
        return changed

    def _render_status(self) -> dict[str, bytes]:
        self._status_dirty = False
        _, status = self._snapshot_source()
        view = self._screen.view(status, self._backends, self._rate)
        now = status.get("now")
        hold = last_result_hold(view, self._screen, now)
        self._hold_ends = time.monotonic() + hold * self._rate if hold > 0 else None
        return {DEALER: self._render("status", view, DEALER)[DEALER],
                PLAYERS: self._render("status", players_view(view, self._screen, now),
                                      PLAYERS)[PLAYERS]}

    def _render_results(self) -> dict[str, bytes]:
        return self._render("results", self._screen.results_message())

    def _render_roadmap(self) -> dict[str, bytes]:
        return self._render("roadmap", self._screen.roadmap_message())

    def _render(self, kind: str, data: Any, audience: str | None = None) -> dict[str, bytes]:
        """``data`` as the screen's ``kind`` now for ``audience`` (None: every audience), and
        its message per audience: encoded once, the same bytes for every page."""
        audiences = AUDIENCES if audience is None else (audience,)
        with self._lock:
            for each in audiences:
                self._state[each][kind] = data
            self._state_generation += 1
        self.encodings[kind if audience in (None, DEALER) else f"{audience}:{kind}"] += 1
        message = sse(kind, data)
        return {each: message for each in audiences}

    def _render_all(self) -> None:
        self._poll_backends()
        self._render_results()
        self._render_roadmap()
        self._render_status()
        with self._lock:
            for state in self._state.values():
                state["seats"] = target_order()
                # every language's words: the page translates (its own ?lang= or the table's)
                state["language"] = self.language
                state["languages"] = {"codes": list(LANGUAGES), "rtl": sorted(RTL)}
                state["words"] = CATALOGUE
            # limits, paytable and colours: the players' pages show them; their words only
            self._state[PLAYERS]["studio"] = self._studio.to_json()
            self._state[PLAYERS]["words"] = players_words(CATALOGUE)
            self._state_generation += 1

    def _broadcast(self, messages: Mapping[str, bytes]) -> None:
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            if not stream.offer(messages[stream.audience]):
                self._drop(stream)

    def _drop(self, stream: Stream) -> None:
        with self._lock:
            if stream not in self._streams:
                return
            self._streams.discard(stream)
            self.dropped_clients += 1
        log.warning("display client dropped: it took none of the last messages",
                    queued=CLIENT_QUEUE)

    # -- the connections' side ----------------------------------------------------------------
    def state(self, audience: str = DEALER) -> dict[str, Any]:
        """The whole screen now (``/state.json`` and the stream's first message)."""
        with self._lock:
            return dict(self._state[audience])

    def state_json(self, audience: str = DEALER) -> bytes:
        """The whole screen now, encoded: once per change of it, the same bytes for every
        reader (``/state.json`` and each new page's ``state``)."""
        return self._state_json(audience)[1]

    def _state_json(self, audience: str) -> tuple[int, bytes]:
        with self._encode_lock:  # held while encoding: readers of a new screen wait for one
            with self._lock:
                generation, state = self._state_generation, dict(self._state[audience])
            if self._state_encoded[audience][0] != generation:
                data = json.dumps(state, separators=(",", ":")).encode()
                self._state_encoded[audience] = (generation, data)
                self.encodings["state" if audience == DEALER else f"{audience}:state"] += 1
            return self._state_encoded[audience]

    def open_stream(self, audience: str = DEALER) -> Stream | None:
        """A new stream with the whole screen queued first; None when the streams are full."""
        while True:
            generation, state = self._state_json(audience)
            with self._lock:
                if len(self._streams) >= self.max_streams or self._closed.is_set():
                    return None
                if generation != self._state_generation:
                    continue  # the screen changed meanwhile: the page must start from the new
                stream = Stream(audience)
                stream.offer(f"retry: {RETRY_MS}\n\nevent: state\ndata: ".encode() + state
                             + b"\n\n")
                self._streams.add(stream)
                return stream

    def close_stream(self, stream: Stream) -> None:
        with self._lock:
            self._streams.discard(stream)

    @property
    def streams(self) -> int:
        with self._lock:
            return len(self._streams)
