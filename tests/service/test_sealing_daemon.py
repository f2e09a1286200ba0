"""Sealing under shoe faults, end to end through the real daemon, one test per shoe protocol.

A simulated shoe on a real pty, a line panel on a pty, the daemon as a subprocess with a file
sink, JSON logs at INFO and a real NOTIFY_SOCKET. Betting is open for the whole capture (600 s):
good cards are dealt, then odd frames that each name a card of the round (damaged, split,
repeated, unknown). While betting is still open the test reads every channel that leaves the
table — events, log lines, ``STATUS=``, ``status``, ``watch``, ``roadmap``, supervisor replies,
the dealer display (its event stream, ``/state.json`` and ``/roadmap.svg``), and with a broker
the MQTT health topic and the metrics textfile — and none may name a card of the round, its tag
id or a raw frame (``tests/support/sealing.py``). Then the
supervisor cancels the round, and ``fault_detail`` events must carry what was held back.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.rules.cards import ALL_CARDS, parse_card
from controller.service.control.client import ControlClient, ControlError
from drivers.protocols.base import printable
from drivers.protocols.beetek import BeeTekEncoder
from drivers.protocols.pdt import encode_frame
from drivers.protocols.rfid import RfidEncoder, simulated_uid
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    start_daemon,
    stop_daemon,
    wait_status,
)
from support.display_helpers import SseReader, free_port, request
from support.health_helpers import HealthSubscriber
from support.sealing import Leaks, sealed_chain_hashes
from support.waiting import wait_until

FLIP, SHOE_BURNS = "5H", ("2C", "3C", "4C", "6C", "7C")  # not sealed: no round is open
DEALT = ("8D", "KD", "QS")  # the round's burn, P1, P2: sealed from here on
ENTERED = "6H"  # the supervisor enters it for the misread card


def driver_code(status: dict[str, Any]) -> str | None:
    """The driver's code in the fault the table shows (``pdt_misread`` …)."""
    return ((status.get("fault") or {}).get("detail") or {}).get("code")


def frame_text(frame: bytes) -> str:
    """A frame as a log line or reason would have quoted it (no line end)."""
    return printable(frame.strip(b"\r\n "), limit=128)


class Watcher:
    """A ``watch`` client on the control socket, collecting every snapshot it is sent."""

    def __init__(self, sock: str):
        self.messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(sock,), daemon=True)
        self._thread.start()

    def _run(self, sock: str) -> None:
        try:
            for status in ControlClient(sock).watch():
                with self._cond:
                    self.messages.append(status)
                    self._cond.notify_all()
        except (ControlError, OSError, ValueError):
            return  # the daemon went away

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool],
                 timeout: float = 10.0) -> None:
        wait_until(lambda: predicate(self.messages), timeout, "the watch to match",
                   condition=self._cond, details=lambda: f"got {len(self.messages)} messages")

    def taken(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.messages)


