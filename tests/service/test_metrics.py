"""Prometheus metrics in a node_exporter textfile: a real demo run writes it, prometheus_client's
own parser reads it, and its counts agree with the events file and the journal."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.durability.journal import Journal
from controller.rules.cards import ALL_CARDS
from controller.service.config.settings import ConfigError, parse_config
from controller.service.control.access import own_group
from controller.service.telemetry.metrics import TableMetrics
from controller.service.trust.journal_key import read_key_file
from support.sealing import Leaks

ALLOWED_LABELS = {"table", "kind", "type", "code", "transport", "device", "version", "digest",
                  "digest_of", "le", "state", "sync"}


def samples(path: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of the file by its name (parsed by prometheus_client itself)."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def by_label(found: dict[str, Any], name: str, label: str) -> dict[str, float]:
    return {labels[label]: value for labels, value in found.get(name, [])}


@pytest.mark.slow
def test_a_demo_writes_metrics_that_agree_with_its_events(tmp_path: Path) -> None:
    textfile = tmp_path / "prom" / "pokdeng-demo.prom"
    textfile.parent.mkdir()
    events_file = tmp_path / "events.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "controller", "demo", "--rounds", "2", "--seed", "5", "--quiet",
         "--state-dir", str(tmp_path / "state"), "--events", str(events_file),
         "--metrics", str(textfile)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # written by rename: nothing but the file itself is left in node_exporter's directory
    assert [p.name for p in textfile.parent.iterdir()] == [textfile.name]
    found = samples(textfile)

    events = {json.loads(line)["seq"]: json.loads(line) for line in
              events_file.read_text().splitlines()}
    state = tmp_path / "state"
    with Journal(str(state / "journal.sqlite"), read_key_file(state / "journal.key")) as journal:
        entries = list(journal.entries())
        records = journal.record_count()
    # Counted from the outbox's start: not the daemon's own start-up records before it (the
    # software it runs, the clock's state: a container's clock is not synchronised).
    startup = 0
    while entries[startup].input.kind in ("software", "clock"):
        startup += 1
    counted = entries[startup:]
    kinds = Counter(entry.input.kind for entry in counted)
    types = Counter(event["type"] for entry in counted for event in entry.events)
    inputs_with_events = sum(1 for entry in counted if entry.events)
    assert sum(types.values()) + sum(len(e.events) for e in entries[:startup]) == len(events)
    assert by_label(found, "pokdeng_table_events_total", "type") == dict(types)
    assert by_label(found, "pokdeng_table_inputs_total", "kind") == dict(kinds)
    assert found["pokdeng_table_rounds_total"][0][1] == types["round_result"] == 2
    assert found["pokdeng_table_pauses_total"][0][1] == types["paused"]
    assert found["pokdeng_table_journal_records"][0][1] == records
    journal_size = (tmp_path / "state" / "journal.sqlite").stat().st_size
    assert found["pokdeng_table_journal_size_bytes"][0][1] >= journal_size
    assert by_label(found, "pokdeng_table_backlog_events", "transport") == {"file": 0}
    # every journaled input with events was delivered before the demo stopped, and timed
    latency = found["pokdeng_table_delivery_latency_seconds_count"][0][1]
    assert latency == inputs_with_events and latency > 0
    buckets = [value for _, value in found["pokdeng_table_delivery_latency_seconds_bucket"]]
    assert buckets == sorted(buckets) and buckets[-1] == latency
    assert found["pokdeng_table_software_info"][0][0]["version"]

    # one table label everywhere, labels from closed sets only, and no card in any of them
    labels = [labels for series in found.values() for labels, _ in series]
    assert {labels["table"] for labels in labels} == {"DEMO-1"}
    assert set().union(*labels) <= ALLOWED_LABELS
    leaks = Leaks()
    for card in ALL_CARDS:
        leaks.add_card(card)
    values = " ".join(value for labels in labels for key, value in labels.items()
                      if key not in ("le", "version", "digest"))
    leaks.check("metrics labels", values)


def test_pauses_count_a_run_of_faults_once() -> None:
    metrics = TableMetrics("T1", {"version": "0.1.0"})
    metrics.start_from({"paused": False})
    paused = {"seq": 1, "type": "paused", "data": {"code": "supervisor_pause", "reason": "x"}}
    again = {"seq": 2, "type": "paused", "data": {"code": "misread", "reason": "y"}}
    metrics.count("supervisor", [paused])
    metrics.count("misread", [again])
    metrics.count("supervisor", [{"seq": 3, "type": "resumed", "data": {}}])
    metrics.count("button", [{"seq": 4, "type": "input_rejected",
                              "data": {"code": "not_now", "reason": "z"}}])
    text = {s.name + json.dumps(s.labels, sort_keys=True): s.value
            for f in text_string_to_metric_families(
                __import__("prometheus_client").generate_latest(metrics.registry).decode())
            for s in f.samples}
    assert text['pokdeng_table_pauses_total{"table": "T1"}'] == 1
    assert text['pokdeng_table_faults_total{"code": "misread", "table": "T1"}'] == 1
    assert text['pokdeng_table_rejections_total{"code": "not_now", "table": "T1"}'] == 1
    assert text['pokdeng_table_inputs_total{"kind": "supervisor", "table": "T1"}'] == 2


def test_paused_since_is_the_time_the_pause_was_first_seen_until_resumed() -> None:
    metrics = TableMetrics("T1", {"version": "0.1.0"})

    def gauges() -> dict[str, float]:
        return {s.name + json.dumps(s.labels, sort_keys=True): s.value
                for f in text_string_to_metric_families(
                    __import__("prometheus_client").generate_latest(metrics.registry).decode())
                for s in f.samples}

    since = 'pokdeng_table_paused_since_timestamp_seconds{"table": "T1"}'
    state = {"state": "betting", "paused": False, "clock_sync": "synchronised",
             "journal_check": {"state": "not started"}}
    metrics.refresh(state, {}, 0, 0, (10, 100), now=1000.0)
    assert gauges()[since] == 0
    metrics.refresh(dict(state, paused=True), {}, 0, 0, (10, 100), now=1010.0)
    metrics.refresh(dict(state, paused=True), {}, 0, 0, (10, 100), now=1500.0)
    found = gauges()
    assert found[since] == 1010.0  # still the first moment seen paused
    assert found['pokdeng_table_metrics_written_timestamp_seconds{"table": "T1"}'] == 1500.0
    assert found['pokdeng_table_state{"state": "betting", "table": "T1"}'] == 1
    assert found['pokdeng_table_state{"state": "ready", "table": "T1"}'] == 0
    assert found['pokdeng_table_journal_check{"state": "not_started", "table": "T1"}'] == 1
    assert found['pokdeng_table_clock_sync{"sync": "synchronised", "table": "T1"}'] == 1
    assert found['pokdeng_table_journal_filesystem_avail_bytes{"table": "T1"}'] == 10
    metrics.refresh(state, {}, 0, 0, None, running=False, now=1600.0)
    found = gauges()
    assert found[since] == 0 and found['pokdeng_table_running{"table": "T1"}'] == 0


def minimal(tmp_path: Path, metrics: Any) -> dict[str, Any]:
    return {"table": {"id": "T1"}, "state_dir": str(tmp_path),
            "shoe": {"driver": "beetek", "url": "/dev/null"},
            "control": {"socket": str(tmp_path / "c.sock"), "supervisor_group": own_group()},
            "metrics": metrics}


@pytest.mark.parametrize(("metrics", "message"), [
    ({"textfile": "pokdeng.prom"}, "metrics.textfile: must be an absolute path"),
    ({"textfile": "/var/lib/node/pokdeng.txt"}, "metrics.textfile: must end in .prom"),
    ({"textfile": "/x/p.prom", "interval_s": 0}, "metrics.interval_s: must be a number >= 1"),
    ({"textfile": "/x/p.prom", "port": 9100}, "metrics.port: unknown option"),
])
def test_bad_metrics_config_is_named_by_key(tmp_path: Path, metrics: Any, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(minimal(tmp_path, metrics))
    assert any(error.startswith(message) for error in raised.value.errors), raised.value.errors


def test_metrics_are_off_without_a_textfile(tmp_path: Path) -> None:
    data = minimal(tmp_path, None)
    del data["metrics"]
    assert parse_config(data).metrics.textfile is None
    assert parse_config(minimal(tmp_path, {"textfile": "/x/p.prom"})).metrics.interval_s == 15


def test_the_file_is_replaced_whole_and_readable_by_node_exporter(tmp_path: Path) -> None:
    from controller.service.telemetry.metrics_writer import write_atomically

    target = tmp_path / "t.prom"
    target.write_text("old\n")
    before = target.stat().st_ino
    old_umask = os.umask(0o077)  # the daemon's umask must not keep node_exporter out
    try:
        write_atomically(str(target), b"pokdeng_table_paused{table=\"T1\"} 0\n")
    finally:
        os.umask(old_umask)
    assert target.read_bytes().startswith(b"pokdeng_table_paused")
    assert target.stat().st_ino != before  # a new file renamed over the old one
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["t.prom"]
    with pytest.raises(OSError):
        write_atomically(str(tmp_path / "missing" / "t.prom"), b"x\n")
