"""The Prometheus alert rules and the Grafana dashboard the package ships
(packaging/prometheus/, packaging/grafana/), against the metrics the daemon really writes.

promtool (Debian's `prometheus` package) checks the rules and runs their unit tests
(alerts.test.yml). A demo table writes its textfile: every metric, label and label value that a
rule, a rule test or a dashboard query names must be in it, so a renamed metric breaks the
build rather than an alert that never fires; the running table's real file fires no alert
(promtool, with its samples as the input), and its last file, written as it stopped, fires
PokdengTableDown.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "packaging" / "prometheus" / "alerts.yml"
RULE_TESTS = REPO / "packaging" / "prometheus" / "alerts.test.yml"
DASHBOARD = REPO / "packaging" / "grafana" / "pokdeng-tables.json"
PROMTOOL = shutil.which("promtool")
REQUIRED = os.environ.get("POKDENG_PACKAGE_TEST") == "required"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PROMTOOL is None and not REQUIRED,
                                 reason="promtool not installed (Debian package: prometheus)")]

#: a series selector: a metric of the product and its label matchers, if any
SELECTOR = re.compile(r"\b(pokdeng_table_\w+)(?:\{([^}]*)\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')


Samples = dict[str, list[dict[str, str]]]


def parse(text: str) -> tuple[Samples, dict[tuple[str, str], float]]:
    """The file's samples: each name's label sets (a family declared with no sample yet, a
    labelled counter nothing counted, with none), and each series' value by (name, labels)."""
    labels: Samples = {}
    values: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
        for suffix in suffixes.get(family.type, [""]):
            labels.setdefault(family.name + suffix, [])
        for sample in family.samples:
            labels[sample.name].append(dict(sample.labels))
            values[(sample.name, json.dumps(sample.labels, sort_keys=True))] = sample.value
    return labels, values


def value_of(text: str, name: str, **labels: str) -> float:
    """The value of the series ``name`` whose labels include ``labels``."""
    return next(v for (n, key), v in parse(text)[1].items()
                if n == name and labels.items() <= json.loads(key).items())


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A demo table's textfile while it deals (a round settled), paused by a supervisor, and as
    it stopped (drained)."""
    work = tmp_path_factory.mktemp("demo")
    textfile, state = work / "pokdeng-demo.prom", work / "state"
    demo = subprocess.Popen(
        [sys.executable, "-m", "controller", "demo", "--rounds", "40", "--seed", "3", "--quiet",
         "--no-display", "--state-dir", str(state), "--metrics", str(textfile)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)

    def when(name: str, predicate: Callable[[float], bool], what: str) -> str:
        def met() -> str | None:
            text = textfile.read_text() if textfile.exists() else ""
            found = [v for (n, _), v in parse(text)[1].items() if n == name] if text else []
            return text if found and predicate(found[0]) else None
        return wait_until(met, timeout=60, interval=0.1, what=what)

    def supervisor(action: str) -> None:
        done = subprocess.run([sys.executable, "-m", "controller", "supervisor", "--socket",
                               str(state / "control.sock"), action],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert done.returncode == 0, done.stderr

    try:
        when("pokdeng_table_rounds_total", lambda n: n >= 1, "the demo to settle a round")
        supervisor("pause")
        paused = when("pokdeng_table_paused", lambda n: n == 1, "the pause in the file")
        settled = value_of(paused, "pokdeng_table_rounds_total")
        supervisor("resume")
        running = when("pokdeng_table_rounds_total", lambda n: n > settled,
                       "a round settled after the resume")
        supervisor("drain")
        out, err = demo.communicate(timeout=120)
        assert demo.returncode == 0, err
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    return {"running": running, "paused": paused, "stopped": textfile.read_text()}


def selectors_of_rules() -> list[tuple[str, str]]:
    rules = yaml.safe_load(RULES.read_text())
    return [(rule["alert"], rule["expr"]) for group in rules["groups"] for rule in group["rules"]]


def selectors_of_dashboard() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [(panel["title"], target["expr"]) for panel in dashboard["panels"]
               for target in panel["targets"]]
    queries += [(f"variable {v['name']}", v["definition"])
                for v in dashboard["templating"]["list"] if v.get("definition")]
    return queries


def test_promtool_checks_the_rules_and_their_tests_pass() -> None:
    assert PROMTOOL is not None, "promtool not installed (Debian package: prometheus)"
    check = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout
    tests = subprocess.run([PROMTOOL, "test", "rules", str(RULE_TESTS)], capture_output=True,
                           text=True, timeout=120)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    # every alert has a unit test that sees it fire
    tested = yaml.safe_load(RULE_TESTS.read_text())
    fired = {case["alertname"] for test in tested["tests"]
             for case in test["alert_rule_test"] if case.get("exp_alerts")}
    assert fired == {name for name, _ in selectors_of_rules()}


def test_the_daemons_textfile_passes_promtools_lint(demo_files: dict[str, str]) -> None:
    assert PROMTOOL is not None
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=demo_files["running"],
                          capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("source", ["rules", "rule tests", "dashboard"])
def test_every_metric_label_and_value_named_is_one_the_daemon_writes(
        demo_files: dict[str, str], source: str) -> None:
    written, _ = parse(demo_files["running"])
    if source == "rules":
        queries = selectors_of_rules()
    elif source == "dashboard":
        queries = selectors_of_dashboard()
    else:
        tested = yaml.safe_load(RULE_TESTS.read_text())
        queries = [(test["name"], series["series"]) for test in tested["tests"]
                   for series in test["input_series"]]
    assert queries
    problems = []
    for where, query in queries:
        selectors = SELECTOR.findall(query)
        assert selectors, f"{source}: {where} names no pokdeng_table_ metric: {query}"
        for name, matchers in selectors:
            if name not in written:
                problems.append(f"{where}: {name} is not in the daemon's textfile")
                continue
            label_sets = written[name]
            if not label_sets:
                continue  # declared, nothing counted yet (no refusal in the demo): the name is
            names_written = set().union(*label_sets)
            matched = MATCHER.findall(matchers)
            if source == "rule tests":  # an input series has the labels the daemon writes
                if {label for label, _, _ in matched} != names_written:
                    problems.append(f"{where}: {name} has labels {sorted(names_written)} in "
                                    f"the textfile, not {[m[0] for m in matched]}")
                continue
            for label, op, value in matched:
                if label not in names_written:
                    problems.append(f"{where}: {name} has no label {label}")
                elif op in ("=", "!=") and label != "table" and \
                        value not in {labels[label] for labels in label_sets}:
                    problems.append(f"{where}: {name}{{{label}=\"{value}\"}} is never written")
    assert problems == []


def held_series(text: str, minutes: int) -> list[dict[str, str]]:
    """promtool's input series for a table whose file stays as ``text`` for ``minutes``: every
    sample held at its value, the file rewritten each minute. promtool's clock starts at 0:
    the file's Unix times are moved so that its write is at 0."""
    written = value_of(text, "pokdeng_table_metrics_written_timestamp_seconds")
    series = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            selector = sample.name + "{" + ",".join(
                f'{key}="{value}"' for key, value in sorted(sample.labels.items())) + "}"
            if sample.name == "pokdeng_table_metrics_written_timestamp_seconds":
                values = f"0+60x{minutes}"
            elif sample.name.endswith("_timestamp_seconds") and sample.value:
                values = f"{sample.value - written!r}x{minutes}"
            else:
                values = f"{sample.value!r}x{minutes}"
            series.append({"series": selector, "values": values})
    return series


