"""Transports: deliver batches of journaled events to a backend.

A transport implements ``deliver(events)`` and ``close()``; the outbox owns ordering, the
delivered position, retries and backoff. ``deliver`` either returns (every event in the batch
is accepted by the backend) or raises:

- ``TransientError``: try the same events again later (network down, 5xx, timeout, 408/429);
  ``retry_after`` may carry the backend's own hint in seconds.
- ``PermanentError``: the backend refuses (4xx, bad credentials) and only a person can fix
  that; the outbox still retries (backing off to its cap), says "refused" in its status, and
  delivers nothing past it until the backend takes it.

Between deliveries ``problem()`` reports a connection the transport knows is down (status
shows it at once), and a backend may ask for events again: the transport calls
``request_resend(from_seq)`` and the outbox resends what it already delivered from there.
A transport that knows its backend is back (a connection up again) calls ``came_back()``:
the outbox retries at once instead of sleeping out its backoff.

Built-in kinds are named in ``BUILTIN`` and imported lazily (a table without MQTT never
imports paho); other packages add kinds through the ``pokdeng_table.transports`` entry points.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from controller.plugins import Registry

ENTRY_POINT_GROUP = "pokdeng_table.transports"

#: kind -> "module:TransportClass;module:SettingsClass" (entry points give the same value)
BUILTIN: dict[str, str] = {
    "http": "controller.transports.http:HttpTransport;"
            "controller.transports.http:HttpTransportSettings",
    "mqtt": "controller.transports.mqtt:MqttTransport;"
            "controller.transports.mqtt:MqttTransportSettings",
    "file": "controller.transports.file:FileSink;controller.transports.file:FileSinkSettings",
}


class TransportError(Exception):
    """Base of transport errors."""


class TransportConfigError(TransportError):
    """A transport's settings are wrong; the message names the option."""


class OptionConflict(TransportConfigError):
    """An option whose value is wrong given the others, raised by a settings dataclass's
    ``__post_init__`` so the config (which reports ``option`` under its key path) and the
    transport refuse the same combinations."""

    def __init__(self, kind: str, option: str, problem: str):
        super().__init__(f"{kind} transport: {option}: {problem}")
        self.option = option
        self.problem = problem


TRANSPORTS = Registry(ENTRY_POINT_GROUP, BUILTIN, noun="transport kind",
                      error=TransportConfigError)


class TransientError(TransportError):
    """Delivery failed for now; the same batch will be tried again."""

    #: the outbox's state word while this failure lasts
    state = "retrying"

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(TransportError):
    """Delivery cannot succeed without someone changing something (the outbox keeps trying)."""

    state = "refused"


@dataclasses.dataclass(frozen=True)
class LastEvent:
    """Where a backend that keeps the events themselves stands (the file sink): its copy of
    its last event of this table, None when it has none. Handed to ``report_held``; the
    daemon makes the position (seq and digest, docs/backend.md) from it."""

    event: dict[str, Any] | None


#: handed to ``report_held`` by a backend that could have said where it stands and did not
#: (MQTT: no retained position on the broker): not believed once anything was delivered to it
NO_POSITION: Any = object()


def _settled() -> None:
    """Nothing left to wait for: ``Transport.submit`` delivered already."""


