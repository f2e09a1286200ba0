"""A studio's rolling upgrade: the package published in a signed APT repository
(packaging/publish-repo, reprepro and a GnuPG key made for it), tables that take it with
signed-by, and packaging/fleet-upgrade rolling it over three booted tables, one of them broken
on purpose: the roll stops there, and the table after it keeps the old version and deals on.

The tables are the packaging test's clean Debian 12 roots (tests/packaging/test_deb.py: its
builds, its cached mmdebstrap root, its booted-container helpers), each booted with
systemd-nspawn on the host's network, its shoe and panel served from the test over loopback;
a dealer thread per table plays rounds as a dealer would. The repository is served over HTTP on
loopback; fleet-upgrade reaches each table through nsenter (its --via template).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_deb import (  # the packaging test's builds, root and booted-container helpers
    FLIP_AND_BURNS,
    NEW,
    OLD,
    REQUIRED,
    ROUND,
    Booted,
    Line,
    Root,
    _cannot_boot,
    base_tar,  # noqa: F401 (fixture)
    configure,
    debs,  # noqa: F401 (fixture)
)

REPO = Path(__file__).resolve().parents[2]
PUBLISH = REPO / "packaging" / "publish-repo"
FLEET_UPGRADE = REPO / "packaging" / "fleet-upgrade"
SOURCE = "/etc/apt/sources.list.d/pokdeng-table.list"
KEYRING = "/etc/apt/keyrings/pokdeng-table.gpg"
MAX_ROUNDS = 6  # each card of ROUND is in the 8-deck shoe 8 times: a dealer stops well before


def _missing() -> str | None:
    for tool in ("reprepro", "gpg", "gpgv"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (Debian packages: reprepro, gnupg, gpgv)"
    return _cannot_boot()


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(_missing() is not None and not REQUIRED,
                                 reason=_missing() or "")]


def new_key(home: Path) -> str:
    """A signing key for the repository, as docs/install.md's recipe makes it."""
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
                    "pokdeng-table studio repository <ops@studio.example>", "ed25519", "sign",
                    "3y"], env=env, check=True, capture_output=True, timeout=60)
    listed = subprocess.run(["gpg", "--batch", "--list-keys", "--with-colons"], env=env,
                            check=True, capture_output=True, text=True).stdout
    return next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr"))


def stop_agent(home: Path) -> None:
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, "GNUPGHOME": str(home)},
                   capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, debs: dict[str, Path]) -> Iterator[Path]:  # noqa: F811
    """The studio's repository with the new version published: its public directory."""
    work = tmp_path_factory.mktemp("repo")
    home = work / "gnupg"
    key = new_key(home)
    try:
        result = subprocess.run([str(PUBLISH), "--repo", str(work / "repo"), "--key", key,
                                 str(debs[NEW])], capture_output=True, text=True, timeout=300,
                                env={**os.environ, "GNUPGHOME": str(home)})
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"pokdeng-table {NEW}" in result.stdout
        yield work / "repo" / "public"
    finally:
        stop_agent(home)


@pytest.fixture(scope="module")
def served(repo: Path) -> Iterator[str]:
    """The repository over HTTP on loopback (the booted tables share the host's network)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(repo))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def unpack(base: Path, path: Path) -> Root:
    path.mkdir()
    subprocess.run(["tar", "-xf", str(base), "-C", str(path)], check=True, timeout=300)
    return Root(path)


def take_repository(root: Root, repo: Path, url: str) -> None:
    """What docs/install.md has a table do: the repository's key, and a source signed by it."""
    keyring = root.file(KEYRING)
    keyring.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "pokdeng-table.gpg", keyring)
    root.file(SOURCE).write_text(f"deb [signed-by={KEYRING}] {url} bookworm main\n")