def alerts_at(text: str, minutes: int, tmp_path: Path) -> dict[str, list[dict[str, str]]]:
    """Every alert of the rules, evaluated by promtool after ``minutes`` of ``text``: which
    fire (with their labels). promtool reports what it got for each alert we expect none of."""
    assert PROMTOOL is not None
    series = held_series(text, minutes)
    names = [name for name, _ in selectors_of_rules()]
    test = {"rule_files": [str(RULES)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series,
                       "alert_rule_test": [{"eval_time": f"{minutes}m", "alertname": name,
                                            "exp_alerts": []} for name in names]}]}
    path = tmp_path / "case.yml"
    path.write_text(yaml.safe_dump(test))
    result = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True,
                            text=True, timeout=120)
    fired: dict[str, list[dict[str, str]]] = {}
    for block in re.split(r"\n\s*alertname: ", result.stdout + result.stderr)[1:]:
        name = block.split(",", 1)[0]
        got = block.split("got:", 1)[1] if "got:" in block else ""
        fired[name] = [dict(re.findall(r'(\w+)="([^"]*)"', labels))
                       for labels in re.findall(r"Labels:\{([^}]*)\}", got)]
    assert result.returncode == 0 or fired, result.stdout + result.stderr
    return fired


def test_a_dealing_table_fires_no_alert_a_paused_or_stopped_one_does(
        demo_files: dict[str, str], tmp_path: Path) -> None:
    running = demo_files["running"]

    def value(name: str, **labels: str) -> float:
        return value_of(running, name, **labels)

    # What this machine may rightly alert on: its clock, its disk (not the table's doing).
    expected = set()
    if value("pokdeng_table_clock_sync", sync="synchronised") != 1:
        expected.add("PokdengTableClockNotSynchronised")
    if value("pokdeng_table_journal_filesystem_avail_bytes") < \
            0.1 * value("pokdeng_table_journal_filesystem_size_bytes"):
        expected.add("PokdengTableDiskAlmostFull")
    assert set(alerts_at(running, 30, tmp_path)) == expected

    # paused: the time it paused, written by the daemon, fires the alert after ten minutes
    paused = demo_files["paused"]
    since = value_of(paused, "pokdeng_table_paused_since_timestamp_seconds")
    written = value_of(paused, "pokdeng_table_metrics_written_timestamp_seconds")
    assert 0 <= written - since < 60
    assert set(alerts_at(paused, 9, tmp_path)) - expected == set()
    assert set(alerts_at(paused, 11, tmp_path)) - expected == {"PokdengTablePausedTooLong"}

    stopped = alerts_at(demo_files["stopped"], 30, tmp_path)
    assert set(stopped) - expected == {"PokdengTableDown"}
    assert stopped["PokdengTableDown"] == [{"alertname": "PokdengTableDown",
                                            "severity": "critical", "table": "DEMO-1"}]
    # while it deals, every gauge the alerts read says so
    assert value("pokdeng_table_running") == 1 and value("pokdeng_table_paused") == 0
    assert value("pokdeng_table_paused_since_timestamp_seconds") == 0
    assert abs(value("pokdeng_table_metrics_written_timestamp_seconds") - time.time()) < 600
    assert sum(v for (n, _), v in parse(running)[1].items() if n == "pokdeng_table_state") == 1
    assert value("pokdeng_table_journal_check", state="ok") == 1
    assert value_of(demo_files["stopped"], "pokdeng_table_running") == 0
