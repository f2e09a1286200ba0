"""The display's screenshots in docs/, taken from a real demo table in a real browser.

    python -m testkit.screenshots docs/

Plays part of a shoe fast (no display), then carries on with the same shoe slowly with the
display on, and photographs at 1920x1080, in Chromium (/usr/bin/chromium, driven by
Playwright): the dealer view while betting is open and cards are going out
(``display-dealer.png``), the dealer view of a settled round (``display-dealer-result.png``),
a supervisor's pause (``display-paused.png``); then a settled round in each other language
(``display-dealer-fil.png``, ``-ms``, ``-fa``, ``-ja``) and the dealer view on a portrait
monitor in Japanese (``display-dealer-ja-portrait.png``, scaled to half). At 1366x768
(the pages scale to the window), and through ``pngquant`` when it is installed (Debian package
pngquant): the files stay small. Same seed, same shoe, same pictures.

The players' pages (``players-*.png``: the scoreboard and the stream overlay in each state they
tell, across the languages) come from a real table machine feeding a real display server
(testkit/players_table.py), at 1920x1080: ``python -m testkit.screenshots docs/ --players``
takes only those, ``--dealer`` only the dealer's.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SIZE = {"width": 1366, "height": 768}
PORTRAIT = {"width": 1080, "height": 1920}
LANGUAGES = ("fil", "ms", "fa", "ja")
SEED = 20261201
ROUNDS_BEFORE = 17       # rounds on the roadmap before the photographed round
SPEED = 2.0              # table time while photographing: a 15 s window lasts 7.5 s


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def demo(*args: str, **popen: Any) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "controller", "demo", *args], **popen)


def page_state(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url + "state.json", timeout=2) as reply:
            return dict(json.load(reply))
    except OSError:
        return {}


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: timed out waiting for {what}")
        time.sleep(0.05)


def status_of(url: str) -> dict[str, Any]:
    return dict(page_state(url).get("status") or {})


def supervisor(state_dir: Path, action: str) -> None:
    """A supervisor action on the demo's control socket (the demo makes us a supervisor)."""
    done = subprocess.run([sys.executable, "-m", "controller", "supervisor", "--socket",
                           str(state_dir / "control.sock"), action],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise SystemExit(f"screenshots: supervisor {action} failed: {done.stderr.strip()}")


def live(page: Any) -> None:
    """Wait until the page has its link to the table (a page just opened, or reconnecting)."""
    wait_for("a live page", lambda: page.evaluate("() => document.body.dataset.link") == "live")


def take(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    state_dir = Path(tempfile.mkdtemp(prefix="pokdeng-shots-"))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    first = demo("--rounds", str(ROUNDS_BEFORE), "--speed", "100", "--seed", str(SEED),
                 "--state-dir", str(state_dir), "--no-display", "--quiet", **quiet)
    if first.wait(180) != 0:
        raise SystemExit("screenshots: the fast part of the demo failed")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    table = demo("--speed", str(SPEED), "--state-dir", str(state_dir),
                 "--display-port", str(port), "--quiet", **quiet)
    shots = []
    try:
        wait_for("the display", lambda: bool(status_of(url)))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=SIZE)
            page.goto(url)
            wait_for("cards going out while betting is open", lambda: (
                status_of(url).get("state") == "betting"
                and status_of(url).get("cards_dealt", 0) >= 9))
            page.wait_for_timeout(300)  # the stream is within 100 ms; let the ring move on
            shots.append(out / "display-dealer.png")
            page.screenshot(path=str(shots[-1]))
            wait_for("the round's result", lambda: status_of(url).get("state") == "ready")
            page.wait_for_timeout(300)
            shots.append(out / "display-dealer-result.png")
            page.screenshot(path=str(shots[-1]))
            wait_for("the next round's cards", lambda: (
                status_of(url).get("state") == "betting"
                and status_of(url).get("cards_dealt", 0) >= 4))
            supervisor(state_dir, "pause")
            page.wait_for_selector("#banner:not([hidden])")
            page.wait_for_timeout(300)
            shots.append(out / "display-paused.png")
            page.screenshot(path=str(shots[-1]))
            supervisor(state_dir, "resume")
            # every language's page open before the round settles, photographed once it has
            others = {}
            for lang in LANGUAGES:
                others[lang] = browser.new_page(viewport=SIZE)
                others[lang].goto(f"{url}?lang={lang}")
            wait_for("the next round's cards", lambda: (
                status_of(url).get("state") == "betting"
                and status_of(url).get("cards_dealt", 0) >= 4))
            wait_for("a settled round", lambda: status_of(url).get("state") == "ready")
            for lang in LANGUAGES:
                others[lang].wait_for_selector(".seat .hand-value")
            for lang in LANGUAGES:
                live(others[lang])
                shots.append(out / f"display-dealer-{lang}.png")
                others[lang].screenshot(path=str(shots[-1]))
            for other in [page, *others.values()]:
                other.close()
            tall = browser.new_page(viewport=PORTRAIT, device_scale_factor=0.5)
            tall.goto(f"{url}?lang=ja")
            wait_for("cards going out again", lambda: (
                status_of(url).get("state") == "betting"
                and status_of(url).get("cards_dealt", 0) >= 5))
            tall.wait_for_timeout(300)
            live(tall)
            shots.append(out / "display-dealer-ja-portrait.png")
            tall.screenshot(path=str(shots[-1]))
            browser.close()
    finally:
        table.send_signal(signal.SIGTERM)
        table.wait(30)
    return shots


#: the players' pictures: (file, page, language, state, viewport); each state once at least,
#: each language once at least, the overlay over a transparent background
PLAYERS_SHOTS = (
    ("players-betting.png", "scoreboard", "en", "betting", (1920, 1080)),
    ("players-result.png", "scoreboard", "en", "result", (1920, 1080)),
    ("players-paused-ms.png", "scoreboard", "ms", "misread", (1920, 1080)),
    ("players-cancelled-fil.png", "scoreboard", "fil", "cancelled", (1920, 1080)),
    ("players-shuffling-ja.png", "scoreboard", "ja", "shuffling", (1920, 1080)),
    ("players-result-fa-portrait.png", "scoreboard", "fa", "result", (1080, 1920)),
    ("players-overlay.png", "overlay", "en", "result", (1920, 1080)),
    ("players-overlay-betting-ja.png", "overlay", "ja", "betting", (1920, 1080)),
    ("players-overlay-cancelled-fa.png", "overlay", "fa", "cancelled", (1920, 1080)),
)


def take_players(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from testkit.players_table import MachineTable

    out.mkdir(parents=True, exist_ok=True)
    shots = []
    with MachineTable() as table, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for state in table.states():
            for name, which, lang, wanted, (width, height) in PLAYERS_SHOTS:
                if wanted != state:
                    continue
                page = browser.new_page(viewport={"width": width, "height": height},
                                        device_scale_factor=0.5 if height > width else 1)
                page.goto(f"http://127.0.0.1:{table.port}/{which}?lang={lang}")
                page.wait_for_function("""() => document.body.dataset.link === 'live'
                    && !!document.querySelector('#stats div')""")
                page.wait_for_timeout(400)
                shots.append(out / name)
                page.screenshot(path=str(shots[-1]), omit_background=True, animations="disabled")
                page.close()
        browser.close()
    return shots


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv and not argv[0].startswith("--") else "docs")
    if not Path(CHROMIUM).exists():
        print(f"screenshots: {CHROMIUM} is missing (apt-get install chromium)", file=sys.stderr)
        return 1
    shots = (take_players(out) if "--players" in argv else take(out) if "--dealer" in argv
             else take(out) + take_players(out))
    for shot in shots:
        if shutil.which("pngquant"):  # Debian's pngquant: a quarter of the bytes, same look
            subprocess.run(["pngquant", "--quality", "70-95", "--speed", "1", "--force",
                            "--ext", ".png", str(shot)], check=False)
        print(shot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
