"""Real backends on loopback for the tests and the soak: a webhook server, a mosquitto broker
and a TCP relay that can be cut. No pytest here: bench/ imports this too (the fixtures that
wrap these are in tests/conftest.py).

``WebhookBackend`` is a threading ``http.server`` that checks each request with the backend
verifier published in docs/durability.md (signature and time window), records every event it
accepts (in arrival order), counts repeats, and stores each event once as that verifier's
de-duplication says, keeping the ids it reports as repeated with another body. It can be told to
answer with a status, drop connections, stall, or go away entirely (connection refused) and
come back on the same port.

Each ``WebhookBackend`` listens on a path of its own (``/events/<random token>``) and answers
any other path 404 without recording it (``strays`` counts them). The port is the kernel's
pick and is handed out again once freed: a table of an earlier test (or another checkout's
run on the same machine) whose outbox still retries its old URL, with the same table id and
test secret, would otherwise land its events here, and same ids with other bodies look
exactly like a table re-issuing ids.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from controller.durability.delivery.held import held_of

MOSQUITTO = os.environ.get("MOSQUITTO", "/usr/sbin/mosquitto")
STUDIO_BROKER_CONF = Path(__file__).resolve().parents[1] / "config" / "mosquitto" / "pokdeng.conf"
STUDIO_BROKER_ACL = STUDIO_BROKER_CONF.with_name("pokdeng.acl")
#: directives of the studio's broker config that a test broker sets itself (where it listens,
#: its files, its log, who may log in)
_TEST_BROKER_OWNS = {"listener", "certfile", "keyfile", "cafile", "require_certificate",
                     "allow_anonymous", "password_file", "acl_file", "persistence",
                     "persistence_location", "log_dest", "log_type", "connection_messages",
                     "user", "pid_file", "use_username_as_clientid"}
DURABILITY_DOC = Path(__file__).resolve().parents[1] / "docs" / "durability.md"
VERIFIER_HEADING = "### Signing, and what a backend checks"
BACKEND_DOC = Path(__file__).resolve().parents[1] / "docs" / "backend.md"
RECEIVER_HEADING = "### The in-order receiver"
SCHEMAS_HEADING = "### Loading the schemas"


def _documented_code(doc: Path, heading: str) -> SimpleNamespace:
    """The first Python block under ``heading`` in ``doc``, run: its names."""
    text = doc.read_text(encoding="utf-8")
    _, found, section = text.partition(heading)
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert found and block, f"no Python block under {heading!r} in {doc}"
    namespace: dict[str, Any] = {}
    exec(compile(block.group(1), f"{doc} ({heading})", "exec"), namespace)
    return SimpleNamespace(**namespace)


@functools.cache
def documented_verifier() -> SimpleNamespace:
    """The backend verifier of docs/durability.md, run from the Markdown itself: its
    ``signature_ok``, ``new_events`` and ``WINDOW_S``."""
    return _documented_code(DURABILITY_DOC, VERIFIER_HEADING)


@functools.cache
def documented_receiver() -> SimpleNamespace:
    """The in-order receiver of docs/backend.md, run from the Markdown: ``InOrder``."""
    return _documented_code(BACKEND_DOC, RECEIVER_HEADING)


@functools.cache
def documented_schema_loader() -> SimpleNamespace:
    """The contract's schema loader of docs/backend.md, run from the Markdown:
    ``schema_files``, ``schema_registry``, ``validator``."""
    return _documented_code(BACKEND_DOC, SCHEMAS_HEADING)


class WebhookBackend:
    def __init__(self, secret: bytes, port: int = 0):
        self.secret = secret
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []       # every accepted event, repeats included
        self.stored: list[dict[str, Any]] = []       # each event once, in first-seen order
        self.seen: dict[str, str] = {}                # stored id -> its canonical body
        self.conflicts: list[str] = []                # ids that came back with another body
        self.requests = 0
        self.strays = 0                               # requests for another backend's path
        self.bad_signatures = 0
        self.foreign = 0                              # batches with another table's events
        self.truncated = 0                            # requests cut short by a dying client
        self.idempotency_keys: list[str] = []
        self.fail_with: list[int | str] = []          # next answers: status code, "drop", "stall"
        self.always: int | str | None = None          # answer every request like this
        self.stall_s = 0.0
        self.clock_offset_s = 0.0                     # how far this backend's clock is ahead
        self.reply_extra: dict[str, Any] = {}         # added once to the next 200 reply's body
        self.replies_extra: list[dict[str, Any]] = []  # then one each to the next 200 replies
        self.last_request: tuple[dict[str, str], bytes] | None = None  # headers, body
        self.received = threading.Condition(self.lock)
        self._server: ThreadingHTTPServer | None = None
        self.port = port
        self.path = f"/events/{secrets.token_hex(8)}"  # this backend's own; see the module doc
        self.up()

    # -- control ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def up(self) -> None:
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The reply goes out in two writes; with Nagle on, the second waits ~40 ms for the
            # client's delayed ACK. Backends set TCP_NODELAY; so does this one.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                backend._handle(self)

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def down(self) -> None:
        """Stop listening: clients get connection refused."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def unique_ids(self) -> list[str]:
        with self.lock:
            return [e["id"] for e in self.stored]

    def repeats(self) -> int:
        with self.lock:
            return len(self.events) - len({e["id"] for e in self.events})

    def wait_for_seq(self, seq: int, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.received:
            while not any(e["seq"] >= seq for e in self.events):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.received.wait(left)
            return True

    # -- serving ------------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", "0"))
        body = handler.rfile.read(length)
        if len(body) < length:  # the client died mid-request: nothing to answer
            handler.close_connection = True
            with self.lock:
                self.truncated += 1
            return
        if handler.path != self.path:  # a table that was sending to an earlier backend
            with self.lock:
                self.strays += 1
            self._reply(handler, 404, b'{"error":"not this backend"}')
            return
        with self.lock:
            self.requests += 1
            self.last_request = (dict(handler.headers), body)
            action = self.fail_with.pop(0) if self.fail_with else self.always
        if action == "drop":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if action == "stall":
            time.sleep(self.stall_s)
            action = None
        if isinstance(action, int):
            self._reply(handler, action, b'{"error":"told to fail"}',
                        {"Retry-After": "0"} if action in (429, 503) else {})
            return
        if not documented_verifier().signature_ok(
                self.secret, handler.headers.get("X-Pokdeng-Timestamp", ""),
                handler.headers.get("X-Pokdeng-Signature", ""), body,
                time.time() + self.clock_offset_s):
            with self.lock:
                self.bad_signatures += 1
            self._reply(handler, 401, b'{"error":"bad signature"}')
            return
        batch = json.loads(body)
        if documented_verifier().foreign_events(batch["events"],
                                                handler.headers.get("X-Pokdeng-Table", "")):
            with self.lock:
                self.foreign += 1
            self._reply(handler, 403, b'{"error":"events of another table"}')
            return
        with self.received:
            self.idempotency_keys.append(handler.headers.get("Idempotency-Key", ""))
            self.events += batch["events"]
            fresh, conflicts = documented_verifier().new_events(batch["events"], self.seen)
            self.stored += fresh
            self.conflicts += conflicts
            self.received.notify_all()
            extra, self.reply_extra = self.reply_extra, {}
            if not extra and self.replies_extra:
                extra = self.replies_extra.pop(0)
            table = handler.headers.get("X-Pokdeng-Table", "")
            held = held_of([e for e in self.stored if e.get("table") == table])
        self._reply(handler, 200, json.dumps({"ok": True, "held": held, **extra}).encode())

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, status: int, body: bytes,
               headers: dict[str, str] | None = None) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:  # the client gave up (timeout test): it will retry
            handler.close_connection = True



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificate(folder: Path, address: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for ``address``/localhost: (cert.pem, key.pem)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={address}", "-addext", f"subjectAltName=IP:{address},DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True)
    return cert, key