def test_a_table_takes_the_repository_only_signed_by_its_key(
        tmp_path: Path, base_tar: Path, debs: dict[str, Path], repo: Path) -> None:  # noqa: F811
    """Offline (file: URI, no network): apt refuses the repository under a key the table was
    not given, and takes it signed by the key it names."""
    root = unpack(base_tar, tmp_path / "root")
    shutil.copytree(repo, root.file("/srv/pokdeng-repo"))
    root.install(debs[OLD])
    take_repository(root, repo, "file:/srv/pokdeng-repo")
    update = (f"apt-get update -o Dir::Etc::SourceList={SOURCE} -o Dir::Etc::SourceParts=- "
              "-o APT::Get::List-Cleanup=0")

    right_key = root.file(KEYRING).read_bytes()
    other = tmp_path / "other-gnupg"
    new_key(other)
    try:
        subprocess.run(["gpg", "--batch", "--yes", "--export", "--output",
                        str(root.file(KEYRING))],
                       env={**os.environ, "GNUPGHOME": str(other)}, check=True, timeout=60)
    finally:
        stop_agent(other)
    refused = root.sh(update, check=False)
    assert refused.returncode != 0, refused
    assert "is not signed" in refused.stdout + refused.stderr, refused
    assert f"Candidate: {OLD}" in root.sh("apt-cache policy pokdeng-table").stdout

    root.file(KEYRING).write_bytes(right_key)
    root.sh(update)
    policy = root.sh("apt-cache policy pokdeng-table").stdout
    assert f"Candidate: {NEW}" in policy, policy
    root.sh(f"apt-get install -y -q pokdeng-table={NEW}")
    assert root.sh("dpkg-query -W -f='${Version}' pokdeng-table").stdout == NEW
    # the studio's alert rules came with it, whole: their tests pass where they are installed
    if shutil.which("promtool"):
        installed = root.file("/usr/share/pokdeng-table/prometheus/alerts.test.yml")
        rules = subprocess.run(["promtool", "test", "rules", installed.name],
                               cwd=installed.parent, capture_output=True, text=True, timeout=120)
        assert rules.returncode == 0, rules.stdout + rules.stderr
    assert root.file("/usr/share/pokdeng-table/grafana/pokdeng-tables.json").is_file()


class Table:
    """One booted table: its root, its shoe and panel lines, and a dealer who deals rounds
    while the table is running, not paused and not draining (read from its events file)."""

    def __init__(self, name: str, root: Root, log: Path):
        self.name, self.root = name, root
        self.shoe, self.panel = Line(), Line()
        self.log = log
        self.booted: Booted | None = None
        self._stop = threading.Event()
        self._dealer = threading.Thread(target=self._deal, name=f"dealer-{name}", daemon=True)
        self.error: BaseException | None = None

    def config(self) -> dict:
        return {
            "table": {"id": self.name, "betting_seconds": 1},
            "shoe": {"driver": "beetek", "url": f"socket://127.0.0.1:{self.shoe.port}",
                     "reconnect_seconds": 0.2},
            "panel": {"driver": "line_panel", "url": f"socket://127.0.0.1:{self.panel.port}",
                      "reconnect_seconds": 0.2},
            "control": {"socket": "/run/pokdeng-table/control.sock",
                        "group": "pokdeng-control"},
            "journal": {"key_credential": "journal-key"},
            "transports": {"file": {"path": "/var/lib/pokdeng-table/events.jsonl"}},
        }

    def events(self) -> list[str]:
        path = self.root.file("/var/lib/pokdeng-table/events.jsonl")
        if not path.exists():
            return []
        return [json.loads(line)["type"] for line in path.read_text().splitlines()
                if line.strip()]

    def version(self) -> str:
        assert self.booted is not None
        return self.booted.sh("dpkg-query -W -f='${Version}' pokdeng-table").stdout

    def boot(self) -> None:
        self.booted = Booted(self.root, self.log)
        self.booted.wait("systemctl is-active pokdeng-table", f"{self.name} to start")
        self.booted.wait_status(lambda s: s["devices"].get("shoe") and s["devices"].get("panel"),
                                f"{self.name}'s shoe and panel to connect", timeout=60)
        self._dealer.start()

    def _wait_event(self, kind: str, count: int, timeout: float = 10) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stop.is_set():
            if self.events().count(kind) >= count:
                return True
            time.sleep(0.2)
        return False

    def _send(self, line: Line, data: bytes) -> None:
        try:
            line.send(data)
        except OSError:
            pass  # the daemon is restarting: the next connection takes the retry

    def _deal(self) -> None:
        try:
            while not self._stop.is_set() and "burn_completed" not in self.events():
                self._send(self.panel, b"new_shoe\n")
                if self._wait_event("shoe_started", 1, 5):
                    for card in FLIP_AND_BURNS:
                        self._send(self.shoe, f" [Game]<Card:{card}> ".encode())
                    self._wait_event("burn_completed", 1)
            while not self._stop.is_set():
                events = self.events()
                rounds = events.count("round_result")
                drained = events.count("drain_started") > events.count("drain_ended")
                paused = events.count("paused") > events.count("resumed")
                if rounds >= MAX_ROUNDS or drained or paused:
                    self._stop.wait(0.5)
                    continue
                opened = events.count("round_opened")
                self._send(self.panel, b"start_round\n")
                if not self._wait_event("round_opened", opened + 1, 5):
                    continue  # the daemon restarted meanwhile: press again
                for card in ROUND:
                    self._send(self.shoe, f" [Game]<Card:{card}> ".encode())
                self._wait_event("round_result", rounds + 1, 20)
                self._stop.wait(2)  # the result stays up a moment
        except BaseException as exc:  # the test reports it
            self.error = exc

    def close(self) -> None:
        self._stop.set()
        if self._dealer.is_alive():
            self._dealer.join(30)
        if self.booted is not None:
            self.booted.close()
        self.shoe.close()
        self.panel.close()