class Table:
    """One daemon on a simulated shoe and a line panel, and what left it."""

    def __init__(self, root: Path, protocol: str, mqtt_port: int | None = None):
        self.root = root
        # no heartbeats: the test numbers the PDT frames it writes itself, with no race
        self.shoe = ShoeSimulator(root / "shoe", protocol, heartbeat_seconds=3600).start()
        self.panel = LinePanelPty()
        options: dict[str, Any] = {"driver": protocol}
        if protocol == "rfid":
            options["registry"] = str(self.shoe.registry_path)
        if protocol == "pdt":
            options["silence_seconds"] = 0  # no heartbeats from this shoe
        self.display_port = free_port()
        self.config = daemon_config(root, root / "shoe", self.panel.path, betting_seconds=600,
                                    shoe=options,
                                    display={"listen": f"127.0.0.1:{self.display_port}"})
        #: the fleet channels: the MQTT health topic and the metrics textfile
        self.health: HealthSubscriber | None = None
        self.metrics = root / "table.prom"
        if mqtt_port is not None:
            data = yaml.safe_load(self.config.read_text())
            data["transports"]["mqtt"] = {"host": "127.0.0.1", "port": mqtt_port}
            data["metrics"] = {"textfile": str(self.metrics), "interval_s": 1}
            self.config.write_text(yaml.safe_dump(data))
            self.health = HealthSubscriber(mqtt_port)
        self.sock = str(root / "control.sock")
        self.client = ControlClient(self.sock)
        self.notify = NotifyListener(root / "notify")
        self.log = root / "daemon.log"
        self.events = root / "events.jsonl"
        self.proc = start_daemon(self.config, self.notify.path, self.log)
        self.leaks = Leaks()
        # its random name is in every path the daemon logs, and can spell a card (seal-24ju6_8d)
        self.leaks.add_known(str(root))
        #: (channel, text or JSON) captured while betting is open
        self.captured: list[tuple[str, Any]] = []
        self.watcher: Watcher | None = None
        self.screen: SseReader | None = None
        self.players: SseReader | None = None  # the scoreboard's and the overlay's feed
        self.cut: dict[str, int] = {}

    def close(self) -> None:
        for reader in (self.screen, self.players):
            if reader is not None:
                reader.close()
        stop_daemon(self.proc, signal.SIGKILL)  # a no-op once it stopped
        self.notify.close()
        if self.health is not None:
            self.health.close()
        self.shoe.close(drain_timeout=0.2)
        self.panel.close()

    def wait(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return wait_status(self.client, predicate)

    def command(self, *args: str) -> str:
        """A CLI command against this daemon; what it printed is captured."""
        result = cli(*args[:1], "--socket", self.sock, *args[1:])
        text = result.stdout + result.stderr
        self.captured.append((f"`{' '.join(args)}`", text))
        return text

    def roadmap(self) -> None:
        """``roadmap`` reads the journal, which holds the sealed cards: capture what it prints."""
        journal = str(self.root / "state" / "journal.sqlite")
        for args in ((), ("--json",), ("--svg", "-")):
            result = cli("roadmap", journal, *args)
            assert result.returncode == 0, result.stderr
            self.captured.append((f"`{' '.join(('roadmap',) + args)}`",
                                  result.stdout + result.stderr))

    def supervisor(self, *args: str) -> dict[str, Any]:
        result = cli("supervisor", "--socket", self.sock, "--json", *args)
        self.captured.append((f"`supervisor {' '.join(args)}` reply",
                              result.stdout + result.stderr))
        return json.loads(result.stdout)

    # -- the round ------------------------------------------------------------------------------
    def open_betting(self) -> None:
        """New shoe, flip card and burns, start_round, then the round's first cards."""
        self.notify.wait_for("READY", "1")
        self.panel.wait_connected()
        self.wait(lambda s: s["devices"].get("shoe") is True)
        self.panel.send("new_shoe")
        self.wait(lambda s: s["state"] == "awaiting_flip")
        for card in (FLIP, *SHOE_BURNS):
            self.shoe.send_card(card)
        self.wait(lambda s: s["state"] == "ready")
        self.watcher = Watcher(self.sock)
        self.screen = SseReader(self.display_port)
        self.players = SseReader(self.display_port, "/players/events")
        self.panel.send("start_round")
        self.wait(lambda s: s["state"] == "betting" and s["betting_open"])
        for card in DEALT:
            self.leaks.add_card(card)
            self.shoe.send_card(card)
        self.wait(lambda s: s["cards_dealt"] == len(DEALT))

    def supervise_while_open(self) -> None:
        """The table is paused with a misread card owed; betting is open. Read every channel
        and make the supervisor calls whose answers could echo something."""
        self.wait(lambda s: s["paused"] and s["card_owed"] and s["betting_open"])
        status = self.client.status()
        # the search covers the whole status, the fields added for people and fleets too
        # (``device_problems``, ``last_actions``, ``chain``, the journal's and storage's state)
        assert {"device_problems", "last_actions", "chain", "journal", "storage_fault",
                "held_inputs", "dropped_inputs", "language"} <= set(status), sorted(status)
        self.captured.append(("status on the socket", status))
        # the display shows the driver's fault (its process may be a moment behind the table)
        assert self.screen is not None
        self.screen.wait_status(lambda v: (v.get("banner") or {}).get("detail_code"))
        self.command("status")
        self.command("status", "--json")
        self.command("watch", "--once")
        self.roadmap()
        refused = self.supervisor("resume")
        assert refused["ok"] is False and "misread card" in refused["error"]
        dealt = self.client.status()["cards_dealt"]
        self.leaks.add_card(ENTERED)
        entered = self.supervisor("enter-card", ENTERED)
        assert entered["ok"] is True, entered
        self.wait(lambda s: s["cards_dealt"] == dealt + 1 and not s["paused"])
        assert self.supervisor("pause")["ok"] is True
        status = self.wait(lambda s: s["paused"] and s["betting_open"])
        self.captured.append(("status on the socket", status))
        self.command("status")
        self.command("watch", "--once")
        assert self.watcher is not None
        self.watcher.wait_for(lambda msgs: len(msgs) >= 5 and any(m["paused"] for m in msgs))
        assert self.screen is not None
        self.screen.wait_status(lambda v: (v["banner"] or {}).get("code") == "supervisor_pause")
        assert self.players is not None
        self.players.wait_status(lambda v: (v["notice"] or {}).get("key") == "notice.paused")
        for path in ("/state.json", "/roadmap.svg", "/", "/players/state.json", "/scoreboard",
                     "/overlay"):
            self.captured.append((f"display {path}",
                                  request(self.display_port, path)[2].decode()))

    def cancel_round(self) -> None:
        """End the capture window: note what had left the table, then cancel the round."""
        assert self.client.status()["betting_open"], "betting closed before the capture ended"
        assert self.watcher is not None
        assert self.screen is not None
        assert self.players is not None
        self.cut = {"notify": len(self.notify.messages), "watch": len(self.watcher.taken()),
                    "screen": len(self.screen.raw), "players": len(self.players.raw)}
        if self.health is not None:
            self.health.wait_for(lambda m: m["paused"] and m["state"] == "betting")
            self.cut["health"] = len(self.health.texts)
            # the write after the pause, not the first one (which names the gauge already)
            wait_until(lambda: re.search(r"^pokdeng_table_paused\{[^}]*\} 1\.0$",
                                         self._metrics_text(), re.MULTILINE), 10,
                       "the metrics textfile to show the table paused")
            self.captured.append(("metrics textfile", self._metrics_text()))
        answer = self.supervisor("cancel-round")
        self.captured.pop()  # its reply comes after the round is cancelled
        assert answer["ok"] is True and "round_cancelled" in answer["events"], answer

    def _metrics_text(self) -> str:
        return self.metrics.read_text() if self.metrics.exists() else ""

    # -- what left the table --------------------------------------------------------------------
    def delivered_events(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The event sink's events and lines, once it holds every event the table has sent."""
        last = self.client.status()["seq"]
        self.wait(lambda s: s["backend"]["file"]["delivered_seq"] >= last)
        lines = self.events.read_text().splitlines()
        return [json.loads(line) for line in lines], lines

    def leaks_while_open(self, event_lines: list[str], log_lines: list[str]) -> list[str]:
        """Every channel's text from before the cancel (the sink's and the log's lines before
        it are given), searched; one finding per leak."""
        assert self.watcher is not None
        found: list[str] = []
        for line in event_lines:
            found += self.leaks.found_in("event sink", line)
        for line in log_lines:
            found += self.leaks.found_in("log", line)
        for message in self.notify.messages[:self.cut["notify"]]:
            if "STATUS" in message:
                found += self.leaks.found_in("sd_notify STATUS", message["STATUS"])
        for status in self.watcher.taken()[:self.cut["watch"]]:
            found += self.leaks.found_in("watch", status)
        assert self.screen is not None
        found += self.leaks.found_in("display stream", self.screen.raw[:self.cut["screen"]])
        assert self.players is not None
        found += self.leaks.found_in("players' stream", self.players.raw[:self.cut["players"]])
        if self.health is not None:
            for text in self.health.texts[:self.cut["health"]]:
                found += self.leaks.found_in("mqtt health topic", text)
        for channel, payload in self.captured:
            found += self.leaks.found_in(channel, payload)
        return found


@pytest.fixture
def table_for() -> Iterator[Callable[[str], Table]]:
    tables: list[Table] = []
    root = Path(tempfile.mkdtemp(prefix="seal-", dir="/tmp"))  # short socket paths

    def make(protocol: str, mqtt_port: int | None = None) -> Table:
        tables.append(Table(root, protocol, mqtt_port))
        return tables[-1]

    yield make
    for table in tables:
        table.close()
    shutil.rmtree(root, ignore_errors=True)


def run_sealed(table: Table, odd_frames: Callable[[Table], None],
               logged: tuple[str, ...]) -> list[dict[str, Any]]:
    """The whole story for one protocol: returns the fault_detail events after the cancel,
    having first failed on any leak while betting was open. ``logged``: words of the driver's
    warnings about the frames it dropped, which must be in the log before the cancel."""
    table.open_betting()
    odd_frames(table)
    table.supervise_while_open()
    table.cancel_round()
    events, event_lines = table.delivered_events()
    assert stop_daemon(table.proc) == 0
    log_lines = table.log.read_text().splitlines()
    cut = next(i for i, e in enumerate(events) if e["type"] == "round_cancelled")
    log_before = log_lines[:next(i for i, line in enumerate(log_lines)
                                 if '"round_cancelled"' in line)]

    # every channel was used while betting was open, so the search below means something
    assert any(e["type"] == "paused" and e["data"].get("detail") for e in events[:cut])
    assert any('"table paused' in line for line in log_before)
    for words in logged:
        assert any(words in line for line in log_before), f"no log line says {words!r}"
    assert any("PAUSED" in m.get("STATUS", "") for m in table.notify.messages[:table.cut["notify"]])
    assert table.screen is not None and any(  # the display showed the driver's fault
        (view.get("banner") or {}).get("detail_code")  # in a status, or a (re)connect's state
        for event, data in table.screen.taken() if event in ("status", "state")
        for view in [data.get("status") if event == "state" else data] if view)
    # a plain chain's anchors: none of a record over a sealed card left before the cancel
    table.leaks.add_hashes(sealed_chain_hashes(table.root / "state" / "journal.sqlite"))
    opened = max(i for i, e in enumerate(events[:cut]) if e["type"] == "round_opened")
    assert all("anchor" in e for e in events[:opened + 1]), "events before the window anchored"
    assert not any("anchor" in e for e in events[opened + 1:cut])
    assert "anchor" in events[cut]  # the cancel ends the window: its record may be hashed
    leaks = table.leaks_while_open(event_lines[:cut], log_before)
    channels = sorted({leak.split(" names ")[0] for leak in leaks})
    assert not leaks, f"leaking while betting is open: {', '.join(channels)}\n" + "\n".join(leaks)

    # the cancel unsealed it: the supervisor learns what the shoe sent
    details = [e["data"] for e in events[cut:] if e["type"] == "fault_detail"]
    paused = {e["seq"] for e in events[:cut] if e["type"] == "paused"}
    assert details and all(d["paused_seq"] in paused for d in details), details
    assert not any(e["type"] == "fault_detail" for e in events[:cut])
    return details


def evidence_values(details: list[dict[str, Any]], key: str) -> set[str]:
    return {d["evidence"][key] for d in details if key in d["evidence"]}


@pytest.mark.slow
def test_beetek_odd_frames_stay_sealed_until_the_round_is_cancelled(table_for) -> None:
    """A split frame, a bad byte, a damaged card code and alarms whose id reads as a card."""
    table = table_for("beetek")
    encoder = BeeTekEncoder()
    damaged, alarm, ace_alarm = b"<Card:KD?>", b"<Alarm:QH>", b"<Alarm:1S>"
    unknown = b"<Shoe:JC>"

    def odd_frames(t: Table) -> None:
        # an unfinished frame naming a card, cut short by the next (good) frame: garbage
        t.leaks.add_card("9C")
        t.leaks.add_frame("<Card:9C")
        t.shoe.send_raw(b" [Game]<Card:9C")
        t.leaks.add_card("4D")
        t.shoe.send_card("4D")
        t.wait(lambda s: s["cards_dealt"] == len(DEALT) + 1)
        # a frame with a bad byte, naming a card: a damaged frame
        bad_byte = encoder.corrupt(encoder.card("JC"))
        t.leaks.add_card("JC")
        t.leaks.add_frame(frame_text(bad_byte.split(b"]", 1)[1]))
        t.shoe.send_raw(bad_byte)
        # a card frame with a damaged code naming a dealt card: a misread, the card is owed
        t.leaks.add_frame(damaged.decode())
        t.shoe.send_raw(b" [Game]" + damaged + b" ")
        t.wait(lambda s: s["paused"] and s["card_owed"])
        # alarms whose id reads as a card (QH; 1S, the ace of spades): one fault each
        seq = t.client.status()["seq"]
        for frame, card in ((alarm, "QH"), (ace_alarm, "AS")):
            t.leaks.add_card(card)
            t.leaks.add_frame(frame.decode())
            t.shoe.send_raw(b" " + frame + b" ")
        t.wait(lambda s: s["seq"] >= seq + 2 and "beetek_alarm" in (driver_code(s) or ""))
        # the display shows the driver's fault before the next one, which has no driver code,
        # takes its place (a busy daemon sends the screens its newest status only)
        assert t.screen is not None
        t.screen.wait_status(lambda v: (v.get("banner") or {}).get("detail_code"))
        # a well-formed frame the driver does not know (a cut card the config lacks?): a pause
        t.leaks.add_frame(unknown.decode())
        t.shoe.send_raw(b" [Game]" + unknown + b" ")
        t.wait(lambda s: (s.get("fault") or {}).get("code") == "unknown_shoe_frame")

    details = run_sealed(table, odd_frames, ("unfinished beetek frame", "damaged beetek frame",
                                             "unknown beetek frame"))
    frames = evidence_values(details, "frame")
    assert {damaged.decode(), alarm.decode(), ace_alarm.decode(), unknown.decode()} <= frames, \
        details


@pytest.mark.slow
def test_rfid_odd_reads_stay_sealed_until_the_round_is_cancelled(table_for) -> None:
    """A damaged UID line, a dealt card's tag read again and a tag not in the registry."""
    table = table_for("rfid")
    encoder = RfidEncoder()
    again = simulated_uid(ALL_CARDS.index(parse_card("KD")))  # the tag of the P1 card, copy 0
    unknown = RfidEncoder.UNKNOWN_UID

    def odd_frames(t: Table) -> None:
        # a damaged line that still carries a whole tag id (JC's): not a UID
        jc = simulated_uid(ALL_CARDS.index(parse_card("JC")))
        damaged = jc.encode() + b"\xa7\r\n"
        t.leaks.add_card("JC")
        t.leaks.add_tag(jc)
        t.leaks.add_frame(frame_text(damaged))
        t.shoe.send_raw(damaged)
        # the tag of a card already dealt, read again: a misread, the card is owed
        for uid in (again, unknown, *(simulated_uid(ALL_CARDS.index(parse_card(c)))
                                       for c in DEALT)):
            t.leaks.add_tag(uid)
        t.shoe.send_raw(encoder.tag(again))
        t.wait(lambda s: s["paused"] and s["card_owed"])
        # a tag that is not in the registry
        t.shoe.send_raw(encoder.tag(unknown))
        t.wait(lambda s: driver_code(s) == "rfid_unknown_uid")

    details = run_sealed(table, odd_frames, ("not a tag UID",))
    assert {again, unknown} <= evidence_values(details, "tag"), details
    assert "KD" in evidence_values(details, "card"), details


@pytest.mark.slow
def test_pdt_odd_frames_stay_sealed_until_the_round_is_cancelled(table_for) -> None:
    """A bad checksum, an invalid card code, a sequence number reused with other content and
    the firmware's misread words, each naming a card."""
    table = table_for("pdt")

    def odd_frames(t: Table) -> None:
        encoder = t.shoe.encoder
        kd = next(f for f in reversed(encoder.recent) if b",CARD,KD*" in f)
        kd_seq = int(kd.split(b",")[1])
        # a bad checksum on a frame naming a card: dropped (the next frame reuses its number)
        bad_sum = encoder.corrupt(encode_frame(encoder.seq, "CARD", "JC"))
        t.leaks.add_card("JC")
        t.leaks.add_frame(frame_text(bad_sum))
        t.shoe.send_raw(bad_sum)
        # a CARD frame with an invalid code naming a card: a misread, the card is owed
        bad_card = encoder.card("7S?")
        t.leaks.add_card("7S")
        t.leaks.add_frame(frame_text(bad_card))
        t.shoe.send_raw(bad_card)
        t.wait(lambda s: s["paused"] and s["card_owed"])
        # the P1 card's sequence number again with other content
        conflict = encode_frame(kd_seq, "CARD", "9C")
        t.leaks.add_card("9C")
        t.leaks.add_frame(frame_text(kd))
        t.leaks.add_frame(frame_text(conflict))
        t.shoe.send_raw(conflict)
        t.wait(lambda s: driver_code(s) == "pdt_sequence_conflict")
        # the firmware's own misread words name a card
        misread = encoder.misread("E7", "partial read QH")
        t.leaks.add_card("QH")
        t.leaks.add_frame(frame_text(misread))
        t.shoe.send_raw(misread)
        t.wait(lambda s: driver_code(s) == "pdt_misread")

    details = run_sealed(table, odd_frames, ("bad checksum",))
    frames = evidence_values(details, "frame") | evidence_values(details, "frame_again")
    assert any(",CARD,7S?*" in f for f in frames) and any(",CARD,9C*" in f for f in frames)
    assert any("partial read QH" in f for f in frames), details


@pytest.mark.slow
@pytest.mark.mosquitto
def test_health_topic_and_metrics_stay_sealed_while_betting_is_open(table_for, mosquitto) -> None:
    """The fleet channels, through the same story: a misread card while betting is open."""
    table = table_for("beetek", mosquitto.port)
    damaged = b"<Card:KD?>"

    def odd_frames(t: Table) -> None:
        t.leaks.add_frame(damaged.decode())
        t.shoe.send_raw(b" [Game]" + damaged + b" ")
        t.wait(lambda s: s["paused"] and s["card_owed"])

    run_sealed(table, odd_frames, ())
    assert table.health is not None and table.cut["health"] > 0
    assert any('"misread"' in text for text in table.health.texts[:table.cut["health"]])
    assert any(channel == "metrics textfile" and 'code="misread"' in payload
               for channel, payload in table.captured)
