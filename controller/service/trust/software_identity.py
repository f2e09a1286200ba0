"""Which software this is: the version and a digest of the installed files.

A regulator's question is "is the code on this table the code that was certified?". Two
answers, and the digest says which it gave (``digest_of``):

- ``record``: the package is installed (a wheel, ``pip install``): the digest is SHA-256 over
  the installed distribution's RECORD entries for the packages' files (``controller/``,
  ``drivers/``: each file's path and recorded hash, read with ``importlib.metadata``), and
  ``verify_installed`` re-hashes each of those files against its RECORD entry, naming those
  that differ or are missing;
- ``sources``: an editable install, or code run from a checkout: no RECORD describes the
  files, so the digest is over the packages' ``.py`` files as they are (path and SHA-256 of
  each), and there is nothing to verify them against.

The Debian package installs more than the distribution: its venv, the systemd units, the udev
rule, sysusers and tmpfiles entries, docs, and its maintainer scripts. packaging/build-deb lists
every one of those files with its SHA-256 (``sha256sum`` format, the package's version in its
first line) in ``PACKAGE-FILES`` in the distribution's ``.dist-info``. When that list is there
the ``record`` digest covers it too, so a package that changes only a unit or a script (or only
its Debian revision: its changelog) is another software (``software_changed``), and
``verify_installed`` re-hashes its files as well; a conffile (under /etc) the operator edited
is reported, not counted as a difference (dpkg keeps such edits on purpose).

The daemon journals the result in a ``software`` input when it differs from the journal's last
one (controller/table/software.py), so replay never asks the running code.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import controller
import drivers
from controller import __version__

DISTRIBUTION = "pokdeng-table"
PACKAGE_FILES = "PACKAGE-FILES"  # in the .dist-info: the Debian package's list (build-deb)
PACKAGES = (controller, drivers)  # the top-level packages the distribution installs


@dataclass(frozen=True)
class SoftwareIdentity:
    version: str
    digest: str
    digest_of: str  # "record" or "sources"
    where: str      # the RECORD file, or the directory of the sources

    def as_dict(self) -> dict[str, str]:
        return {"version": self.version, "digest": self.digest, "digest_of": self.digest_of}


@dataclass
class Verification:
    identity: SoftwareIdentity
    checked: int = 0
    differing: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: the package's conffiles that differ from what it shipped: the operator's edits
    edited_conffiles: list[str] = field(default_factory=list)
    #: the Debian package is not fully installed (dpkg's word for it), else None
    unfinished: str | None = None
    #: why nothing could be checked (no RECORD describes the running files), else None
    cannot: str | None = None

    @property
    def ok(self) -> bool:
        return (self.cannot is None and not self.differing and not self.missing
                and self.unfinished is None)


def _installed_distribution() -> importlib.metadata.Distribution | None:
    """The installed distribution, when it is a normal install of the code running now."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    direct_url = dist.read_text("direct_url.json")
    if direct_url:
        try:
            if json.loads(direct_url).get("dir_info", {}).get("editable"):
                return None
        except (ValueError, AttributeError):
            pass
    running = Path(controller.__file__).resolve()
    if Path(str(dist.locate_file("controller/__init__.py"))).resolve() != running:
        return None  # another copy runs (a checkout on PYTHONPATH): RECORD is not about it
    if dist.read_text("RECORD") is None or not _recorded(dist):
        # a checkout's *.egg-info (setup.py egg_info, an old editable install): its file list
        # has no hashes, so there is nothing to verify the code against
        return None
    return dist


def _recorded(dist: importlib.metadata.Distribution) -> list[importlib.metadata.PackagePath]:
    """RECORD's entries for the packages' files: the code. Not the console script, which the
    installer writes for its interpreter (and records where ``pip --target`` did not put it)."""
    names = {package.__name__ for package in PACKAGES}
    return sorted((f for f in dist.files or () if f.hash is not None and f.parts[0] in names),
                  key=str)