def studio_broker_settings() -> list[str]:
    """The studio's broker settings (config/mosquitto/pokdeng.conf) a test broker keeps."""
    kept = []
    for line in STUDIO_BROKER_CONF.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and line.split()[0] not in _TEST_BROKER_OWNS:
            kept.append(line)
    return kept


class Mosquitto:
    """A mosquitto broker on a free loopback port (or the given loopback address and port),
    configured as the studio's (config/mosquitto/pokdeng.conf) with its own listener, files
    and log; optionally with users (a password file made by mosquitto_passwd), the studio's
    ACL (``acl=True``), TLS (certfile/keyfile), or persistence off (``persistence=False``: a
    restart forgets every session and queued message)."""

    def __init__(self, workdir: Path, users: dict[str, str] | None = None,
                 tls: tuple[Path, Path] | None = None, host: str = "127.0.0.1",
                 port: int | None = None, persistence: bool = True, acl: bool = False):
        self.host = host
        self.port = port or free_port()
        self.config = workdir / "mosquitto.conf"
        lines = [f"listener {self.port} {host}", *studio_broker_settings(),
                 f"persistence {'true' if persistence else 'false'}",
                 f"persistence_location {workdir}/", "log_dest stderr",
                 "log_type error", "log_type warning", "user root"]
        if acl:
            lines.append(f"acl_file {self._studio_acl(workdir, users or {})}")
        if users:
            passwords = workdir / "mosquitto.passwd"
            passwords.touch()
            for user, password in users.items():
                subprocess.run(["mosquitto_passwd", "-b", str(passwords), user, password],
                               check=True, capture_output=True)
            # as the studio's: a login is its client id (tests without users stay anonymous)
            lines += ["allow_anonymous false", f"password_file {passwords}",
                      "use_username_as_clientid true"]
        else:
            lines.append("allow_anonymous true")
        if tls:
            lines += [f"certfile {tls[0]}", f"keyfile {tls[1]}"]
        self.config.write_text("\n".join(lines) + "\n")
        self.log = workdir / "mosquitto.log"
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def _studio_acl(workdir: Path, users: dict[str, str]) -> Path:
        """The studio's ACL with each ``<table>-health`` user's two lines appended, as
        config/mosquitto/pokdeng.acl tells a studio to."""
        acl = workdir / "pokdeng.acl"
        lines = [STUDIO_BROKER_ACL.read_text()]
        for user in users:
            if user.endswith("-health"):
                lines.append(f"user {user}\ntopic write pokdeng/{user[:-len('-health')]}/health\n")
        acl.write_text("\n".join(lines))
        return acl

    def start(self) -> None:
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.config)],
                                     stdout=subprocess.DEVNULL, stderr=self.log.open("ab"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.host, self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mosquitto exited: {self.log.read_text()}") from None
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start listening within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def mosquitto_missing() -> str | None:
    """Why no broker can be started here, or None when the mosquitto binary is installed."""
    if os.path.exists(MOSQUITTO) and os.access(MOSQUITTO, os.X_OK):
        return None
    return (f"mosquitto broker not installed ({MOSQUITTO} missing; "
            "apt-get install mosquitto — CI installs it)")


class TcpRelay:
    """A loopback TCP forwarder that a test can hold (the path goes silent: nothing is
    forwarded either way, nothing is closed), cut (connections dropped, port refused) and
    restore on the same port: a network outage between a client and a live server."""

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.port = free_port()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._flowing = threading.Event()
        self.restore()

    def hold(self) -> None:
        """Stop forwarding: what either side sends from now on waits in the relay, and goes
        nowhere if the relay is then cut."""
        self._flowing.clear()

    def restore(self) -> None:
        self._flowing.set()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            doomed, self._sockets = self._sockets + [self._listener], []
            self._listener = None
        for s in doomed:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self._flowing.wait()
                if source not in self._sockets:
                    break  # cut while held: what it sent is lost with the connection
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class MqttReceiver:
    """A game backend on MQTT as docs/backend.md asks: a persistent MQTT 5 session (fixed
    client id, clean_start false, a session expiry), QoS 1, and the documented in-order
    receiver, which asks the table to resend when it reconnects without its session or sees
    a gap. ``stored`` holds each event once, in seq order; ``payloads`` every message as it
    came (repeats included); ``asked`` the resend requests it made."""

    def __init__(self, port: int, table: str, prefix: str = "pokdeng", host: str = "127.0.0.1",
                 client_id: str = "backend-receiver", session_expiry_s: int = 3600,
                 login: tuple[str, str] | None = None, tell_held: bool = True):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self._mqtt = mqtt
        self.host, self.port = host, port
        self.events_topic = f"{prefix}/{table}/events"
        self.resend_topic = f"{prefix}/{table}/resend"
        self.held_topic = f"{prefix}/{table}/held"
        self.tell_held = tell_held  # publish where we stand (docs/backend.md), retained
        self._held_moved = False
        self.client_id = client_id
        self.session_expiry_s = session_expiry_s
        self.login = login
        self.in_order = documented_receiver().InOrder()
        self.stored: list[dict[str, Any]] = []
        self.payloads: list[bytes] = []
        self.asked: list[int] = []
        self.sessions: list[bool] = []  # session_present of each connect
        self.changed = threading.Condition()
        self._version = CallbackAPIVersion.VERSION2
        self.client: Any = None
        self._stop_timer = threading.Event()

    def connect(self) -> None:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        mqtt = self._mqtt
        client = mqtt.Client(self._version, client_id=self.client_id, protocol=mqtt.MQTTv5)
        client.on_connect = self._on_connect
        client.on_message = self._on_message
        if self.login:
            client.username_pw_set(*self.login)
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = self.session_expiry_s
        client.connect(self.host, self.port, clean_start=False, properties=properties)
        client.loop_start()
        self.client = client
        self._stop_timer = threading.Event()
        threading.Thread(target=self._timer, args=(client, self._stop_timer),
                         daemon=True).start()

    def disconnect(self) -> None:
        """Go away, keeping the session on the broker (it queues for us)."""
        if self.client is not None:
            self._stop_timer.set()
            self.client.disconnect()
            self.client.loop_stop()
            self.client = None

    def arrivals(self) -> str:
        """The seqs of every message as it came, in runs: "1-99 97-224 241-260 225-240"."""
        with self.changed:
            seqs = [json.loads(payload)["seq"] for payload in self.payloads]
        runs: list[list[int]] = []
        for seq in seqs:
            if runs and seq == runs[-1][1] + 1:
                runs[-1][1] = seq
            else:
                runs.append([seq, seq])
        return " ".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)

    def _timer(self, client: Any, stop: threading.Event) -> None:
        """The documented receiver's timer: ask again while a gap stays open."""
        while not stop.wait(0.5):
            with self.changed:
                ask = self.in_order.due(time.monotonic())
            self._ask(client, ask)
            if self._held_moved:
                self._tell_held(client)

    close = disconnect

    def _ask(self, client: Any, from_seq: int | None) -> None:
        if from_seq is not None:
            self.asked.append(from_seq)
            client.publish(self.resend_topic, json.dumps({"from_seq": from_seq}), qos=1)

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason_code: Any,
                    properties: Any) -> None:
        if reason_code.is_failure:
            return
        present = bool(flags.session_present)
        with self.changed:
            self.sessions.append(present)
            self.changed.notify_all()
        if not present:  # a new session: subscribe (again)
            client.subscribe(self.events_topic, qos=1)
        self._ask(client, self.in_order.connected(present, time.monotonic()))
        self._tell_held(client)

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        event = json.loads(message.payload)
        with self.changed:
            self.payloads.append(bytes(message.payload))
            now_stored, ask = self.in_order.accept(event, time.monotonic())
            self.stored += now_stored
            self.changed.notify_all()
        self._ask(client, ask)
        if now_stored:
            self._held_moved = True  # told from the timer: at most twice a second

    def _tell_held(self, client: Any) -> None:
        """Where we stand, retained for the table (docs/backend.md)."""
        if not self.tell_held:
            return
        with self.changed:
            self._held_moved = False
            held = self.in_order.held()
        client.publish(self.held_topic, json.dumps(held), qos=1, retain=True)
