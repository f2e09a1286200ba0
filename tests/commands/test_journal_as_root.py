"""Root's journal commands never work through the service user's links
(durability/as_owner.py): a real second user owns the state directory, as the package's
service user does, and plants links at every name the commands create or read (the journal,
its -wal and -shm, the head file, forked-*, the archives, temporary names) while root runs
``journal verify|export|archive|compact|continue`` and ``roadmap``. Nothing outside the state
directory is created, written, chowned or read; on a clean directory the commands still work
and what they make belongs to the directory's owner, as the daemon's own files do."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from controller.durability.archives.archive import archive_closed_shoes, archive_dir_for
from controller.durability.journal import Journal, export_events
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine

#: the second user runs the system's Python (the tests' own may live where only root reads)
SYSTEM_PYTHON = "/usr/bin/python3"

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as two users"),
              pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK),
                                 reason="the second user runs /usr/bin/python3"),
              pytest.mark.slow]

TABLE = "T7"
SETTINGS = MachineSettings(table_id=TABLE, decks=1)
KEY = b"as-root-test-chain-key-0123456789abcdef"
ROOT_FILE_TEXT = b"root's own file: nobody else writes it\n"

#: where the second user plants links, and the commands root runs meanwhile, each with the
#: links made ``create`` (each at a new name in a root-only directory) or ``write`` (at a
#: file of root's); a directory's name always at the root-only directory. The names: SQLite's
#: own files; the journal's, free once `continue` has set it aside; forked-<time> for the
#: seconds around now; the archive directory; inside a real archive directory, the temporary
#: names of its manifest and archives; the head file and the key beside the journal.
#: The racy ones run three times, each on a fresh copy of the state directory.
PLANS = {
    "sqlite files": (("journal.sqlite-wal", "journal.sqlite-shm", "journal.sqlite-journal"),
                     (("verify", "write"), ("export", "create"), ("roadmap", "write"),
                      ("compact", "create"), ("archive", "write"), ("continue", "create"))),
    "journal set aside": (("journal.sqlite",), (("continue", "create"),) * 3),
    "forked directory": (("forked-*",), (("continue", "create"),)),
    "archive directory": (("journal.sqlite.archive/",),
                          (("archive", "create"), ("export", "create"),
                           ("continue", "create"))),
    "archive files": (("journal.sqlite.archive/manifest.json.tmp",
                       "journal.sqlite.archive/*.tmp"),
                      (("archive", "create"), ("archive", "write"), ("archive", "create"))),
    "head and key": (("journal.sqlite.head", "journal.sqlite.head.tmp", "journal.key",
                      "journal.key.tmp"),
                     (("verify", "write"), ("roadmap", "create"), ("continue", "write"))),
}

#: the second user's loop: argv = state directory, stop file, then NAME=TARGET lines (a name
#: ending in * is a pattern: forked-<the seconds around now>)
ATTACKER = r"""
import os, sys, time
state, stop, plan = sys.argv[1:4]
links = [line.split("=", 1) for line in plan.splitlines()]

def plant(name, target):
    try:
        os.symlink(target, os.path.join(state, name))
    except OSError:
        pass  # there already (a real file or a link), or its directory is not there

while not os.path.exists(stop):
    for name, target in links:
        if name == "forked-*":
            now = time.time()
            for ahead in (-1, 0, 1, 2):
                plant(time.strftime("forked-%Y%m%dT%H%M%SZ", time.gmtime(now + ahead)), target)
        else:
            plant(name, target)