def _source_files() -> list[tuple[str, Path]]:
    found = []
    for package in PACKAGES:
        assert package.__file__ is not None  # regular packages, each with its __init__.py
        root = Path(package.__file__).resolve().parent
        for path in root.rglob("*.py"):
            if "__pycache__" not in path.parts:
                found.append((f"{package.__name__}/{path.relative_to(root).as_posix()}", path))
    return sorted(found)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def current_identity() -> SoftwareIdentity:
    """The running software's version and digest (no file is re-hashed for ``record``)."""
    dist = _installed_distribution()
    digest = hashlib.sha256()
    if dist is not None:
        for entry in _recorded(dist):
            assert entry.hash is not None
            digest.update(f"{entry},{entry.hash.mode}={entry.hash.value}\n".encode())
        record = Path(str(dist.locate_file(f"{_dist_info(dist)}/RECORD")))
        package_files = _package_files(dist)
        if package_files is not None:
            digest.update(b"\0" + PACKAGE_FILES.encode() + b"\n" + package_files.read_bytes())
        return SoftwareIdentity(__version__, f"sha256:{digest.hexdigest()}", "record",
                                str(package_files or record))
    for name, path in _source_files():
        digest.update(f"{name}\0{_sha256_file(path)}\n".encode())
    where = str(Path(controller.__file__).resolve().parent.parent)
    return SoftwareIdentity(__version__, f"sha256:{digest.hexdigest()}", "sources", where)


def _dist_info(dist: importlib.metadata.Distribution) -> str:
    for entry in dist.files or ():
        if entry.name == "RECORD":
            return str(entry.parent)
    return "?.dist-info"


def _package_files(dist: importlib.metadata.Distribution) -> Path | None:
    """The Debian package's list of the files it installs, when this is that package."""
    path = Path(str(dist.locate_file(f"{_dist_info(dist)}/{PACKAGE_FILES}")))
    return path if path.is_file() else None


def _listed_files(package_files: Path) -> list[tuple[str, str]]:
    """``(sha256 hex, path)`` of each file PACKAGE-FILES lists (``sha256sum`` lines)."""
    listed = []
    for line in package_files.read_text().splitlines():
        if line and not line.startswith("#"):
            digest, _, path = line.partition("  ")
            listed.append((digest, path))
    return listed


def _recorded_hash(path: Path, mode: str) -> str:
    digest = hashlib.new(mode)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def verify_installed() -> Verification:
    """Re-hash every installed file against its RECORD entry."""
    identity = current_identity()
    dist = _installed_distribution()
    if dist is None:
        return Verification(identity, cannot=(
            f"the running code ({identity.where}) is an editable install or a checkout: no "
            f"RECORD describes its files (the digest is over its .py files as they are now)"))
    result = Verification(identity)
    for entry in _recorded(dist):
        assert entry.hash is not None
        path = Path(str(dist.locate_file(entry)))
        result.checked += 1
        try:
            if _recorded_hash(path, entry.hash.mode) != entry.hash.value:
                result.differing.append(str(entry))
        except FileNotFoundError:
            result.missing.append(str(entry))
        except (OSError, ValueError) as exc:  # unreadable, or a hash mode we do not know
            result.differing.append(f"{entry} ({exc})")
    package_files = _package_files(dist)
    for digest, name in _listed_files(package_files) if package_files is not None else []:
        result.checked += 1
        try:
            same = _sha256_file(Path(name)) == digest
        except FileNotFoundError:
            result.missing.append(name)
            continue
        except OSError as exc:
            result.differing.append(f"{name} ({exc.strerror})")
            continue
        if not same:
            (result.edited_conffiles if name.startswith("/etc/") else
             result.differing).append(name)
    if package_files is not None:
        result.unfinished = _unfinished_package()
    return result


def _unfinished_package() -> str | None:
    """dpkg's status of the package when it is not "installed" (an upgrade cut short by a
    power cut leaves it unpacked or half-configured: only ``dpkg --audit`` would say so)."""
    import shutil
    import subprocess

    if shutil.which("dpkg-query") is None:
        return None
    answer = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Status}", DISTRIBUTION],
                            capture_output=True, text=True)
    state = answer.stdout.strip()
    if answer.returncode != 0 or state == "installed":
        return None
    return (f"the Debian package is {state or 'unknown to dpkg'}, not installed: an upgrade "
            "did not finish; run `dpkg --configure -a` (`dpkg --audit` shows what is left)")


def describe(identity: SoftwareIdentity) -> dict[str, Any]:
    return {**identity.as_dict(), "where": identity.where}