class Transport(ABC):
    """Base of every transport. Used by one outbox thread at a time."""

    kind: str = ""
    #: most events handed to one ``deliver`` call
    batch_max: int = 100
    #: retry backoff: capped exponential with full jitter, in seconds
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    #: failing this long makes the table record the backend unreachable (an event)
    unreachable_after_s: float = 30.0
    #: batches on the way at once: the outbox hands each batch over with ``submit`` and counts
    #: it delivered when its settle call returns, oldest first
    window: int = 1

    def __init__(self, name: str | None = None):
        self.name = name or self.kind
        self._closed = False
        #: set by the outbox: wakes this transport's delivery thread
        self.wake_outbox: Callable[[], None] | None = None
        #: set by the outbox: ends its backoff after a failure (``came_back``)
        self.back_outbox: Callable[[], None] | None = None
        self._resend_lock = threading.Lock()
        self._resend_from: int | None = None
        #: set by the daemon: told where the backend stands, each time it says so
        #: (docs/backend.md, "Where the backend stands"; the raw JSON value, checked there)
        self._held_lock = threading.Lock()
        self._held_listener: Callable[[Transport, Any], None] | None = None
        self._unheard_held: tuple[Any] | None = None

    @abstractmethod
    def deliver(self, events: list[dict[str, Any]]) -> None:
        """Hand ``events`` (in seq order) to the backend; return only once it has them all."""

    def submit(self, events: list[dict[str, Any]]) -> Callable[[], None]:
        """Send ``events`` on their way without waiting for the backend; the call returned
        waits until the backend has them all (or raises as ``deliver`` does). A transport
        with a ``window`` above 1 keeps the order of what it submits; this one delivers."""
        self.deliver(events)
        return _settled

    def network_thread(self) -> threading.Thread | None:
        """A thread of the transport's own that events pass through (an MQTT client's network
        loop), else None: the delivery thread does the sending."""
        return None

    def problem(self) -> str | None:
        """What is wrong with the connection right now, or None (called from any thread)."""
        return None

    def came_back(self) -> None:
        """The backend is reachable again (any thread): the outbox retries now rather than
        at the end of its backoff, which is for failures, not for a backend that is back
        (the outbox still paces retries against a connection that keeps coming and going)."""
        if self.back_outbox is not None:
            self.back_outbox()

    def request_resend(self, from_seq: int) -> None:
        """The backend asks for the events from ``from_seq`` again (any thread); the outbox
        serves it, bounded to what it already delivered."""
        with self._resend_lock:
            if self._resend_from is None or from_seq < self._resend_from:
                self._resend_from = from_seq
        if self.wake_outbox is not None:
            self.wake_outbox()

    @property
    def held_listener(self) -> Callable[[Transport, Any], None] | None:
        return self._held_listener

    @held_listener.setter
    def held_listener(self, listener: Callable[[Transport, Any], None] | None) -> None:
        """Set by the daemon; a word that came before (an MQTT connection is up, and its
        retained position in, before the daemon listens) is handed over at once."""
        with self._held_lock:
            self._held_listener = listener
            missed, self._unheard_held = self._unheard_held, None
        if listener is not None and missed is not None:
            listener(self, missed[0])

    def report_held(self, value: Any) -> None:
        """The backend said where it stands (any thread): handed to the daemon's listener,
        or kept for it until it listens (a word said once, as a retained message, would
        otherwise be lost and the backend's events wait for ever)."""
        with self._held_lock:
            listener = self._held_listener
            if listener is None:
                self._unheard_held = (value,)
                return
        listener(self, value)

    #: whether the backend can say where it stands (``ask_held``, or unasked on connect)
    tells_held = False

    def ask_held(self) -> None:  # noqa: B027 - optional: the transports that can, ask
        """Ask the backend where it stands (the answer comes through ``report_held``); a
        failure raises as ``deliver`` does. MQTT's answer is retained: nothing to ask."""

    def take_resend_request(self) -> int | None:
        """The lowest ``from_seq`` asked for since the last call, or None."""
        with self._resend_lock:
            from_seq, self._resend_from = self._resend_from, None
        return from_seq

    def close(self) -> None:
        """Release connections; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._close()

    def _close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Subclass hook for ``close``."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def option(default: Any = dataclasses.MISSING, **rules: Any) -> Any:
    """A settings field with the rules the daemon's config reads it by.

    (See controller/service/config/settings.py.)

    The settings dataclass is the one place a transport option is declared: its name, type
    and default from the field, and here its bounds: ``minval``/``maxval``/``above`` (numbers),
    ``pattern`` with ``what``, ``choices`` (text), ``path=True`` (an absolute file path), or
    ``secret="stem"`` on the ``<stem>_file``/``<stem>_credential`` pair (the secret itself is
    never written in the config; ``required=True`` when one of the two must be given).
    Rules across options go in the dataclass's ``__post_init__``, raising ``OptionConflict``.
    """
    return dataclasses.field(default=default, metadata={"config": rules})


def read_secret(option: str, path: str | None = None, credential: str | None = None) -> bytes:
    """A secret from a file, or from systemd's ``$CREDENTIALS_DIRECTORY/<credential>``.

    The trailing newline is dropped; an empty or unreadable secret is a config error that
    names the option and the file (never the secret).
    """
    if credential:
        directory = os.environ.get("CREDENTIALS_DIRECTORY")
        if not directory:
            raise TransportConfigError(
                f"{option}: credential {credential!r} asked for but $CREDENTIALS_DIRECTORY is "
                "not set (use LoadCredential= in the unit, or a file path)")
        source = Path(directory) / credential
    elif path:
        source = Path(path)
    else:
        raise TransportConfigError(f"{option}: no secret file or credential given")
    try:
        secret = source.read_bytes().rstrip(b"\r\n")
    except OSError as exc:
        raise TransportConfigError(f"{option}: cannot read {source}: {exc.strerror}") from None
    if not secret:
        raise TransportConfigError(f"{option}: {source} is empty")
    return secret


class TransportClass(Protocol):
    """How every transport class is built: its kind's settings dataclass, the table's id."""

    def __call__(self, settings: Any, *, table: str, name: str | None = None) -> Transport: ...


def available() -> dict[str, str]:
    """Every known transport kind with its targets."""
    return TRANSPORTS.available()


def settings_class(kind: str) -> type:
    """The settings dataclass of ``kind`` (imports that transport's module)."""
    settings: type = TRANSPORTS.load(kind, 1)  # a dataclass, as dataclasses.fields will check
    return settings


def settings_from_mapping(kind: str, options: Mapping[str, Any]) -> Any:
    """Build a kind's settings dataclass from config options; unknown options are errors."""
    cls = settings_class(kind)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise TransportConfigError(
            f"{kind} transport: unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(names))}")
    try:
        return cls(**options)
    except TypeError as exc:
        raise TransportConfigError(f"{kind} transport: {exc}") from None


def create(kind: str, settings: Any, *, table: str, name: str | None = None) -> Transport:
    """A transport of ``kind`` for ``table``; ``settings`` is its dataclass or a mapping."""
    if isinstance(settings, Mapping):
        settings = settings_from_mapping(kind, settings)
    cls: TransportClass = TRANSPORTS.load(kind, 0, base=Transport)  # checked there
    return cls(settings, table=table, name=name)