@pytest.mark.timeout(900)
def test_a_rolling_upgrade_stops_at_the_first_table_that_does_not_come_back(
        tmp_path: Path, base_tar: Path, debs: dict[str, Path], repo: Path,  # noqa: F811
        served: str) -> None:
    started = time.monotonic()
    tables = {name: Table(name, unpack(base_tar, tmp_path / name), tmp_path / f"{name}.log")
              for name in ("T01", "T02", "T03")}
    try:
        for table in tables.values():
            table.root.install(debs[OLD])
            configure(table.root)
            table.root.file("/etc/pokdeng-table/table.yaml").write_text(
                json.dumps(table.config()))
            take_repository(table.root, repo, served)
            table.root.sh("systemctl enable pokdeng-table")
        for table in tables.values():
            table.boot()
        for table in tables.values():
            table.booted.wait("test $(grep -c round_result "  # type: ignore[union-attr]
                              "/var/lib/pokdeng-table/events.jsonl) -ge 1",
                              f"{table.name} to deal a round", timeout=90)
        booted_in = time.monotonic() - started

        # T02 broken on purpose: its journal key removed under the running daemon (which read
        # it at start); it deals on, and cannot start again
        tables["T02"].root.file("/etc/pokdeng-table/credentials/journal-key").unlink()

        leaders = {name: table.booted.leader for name, table in tables.items()}  # type: ignore[union-attr]
        roll = subprocess.run(
            [str(FLEET_UPGRADE), "--version", NEW, "--via",
             "nsenter --target {host} --mount --uts --ipc --pid --root --wd --",
             "--start-timeout", "90", "--round-timeout", "120",
             *[f"{name}={leader}" for name, leader in leaders.items()]],
            capture_output=True, text=True, timeout=900)
        rolled_in = time.monotonic() - started - booted_in
        print(f"booted and dealing in {booted_in:.0f} s; roll in {rolled_in:.0f} s")
        print(roll.stdout, roll.stderr)

        assert roll.returncode == 1, roll.stdout + roll.stderr
        assert "STOPPED at T02: pokdeng-table failed after the upgrade" in roll.stderr
        assert "Failed at step CREDENTIALS" in roll.stderr.split("STOPPED at T02", 1)[1]
        assert "upgraded: T01; not touched: T03 (they keep their version)" in roll.stderr
        # T01: drained between rounds, upgraded, released, and dealt a round on the new version
        assert f"T01: runs {OLD}; draining" in roll.stdout
        assert f"T01: deals on {NEW}" in roll.stdout
        assert tables["T01"].version() == NEW
        t01 = tables["T01"].events()
        after_release = t01[len(t01) - t01[::-1].index("drain_ended"):]
        assert "round_result" in after_release
        assert t01.count("drain_started") == 1
        assert t01.index("drain_started") > t01.index("round_result")
        # T02: the new package is in, its table is down, and the roll said so
        assert tables["T02"].version() == NEW
        assert tables["T02"].booted.sh(  # type: ignore[union-attr]
            "systemctl is-failed pokdeng-table", check=False).stdout.strip() == "failed"
        # T03: never drained, still the old version, still dealing
        assert tables["T03"].version() == OLD
        assert "drain_started" not in tables["T03"].events()
        status = tables["T03"].booted.status()  # type: ignore[union-attr]
        assert not status["draining"] and not status["paused"] and status["fault"] is None
        for table in tables.values():
            assert table.error is None, (table.name, table.error)
    finally:
        for table in tables.values():
            table.close()
