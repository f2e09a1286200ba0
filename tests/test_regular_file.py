"""controller/regular_file.py's open for writing in place: only a plain file with one name,
never created, never through a link, never waiting on a FIFO (real files, real links)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controller.regular_file import NotARegularFile, open_regular_in_place


def test_a_plain_file_is_opened_for_writing_inside_it(tmp_path: Path) -> None:
    target = tmp_path / "journal.db-wal"
    target.write_bytes(b"abcdef")
    fd = open_regular_in_place(target)
    try:
        os.pwrite(fd, b"XY", 2)
        assert os.get_blocking(fd)
    finally:
        os.close(fd)
    assert target.read_bytes() == b"abXYef"


def test_nothing_there_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_regular_in_place(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize("plant", ["symlink", "hard link", "fifo", "directory"])
def test_anything_but_a_file_of_its_own_is_refused_naming_it(tmp_path: Path, plant: str) -> None:
    victim = tmp_path / "victim.conf"
    victim.write_bytes(b"keep me\n")
    name = tmp_path / "journal.db-wal"
    {"symlink": lambda: name.symlink_to(victim), "hard link": lambda: os.link(victim, name),
     "fifo": lambda: os.mkfifo(name), "directory": name.mkdir}[plant]()
    with pytest.raises(NotARegularFile) as caught:  # a FIFO: refused at once, no wait
        open_regular_in_place(name)
    assert caught.value.filename == str(name)
    assert victim.read_bytes() == b"keep me\n"
