"""Kill the core path with SIGKILL at 50+ random points of a simulated shoe, restart it each time.

Afterwards the HTTP backend must hold every event of the shoe, in seq order, none missing;
any repeat carries the same id with the same body; and the events equal those of one clean,
uninterrupted replay of the same script (recovery invented nothing and re-numbered nothing).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from controller.inputs import write_script
from controller.journal import Journal, export_events
from controller.machine import MachineSettings, TableMachine
from controller.scriptgen import shoe_script
from fixtures_backends import webhook, webhook_secret  # noqa: F401

HERE = Path(__file__).parent
TABLE = "T7"
KILLS = 50


def start(journal: Path, script: Path, url: str, secret: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, str(HERE / "core_path_proc.py"), str(journal), str(script), url,
         str(secret), TABLE],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_sigkill_at_50_random_points_loses_nothing_and_invents_nothing(
        tmp_path, webhook, webhook_secret):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    inputs = shoe_script(seed % 1000)
    script = tmp_path / "shoe.jsonl"
    with script.open("w") as out:
        write_script(inputs, out)
    machine = TableMachine(MachineSettings(table_id=TABLE))
    expected = [e for inp in inputs for e in machine.handle(inp)]
    journal = tmp_path / "journal.db"
    kill_points = sorted(rng.sample(range(len(inputs)), KILLS))
    kills = 0
    for point in kill_points:
        proc = start(journal, script, webhook.url, webhook_secret)
        first_line = proc.stdout.readline()
        assert first_line.startswith("resumed "), \
            f"seed {seed}: core path did not start: {first_line} {proc.stderr.read()[-2000:]}"
        resumed = int(first_line.split()[1])
        if resumed <= point:
            for line in proc.stdout:
                if line.startswith("in ") and int(line.split()[1]) >= point:
                    break
        time.sleep(rng.random() * 0.004)  # land anywhere: mid-append, mid-POST, mid-update
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
        kills += 1
    assert kills >= 50, f"seed {seed}"
    final = start(journal, script, webhook.url, webhook_secret)
    out, err = final.communicate(timeout=60)
    assert final.returncode == 0, f"seed {seed}: {out[-500:]} {err[-2000:]}"
    assert out.strip().endswith("done")

    ids = webhook.unique_ids()
    assert ids == [e["id"] for e in expected], f"seed {seed}: missing or out of order"
    assert webhook.conflicts == [], f"seed {seed}: a repeated id came with another body"
    first_bodies = {}
    for e in webhook.events:
        first_bodies.setdefault(e["id"], e)
    assert [first_bodies[i] for i in ids] == expected, f"seed {seed}"
    assert webhook.bad_signatures == 0
    with Journal(journal) as j:
        assert j.verify().ok
        assert j.last_event_seq() == len(expected)
    assert len(list(export_events(journal))) == len(expected)
    print(f"seed {seed}: {kills} kills, {len(expected)} events, {webhook.repeats()} repeats")
