"""The players' pages across a restart of the screen process: a real demo table (its daemon
and the screen process it starts), a round cancelled, then the screen process killed. The
daemon starts another and sends it the shoe from the journal; the scoreboard that was open
reconnects by itself and tells the same story: the cancel and its refund, the cancelled round
in the round count, and the table going on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.display_helpers import SCREENS_S, free_port, players_state
from support.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"


def screen_process(demo: subprocess.Popen) -> int | None:
    """The screen process the demo's daemon runs now (its child), or None."""
    found = subprocess.run(["pgrep", "-P", str(demo.pid), "-f", "controller.service.screens"],
                           capture_output=True, text=True).stdout.split()
    return int(found[0]) if len(found) == 1 else None


def page_says(page: Any) -> dict[str, Any]:
    return dict(page.evaluate("""() => ({link: document.body.dataset.link,
        phase: document.body.dataset.phase,
        notice: document.getElementById('notice').hidden ? null
          : document.getElementById('notice-words').textContent,
        count: document.getElementById('rounds-count').textContent,
        round: (document.getElementById('round') || {}).textContent})"""))


def test_a_killed_screen_process_comes_back_and_the_page_with_it(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    port = free_port()
    state_dir = tmp_path / "state"
    demo = subprocess.Popen(
        [sys.executable, "-m", "controller", "demo", "--rounds", "3", "--speed", "1", "--stay",
         "--quiet", "--state-dir", str(state_dir), "--display-port", str(port)],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "demo.err", "wb"))
    try:
        wait_until(lambda: (players_state(port).get("status") or {}).get("betting", {})
                   .get("open"), SCREENS_S * 2, "betting open on the demo table",
                   details=lambda: (tmp_path / "demo.err").read_text()[-2000:])
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                                 args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1920, "height": 1080})
                page.goto(f"http://127.0.0.1:{port}/scoreboard?lang=fil")
                page.wait_for_function("() => document.body.dataset.link === 'live'",
                                       timeout=SCREENS_S * 1000)
                cancel = subprocess.run(
                    [sys.executable, "-m", "controller", "supervisor", "--state-dir",
                     str(state_dir), "cancel-round"], capture_output=True, text=True, timeout=60)
                assert cancel.returncode == 0, cancel.stderr
                page.wait_for_function("() => !document.getElementById('notice').hidden",
                                       timeout=SCREENS_S * 1000)
                before = page_says(page)
                assert "ibabalik" in before["notice"], before
                old = screen_process(demo)
                assert old is not None
                os.kill(old, signal.SIGKILL)
                wait_until(lambda: screen_process(demo) not in (None, old), SCREENS_S,
                           "another screen process")
                # the old process's stream is gone: a status from now on came through a
                # stream the page opened again by itself; the table goes on meanwhile (the
                # next round's betting), and the page tells it
                heard = page.evaluate("() => window.statusCount")
                page.wait_for_function(
                    "(heard) => window.statusCount > heard"
                    " && document.body.dataset.link === 'live'"
                    " && document.body.dataset.phase === 'betting'", arg=heard,
                    timeout=SCREENS_S * 1000)
                after = page_says(page)
                assert after["notice"] == before["notice"], after
                assert after["count"] == before["count"] and "1 kinansela" in after["count"]
                status = players_state(port)["status"]
                assert status["notice"]["kind"] == "cancelled" and status["round"] == 2
            finally:
                browser.close()
    finally:
        demo.send_signal(signal.SIGTERM)
        demo.wait(30)