"""


def unused_id(taken: set[int]) -> int:
    for number in range(47000, 60000):
        if number not in taken:
            return number
    raise AssertionError("no unused id")


@dataclass
class Site:
    """A state directory owned by a second user, and what only root may touch beside it."""
    base: Path        # root's, 0711: the second user reaches the state directory through it
    state: Path       # the second user's, 0700 (StateDirectoryMode=)
    root_dir: Path    # root only (0700): nothing may appear in it
    root_file: Path   # root's file (0600): never written, chowned or read for another
    config: Path
    uid: int
    gid: int

    @property
    def journal(self) -> Path:
        return self.state / "journal.sqlite"

    @property
    def received(self) -> Path:
        return self.base / "received.jsonl"

    @property
    def key_file(self) -> Path:
        return self.base / "credentials" / "journal-key"

    def fresh(self, real_archive_directory: bool = False) -> None:
        """The state directory as the package leaves it, with the table's journal (and an
        empty archive directory, as retention makes it) and nothing else."""
        shutil.rmtree(self.state)
        self.state.mkdir(mode=0o700)
        shutil.copy(self.base / "pristine.sqlite", self.journal)
        if real_archive_directory:
            (self.state / "journal.sqlite.archive").mkdir(mode=0o750)
        for path in (self.state, *self.state.rglob("*")):
            os.chown(path, self.uid, self.gid, follow_symlinks=False)

    def archive_names(self) -> list[str]:
        """The archive files `journal archive` makes of this journal (found on a copy)."""
        copy = self.base / "names" / "journal.sqlite"
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(self.base / "pristine.sqlite", copy)
        archive_closed_shoes(copy, 0.0, settings=SETTINGS, key=KEY)
        names = sorted(path.name for path in archive_dir_for(copy).iterdir())
        shutil.rmtree(copy.parent)
        return names

    def root_file_as_it_was(self) -> tuple[int, int, int, float, bytes]:
        info = self.root_file.lstat()
        return (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode), info.st_mtime,
                self.root_file.read_bytes())


@pytest.fixture
def site() -> Iterator[Site]:
    uid = unused_id({user.pw_uid for user in pwd.getpwall()})
    gid = unused_id({group.gr_gid for group in grp.getgrall()})
    base = Path(tempfile.mkdtemp(prefix="pokdeng-as-root-"))
    try:
        base.chmod(0o711)
        state, root_dir, keys = base / "state", base / "root-only", base / "credentials"
        for directory in (state, root_dir, keys):
            directory.mkdir(mode=0o700)
        root_file = base / "root-file"
        root_file.write_bytes(ROOT_FILE_TEXT)
        root_file.chmod(0o600)
        (keys / "journal-key").write_bytes(KEY + b"\n")
        deal(base / "pristine.sqlite", shoes=2)
        config = base / "table.yaml"
        config.write_text(yaml.safe_dump({
            "table": {"id": TABLE, "betting_seconds": 15, "reveal": "auto", "decks": 1},
            "state_dir": str(state),
            "shoe": {"driver": "beetek", "url": str(base / "no-shoe")},
            "control": {"socket": str(base / "c.sock"),
                        "supervisor_group": grp.getgrgid(os.getgid()).gr_name},
            "transports": {"file": {"path": str(base / "events.jsonl")}},
            "journal": {"key_file": str(keys / "journal-key")},
            "logging": {"level": "info", "format": "json"}}))
        site = Site(base, state, root_dir, root_file, config, uid, gid)
        site.fresh()
        yield site
    finally:
        shutil.rmtree(base)


def deal(path: Path, shoes: int) -> None:
    machine = TableMachine(SETTINGS)
    clock = 0.0
    with Journal(path, KEY) as journal:
        for seed in range(1, shoes + 1):
            script = shoe_script(seed, decks=1, start_at=clock + 5)
            for inp in script:
                journal.append(inp, machine.handle(inp))
            clock = max(inp.at for inp in script)


def pokdeng(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=120)


def backend_event(site: Site, ahead: int = 40) -> Path:
    """The backend's last event: ``ahead`` events past the journal (a restored old copy). The
    table's file transport is that backend: its events file ends with that event, so it
    confirms the event handed in."""
    last = json.loads(list(export_events(site.journal))[-1])
    seq = last["seq"] + ahead
    event = {"v": 1, "id": f"{TABLE}:{seq}", "table": TABLE, "seq": seq, "shoe": 5,
             "round": 3, "type": "round_settled", "time": "2026-11-30T21:00:00.000Z",
             "data": {}}
    path = site.base / "backend-event.json"
    path.write_text(json.dumps(event) + "\n")
    (site.base / "events.jsonl").write_text(json.dumps(event) + "\n")
    return path


def commands(site: Site, event: Path) -> dict[str, tuple[str, ...]]:
    journal = str(site.journal)
    return {"verify": ("journal", "verify", journal, "--key-file", str(site.key_file)),
            "verify --config": ("journal", "verify", "--config", str(site.config)),
            # what the backend received, in a file only root may read: read as root
            "verify --against": ("journal", "verify", journal, "--key-file",
                                 str(site.key_file), "--against", str(site.received)),
            "export": ("journal", "export", journal, "--archives"),
            "roadmap": ("roadmap", journal, "--json"),
            "compact": ("journal", "compact", journal),
            "archive": ("journal", "archive", journal, "--older-than", "0s", "--config",
                        str(site.config)),
            "continue": ("journal", "continue", "--config", str(site.config),
                         "--backend-event", str(event), "--wait", "1", "--yes")}


def plan_lines(site: Site, names: tuple[str, ...], kind: str) -> str:
    """NAME=TARGET for the attacker: ``create``: a new name in the root-only directory (a
    directory's name: that directory); ``write``: root's file."""
    archives = ["journal.sqlite.archive/" + name for name in site.archive_names()]
    expanded = [n for name in names for n in ([a + ".tmp" for a in archives]
                                              if name.endswith("/*.tmp") else [name])]
    lines = []
    for name in expanded:
        if name.endswith("/") or name == "forked-*":
            target = site.root_dir
        elif kind == "create":
            target = site.root_dir / name.replace("/", "_")
        else:
            target = site.root_file
        lines.append(f"{name.rstrip('/')}={target}")
    return "\n".join(lines)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_links_planted_by_the_service_user_lead_root_nowhere(site: Site, plan: str) -> None:
    """Nothing appears in the root-only directory, root's file keeps its owner, mode, time
    and bytes, and no command fails with a traceback, whatever it met."""
    names, runs = PLANS[plan]
    before = site.root_file_as_it_was()
    met_links = 0
    for number, (name, kind) in enumerate(runs):
        site.fresh(real_archive_directory=plan == "archive files")
        command = commands(site, backend_event(site))[name]
        stop = site.base / f"stop-{number}"
        attacker = subprocess.Popen(
            [SYSTEM_PYTHON, "-I", "-c", ATTACKER, str(site.state), str(stop),
             plan_lines(site, names, kind)], user=site.uid, group=site.gid, extra_groups=[])
        try:
            done = pokdeng(*command)
        finally:
            stop.touch()
            attacker.wait(10)
        met_links += sum(1 for path in site.state.rglob("*") if path.is_symlink())
        assert "Traceback" not in done.stderr, (command, done.stderr)
        assert os.listdir(site.root_dir) == [], (command, done.stdout, done.stderr)
        assert site.root_file_as_it_was() == before, (command, done.stderr)
    assert met_links  # the second user did plant: the commands met its links


def test_a_journal_linked_to_one_only_root_reads_is_not_read(site: Site) -> None:
    """The second user replaces its journal with a link to a journal only root may read
    (another table's, kept for an audit): root's commands on the state directory do not
    print a byte of it."""
    secret = site.root_dir / "other-table.sqlite"
    shutil.copy(site.journal, secret)
    os.unlink(site.journal)
    os.symlink(secret, site.journal)
    os.lchown(site.journal, site.uid, site.gid)
    other_events = list(export_events(secret))
    for command in (("journal", "export", str(site.journal)),
                    ("journal", "verify", str(site.journal)),
                    ("roadmap", str(site.journal), "--json")):
        done = pokdeng(*command)
        assert done.returncode != 0, command
        assert "Traceback" not in done.stderr, done.stderr
        assert not any(line and line in done.stdout for line in other_events), command
        assert '"shoe"' not in done.stdout and "chain holds" not in done.stdout, done.stdout


def test_on_a_clean_directory_the_commands_work_and_leave_the_owners_files(
        site: Site) -> None:
    """Each command in turn, on the directory of a stopped table: it does its work, and every
    file in the directory is still the owner's after it (the daemon, as the owner, must open
    them all: `journal archive` as root used to leave root's archive directory there)."""
    event = backend_event(site)
    site.received.write_text("".join(line + "\n" for line in export_events(site.journal)))
    site.received.chmod(0o600)
    for command in commands(site, event).values():
        done = pokdeng(*command)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        not_the_owners = [str(path) for path in site.state.rglob("*")
                          if (path.lstat().st_uid, path.lstat().st_gid) != (site.uid, site.gid)]
        assert not_the_owners == [], command
    set_aside = next(site.state.glob("forked-*"))
    assert (set_aside / "journal.sqlite.archive" / "manifest.json").is_file()  # archived
    assert site.journal.is_file() and not (site.state / "journal.sqlite.archive").exists()
    # the daemon's user can write the new journal (as the daemon does when it starts) ...
    as_owner = subprocess.run(
        [SYSTEM_PYTHON, "-I", "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
         "c.execute('BEGIN IMMEDIATE'); c.execute('ROLLBACK')", str(site.journal)],
        user=site.uid, group=site.gid, extra_groups=[], capture_output=True, text=True)
    assert as_owner.returncode == 0, as_owner.stderr
    # ... and it is the continued journal, keyed with the table's key
    assert pokdeng("journal", "verify", "--config", str(site.config)).returncode == 0


def test_a_state_directory_others_may_write_is_refused(site: Site) -> None:
    """A root-owned directory that a group may write: its members could plant links, and
    there is no one user to act as."""
    os.chown(site.state, 0, site.gid)
    site.state.chmod(0o770)
    journal = str(site.journal)
    # verify says so on the key it would read beside the journal: exit 2, as for any key file
    # it cannot read
    for command, status in ((("journal", "export", journal), 1),
                            (("journal", "compact", journal), 1),
                            (("journal", "verify", journal), 2)):
        done = pokdeng(*command)
        assert done.returncode == status, (command, done.stderr)
        assert f"{site.state}: owned by root but writable by group {site.gid}" in done.stderr


def file_backend_in_state(site: Site) -> Path:
    """The table's config with its file transport's file in the state directory, where the
    service user controls what is at its name."""
    config = yaml.safe_load(site.config.read_text())
    config["transports"]["file"]["path"] = str(site.state / "events.jsonl")
    path = site.base / "table-state-file.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_file_backends_file_is_read_as_its_owner_and_only_when_regular(
        site: Site) -> None:
    """`journal continue` reads the file transport's file to confirm the event: the service
    user puts a FIFO there (it would hang root for ever), a link to a file only root may read
    (holding the very event, so it would confirm it), a device: each is refused, naming the
    file, at once, and nothing is continued."""
    config = file_backend_in_state(site)
    events = site.state / "events.jsonl"
    secret = site.root_dir / "events.jsonl"  # the backend's copy, where only root reads
    for plant, kind in (("fifo", "a FIFO"), ("link", "a link"), ("device", "a device")):
        event = backend_event(site)
        site.fresh()
        secret.write_bytes(event.read_bytes())
        if plant == "fifo":
            os.mkfifo(events)
        elif plant == "link":
            os.symlink(secret, events)
        else:
            os.mknod(events, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # as /dev/null
        os.chown(events, site.uid, site.gid, follow_symlinks=False)
        done = subprocess.run(
            [sys.executable, "-m", "controller", "journal", "continue", "--config",
             str(config), "--backend-event", str(event), "--wait", "5", "--yes"],
            capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, (plant, done.stdout, done.stderr)
        assert f"{events}: cannot read it: {kind}, not a regular file" in done.stderr, \
            (plant, done.stderr)
        assert "Traceback" not in done.stderr
        assert not list(site.state.glob("forked-*")), plant  # nothing continued
        os.unlink(events)


def test_fifos_at_the_journals_names_are_refused_not_waited_on(site: Site) -> None:
    """A FIFO at the head file's name, at the journal's -wal, or handed in as what a backend
    received: each command says what is there and ends; none waits for a writer, none
    fails with a traceback."""
    head = site.state / "journal.sqlite.head"
    wal = site.state / "journal.sqlite-wal"
    against = site.state / "received.jsonl"
    for fifo, command in (
            (head, ("journal", "verify", "--config", str(site.config))),
            (head, ("journal", "continue", "--config", str(site.config), "--backend-event",
                    "EVENT", "--wait", "3")),
            (wal, ("journal", "compact", str(site.journal))),
            (against, ("journal", "verify", str(site.journal), "--key-file",
                       str(site.key_file), "--against", str(against)))):
        event = backend_event(site)  # (reading the journal leaves its -wal: fresh after)
        site.fresh()
        os.mkfifo(fifo)
        os.chown(fifo, site.uid, site.gid)
        argv = [str(event) if arg == "EVENT" else arg for arg in command]
        done = subprocess.run([sys.executable, "-m", "controller", *argv],
                              capture_output=True, text=True, timeout=60)
        assert "Traceback" not in done.stderr, (command, done.stderr)
        if fifo != head or command[1] == "verify":
            assert done.returncode == 1, (command, done.stdout, done.stderr)
            assert f"{fifo}" in done.stderr and "FIFO" in done.stderr + done.stdout, \
                (command, done.stderr)


def test_verify_against_names_a_difference_as_the_owner(site: Site) -> None:
    """Run as the owner, who cannot read the interpreter's files when Python lives under
    /root: the digest of an event that differs needs a codec Python loads on first use; it
    is loaded before, and the difference is named."""
    lines = list(export_events(site.journal))
    edited = json.loads(lines[5])
    edited["time"] = "2026-01-01T00:00:00.000Z"
    lines[5] = json.dumps(edited)
    site.received.write_text("".join(line + "\n" for line in lines))
    done = pokdeng("journal", "verify", str(site.journal), "--key-file", str(site.key_file),
                   "--against", str(site.received))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "DIFFERS" in done.stderr, done.stderr


def test_a_state_directory_whose_group_is_root_is_not_acted_in_with_group_root(
        site: Site) -> None:
    """The state directory's group changed to root: root's commands would act with group 0
    and open what root's group may read. A user passwd knows is acted as with its own
    primary group; one it does not, with a directory whose group is root, is refused."""
    from controller.durability.as_owner import controller_of

    group_only = site.root_dir / "group-readable"
    group_only.write_text("root's group's secret\n")
    group_only.chmod(0o640)
    site.root_dir.chmod(0o750)
    os.chown(site.state, site.uid, 0)
    done = pokdeng("journal", "export", str(site.journal))
    assert done.returncode == 1, done.stdout
    assert f"{site.state}: its owner (uid {site.uid}) would be acted as with group 0" in \
        done.stderr
    nobody = pwd.getpwnam("nobody")
    assert nobody.pw_gid != 0
    os.chown(site.state, nobody.pw_uid, 0)
    owner = controller_of(site.state)
    assert owner is not None and (owner.uid, owner.gid) == (nobody.pw_uid, nobody.pw_gid)
