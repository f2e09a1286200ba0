"""The daemon with its display: a real ``run --config`` subprocess on a simulated shoe and a
line panel; the display read over HTTP as a page would."""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path

import pytest

from controller.service.control.client import ControlClient
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    cli,
    daemon_config,
    log_records,
    running_daemon,
    stop_daemon,
    wait_status,
)
from support.display_helpers import SseReader, free_port, request


@pytest.mark.slow
def test_the_display_follows_the_daemon_and_stops_with_it(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    port = free_port()
    config = daemon_config(short_dir, short_dir / "shoe", panel.path,
                           display={"listen": f"127.0.0.1:{port}"})
    with running_daemon(config, short_dir, panel) as (proc, _), \
            contextlib.closing(SseReader(port)) as reader:
        reader.wait_status(lambda v: v["state"] == "no_shoe" and v["table"] == "T1")
        panel.send("new_shoe")
        view = reader.wait_status(lambda v: v["state"] == "awaiting_flip")
        assert view["step"] == "draw the flip card"
        state = json.loads(request(port, "/state.json")[2])
        assert state["status"]["state"] == "awaiting_flip"
        assert stop_daemon(proc) == 0
        reader.wait_for(lambda m: reader.ended, what="the stream to end with the daemon")


@pytest.mark.slow
def test_a_taken_display_port_costs_the_display_not_the_table(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    config = daemon_config(short_dir, short_dir / "shoe", panel.path,
                           display={"listen": f"127.0.0.1:{port}"})
    with contextlib.closing(taken), running_daemon(config, short_dir, panel) as (_, log):
        panel.send("new_shoe")
        wait_status(ControlClient(str(short_dir / "control.sock")),
                    lambda s: s["state"] == "awaiting_flip")
        refused = log_records(log, "the dealer display is not shown")
        assert refused and refused[0]["level"] == "error"
        assert f"display.listen 127.0.0.1:{port}: cannot listen" in refused[0]["reason"]


@pytest.mark.slow
def test_watch_speaks_the_tables_language_reached_by_its_socket_alone(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    """`watch --socket` knows nothing of the config: the table's status names its language."""
    from controller.display import words

    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path,
                           display={"listen": f"127.0.0.1:{free_port()}", "language": "ms"})
    with running_daemon(config, short_dir):
        status = ControlClient(str(short_dir / "control.sock")).status()
        assert status["language"] == "ms"
        shown = cli("watch", "--once", "--socket", str(short_dir / "control.sock"))
        assert shown.returncode == 0, shown.stderr
        assert words.step_words("ms", status) in shown.stdout
        assert words.step_words("en", status) not in shown.stdout
        asked = cli("watch", "--once", "--lang", "ja", "--socket", str(short_dir / "control.sock"))
        assert words.step_words("ja", status) in asked.stdout  # --lang still wins


@pytest.mark.slow
def test_a_language_added_as_one_file_is_the_tables_and_watch_speaks_it(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    """An operator's ``qps.po`` on the catalogues' search path and ``display.language: qps``:
    the daemon takes the config, its status names the language, ``watch`` says its words."""
    from controller.display import catalogues
    from support.pseudo_locale import pseudo_words, write_catalogue

    write_catalogue(short_dir / "locales")
    env = {catalogues.ENV: str(short_dir / "locales")}
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path,
                           display={"listen": f"127.0.0.1:{free_port()}", "language": "qps"})
    checked = cli("config", "check", str(config), env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with running_daemon(config, short_dir, env=env):
        assert ControlClient(str(short_dir / "control.sock")).status()["language"] == "qps"
        shown = cli("watch", "--once", "--socket", str(short_dir / "control.sock"), env=env)
        assert shown.returncode == 0, shown.stderr
        own = pseudo_words()
        assert own["step.new_shoe"] in shown.stdout, shown.stdout
        assert own["watch.head"].replace("{id}", "T1") in shown.stdout, shown.stdout


def on_a_terminal(*args: str) -> str:
    """``pokdeng-table ARGS`` with its stdout on a pseudo-terminal (as a dealer's terminal):
    what it printed."""
    import os
    import pty
    import subprocess
    import sys

    main, child = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "controller", *args], stdout=child,
                              stderr=subprocess.PIPE, text=True, timeout=60)
        os.close(child)
        child = -1
        assert done.returncode == 0, done.stderr
        out = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            out += chunk
        return out.decode().replace("\r\n", "\n")
    finally:
        if child >= 0:
            os.close(child)
        os.close(main)


def shaped(text: str) -> bool:
    """Arabic-script letters in their joined (presentation) forms, as reshaped for a terminal."""
    return any("\ufb50" <= c <= "\ufdff" or "\ufe70" <= c <= "\ufeff" for c in text)


@pytest.mark.slow
def test_watch_says_paused_not_a_countdown_and_puts_persian_in_a_terminals_order(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    """A supervisor's pause while betting is open: ``watch`` says paused and frozen in the
    table's language and counts no seconds; Persian on a terminal is shaped and in visual
    order, piped (or ``--rtl logical``) in typing order."""
    from controller.display import words
    from support.daemon_helpers import open_shoe, start_round

    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=30)
    socket_path = str(short_dir / "control.sock")
    with running_daemon(config, short_dir, panel):
        client = ControlClient(socket_path)
        open_shoe(client, panel, shoe)
        start_round(client, panel)
        counting = cli("watch", "--once", "--socket", socket_path)
        assert "betting closes in" in counting.stdout, counting.stdout  # before the pause
        paused = cli("supervisor", "pause", "--socket", socket_path)
        assert paused.returncode == 0, paused.stderr
        wait_status(client, lambda s: s["paused"] and s["betting_open"])
        for lang in ("en", "fa", "ja"):
            shown = cli("watch", "--once", "--lang", lang, "--socket", socket_path)
            assert shown.returncode == 0, shown.stderr
            frozen = words.say(lang, "state.paused") + " · " + words.say(lang, "clock.frozen")
            assert frozen in shown.stdout.splitlines(), (lang, shown.stdout)
            counts = max(words.say(lang, "watch.closes_in", n=1).split("1"), key=len).strip()
            assert counts and counts not in shown.stdout, (lang, shown.stdout)
        piped = cli("watch", "--once", "--lang", "fa", "--socket", socket_path).stdout
        typed = words.say("fa", "clock.frozen")
        assert typed in piped and not shaped(piped)  # logical: the words as typed
        seen = on_a_terminal("watch", "--once", "--lang", "fa", "--socket", socket_path)
        assert shaped(seen) and typed not in seen, seen  # shaped, right to left
        assert "T1" in seen and "·" in seen  # the Latin and the numbers as they are
        logical = on_a_terminal("watch", "--once", "--lang", "fa", "--rtl", "logical",
                                "--socket", socket_path)
        assert typed in logical and not shaped(logical), logical
        english = on_a_terminal("watch", "--once", "--socket", socket_path)
        assert "PAUSED · countdown frozen" in english  # a left-to-right language unchanged
        assert cli("supervisor", "resume", "--socket", socket_path).returncode == 0


@pytest.mark.slow
def test_a_language_a_word_behind_english_is_spoken_with_one_warning(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    """An operator's ``qps.po`` that lacks a word English gained: the daemon starts, logs
    one WARNING naming the language and the word, and ``watch`` speaks it, saying so once."""
    from controller.display import catalogues
    from support.pseudo_locale import pseudo_words, write_catalogue

    write_catalogue(short_dir / "locales", drop=("winner.pok",))
    env = {catalogues.ENV: str(short_dir / "locales")}
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path,
                           display={"listen": f"127.0.0.1:{free_port()}", "language": "qps"})
    with running_daemon(config, short_dir, env=env) as (_, log):
        warned = log_records(log, "the screens show some words in English: a catalogue lacks "
                                  "them")
        assert [record["languages"] for record in warned] == [{"qps": ["winner.pok"]}], warned
        assert warned[0]["level"] == "warning", warned
        shown = cli("watch", "--once", "--socket", str(short_dir / "control.sock"), env=env)
        assert shown.returncode == 0, shown.stderr
        assert shown.stderr.count("WARNING") == 1 and "English: winner.pok" in shown.stderr
        assert pseudo_words()["step.new_shoe"] in shown.stdout, shown.stdout
