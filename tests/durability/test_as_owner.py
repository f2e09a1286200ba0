"""Who root acts as in a directory (durability/as_owner.py): the first owner other than root
on its path, through links too; a root-owned directory others may write is refused; the
block runs with that user's effective ids, and root's come back after it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.durability.as_owner import (
    Owner,
    UnsafeStateDirectory,
    as_owner_of,
    controller_of,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files away")

UID, GID = 47123, 47124  # ids no account has here: root gives them files


@pytest.fixture
def base() -> Iterator[Path]:
    """A root-owned directory (0755) outside /tmp's sticky bit, like /var/lib."""
    path = Path(tempfile.mkdtemp(prefix="pokdeng-owner-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def owned(path: Path, mode: int = 0o700) -> Path:
    path.mkdir(mode=mode)
    os.chown(path, UID, GID)
    return path


def test_root_alone_on_the_path_is_root(base: Path) -> None:
    (base / "root-only").mkdir(mode=0o700)
    assert controller_of(base / "root-only") is None
    assert controller_of(base / "root-only" / "not-yet") is None


def test_the_first_other_owner_on_the_path_controls_everything_below(base: Path) -> None:
    state = owned(base / "state")
    (state / "sub").mkdir()  # root's, but inside the user's directory: the user can swap it
    assert controller_of(state) == Owner(UID, GID, state)
    assert controller_of(state / "sub") == Owner(UID, GID, state)


def test_a_link_the_user_planted_is_theirs_wherever_it_leads(base: Path) -> None:
    state = owned(base / "state")
    (base / "root-only").mkdir(mode=0o700)
    link = state / "archive"
    link.symlink_to(base / "root-only")
    os.lchown(link, UID, GID)
    owner = controller_of(link)
    assert owner is not None and owner.uid == UID  # not root, though it leads to root's


def test_roots_own_link_into_a_users_directory_leads_to_that_user(base: Path) -> None:
    state = owned(base / "state")
    (base / "by-root").symlink_to(state)
    assert controller_of(base / "by-root") == Owner(UID, GID, state)


def test_a_root_directory_a_group_may_write_is_refused(base: Path) -> None:
    shared = base / "shared"
    shared.mkdir()
    os.chown(shared, 0, GID)
    shared.chmod(0o770)
    with pytest.raises(UnsafeStateDirectory) as refused:
        controller_of(shared)
    assert refused.value.filename == str(shared)
    assert str(refused.value.strerror).startswith(f"owned by root but writable by group {GID}")
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # like /tmp: others cannot replace what root made in it
    (sticky / "roots").mkdir(mode=0o700)
    assert controller_of(sticky / "roots") is None


def test_the_block_runs_as_the_owner_and_root_comes_back(base: Path) -> None:
    state = owned(base / "state")
    (base / "root-only").mkdir(mode=0o700)
    with as_owner_of(state) as owner:
        assert owner is not None and (os.geteuid(), os.getegid()) == (UID, GID)
        assert os.getgroups() == [GID]
        (state / "made").write_text("x")
        with pytest.raises(PermissionError):
            (base / "root-only" / "x").write_text("x")
        with as_owner_of(base / "root-only") as inner:  # root's own: as root, then back
            assert inner is None and os.geteuid() == 0
        assert os.geteuid() == UID
    assert (os.geteuid(), os.getegid()) == (0, 0)
    assert (state / "made").stat().st_uid == UID


PRIORITY_PROBE = """
import os, sys
from controller.durability.as_owner import as_owner_of
from controller.durability.idle_child import lower_own_priority, writing_at_normal_priority
lower_own_priority()
with as_owner_of(sys.argv[1]):
    with writing_at_normal_priority():
        print(os.geteuid(), os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0))
    print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0) == os.SCHED_IDLE)
"""


def test_a_command_at_idle_priority_still_writes_at_the_normal_one_as_the_owner(
        base: Path) -> None:
    """Root's journal command holds the journal's write lock at nice 0 (idle_child.py), as
    the owner too: the table's next append does not wait on a writer kept off the CPU."""
    state = owned(base / "state")
    done = subprocess.run([sys.executable, "-c", PRIORITY_PROBE, str(state)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    writing, after = done.stdout.splitlines()
    assert writing.split() == [str(UID), "0", str(os.SCHED_OTHER)]
    assert after.split() == ["19", "True"]  # and back down after it
