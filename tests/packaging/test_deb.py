"""The Debian package as a studio installs it: packaging/build-deb builds it (twice, as two
versions), real dpkg installs it into a clean Debian 12 root (mmdebstrap minbase with the
package's Depends, nothing else; the .deb itself installs offline), and the tests look at what
is there: files, users, groups and modes, `systemd-analyze verify` of the installed units,
`config check` of the example with its credentials, `version --verify`, an upgrade that keeps
the journal, the config and the credentials, remove and purge, and lintian.

Each test unpacks its own root and runs in it through private mount and network namespaces
(unshare: /proc and /dev for the chroot, gone when the test's command ends; no network, so the
package is shown to install offline). The upgrade of running tables boots the root with
systemd-nspawn (systemd as PID 1, the real hardened units). Needs root, mmdebstrap,
dpkg-deb, Debian 12's python3-venv and lintian (`.ci/run` installs them); the clean root is
built once per Depends line and cached in $POKDENG_DEB_ROOT_CACHE (default
~/.cache/pokdeng-table), which needs Debian's mirror the first time only.
"""

from __future__ import annotations

import filecmp
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "packaging" / "build-deb"
MIRROR = os.environ.get("POKDENG_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CACHE = Path(os.environ.get("POKDENG_DEB_ROOT_CACHE",
                            Path.home() / ".cache" / "pokdeng-table"))
UPSTREAM = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
OLD, NEW = f"{UPSTREAM}-0test1", f"{UPSTREAM}-0test2"
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
       "DEBIAN_FRONTEND": "noninteractive"}


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (dpkg and chroot in a clean Debian root)"
    for tool, package in (("mmdebstrap", "mmdebstrap"), ("dpkg-deb", "dpkg"),
                          ("unshare", "util-linux"), ("git", "git")):
        if shutil.which(tool) is None:
            return f"{tool} not installed (Debian package: {package})"
    if subprocess.run(["/usr/bin/python3", "-c", "import ensurepip, venv"],
                      capture_output=True).returncode != 0:
        return "Debian's python3-venv is not installed"
    return None


# .ci/run installs what the tests need and requires them: there a missing tool fails the tests.
REQUIRED = os.environ.get("POKDENG_PACKAGE_TEST") == "required"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_missing() is not None and not REQUIRED,
                                                   reason=_missing() or "")]


def head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def build(out: Path, version: str, commit: str) -> Path:
    result = subprocess.run([str(BUILD), "--version", version, "--rev", commit, "--out",
                             str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    deb = Path(result.stdout.strip().splitlines()[-1])
    assert deb.is_file() and deb.parent == out
    return deb


@pytest.fixture(scope="module")
def debs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two builds of this clone's commit, the second a later version (for the upgrade)."""
    if _missing():
        pytest.fail(f"POKDENG_PACKAGE_TEST=required, but: {_missing()}")
    out, commit = tmp_path_factory.mktemp("debs"), head()
    return {OLD: build(out, OLD, commit), NEW: build(out, NEW, commit)}


def depends(deb: Path) -> list[str]:
    field = control(deb, "Depends")
    return sorted({part.split()[0] for part in field.replace("|", ",").split(",") if part.strip()})


@pytest.fixture(scope="module")
def base_tar(debs: dict[str, Path]) -> Path:
    """A clean Debian 12 minbase root with the package's Depends, built once and cached."""
    packages = ",".join(depends(debs[OLD]))
    key = hashlib.sha256(f"bookworm minbase {packages}".encode()).hexdigest()[:16]
    tar = CACHE / f"bookworm-minbase-{key}.tar"
    if not tar.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = CACHE / f"partial-{os.getpid()}-{tar.name}"  # .tar: mmdebstrap's format
        result = subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase",
                                 f"--include={packages}", "bookworm", str(partial), MIRROR],
                                capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
        partial.rename(tar)
    return tar


class Root:
    """A clean Debian root unpacked for one test; commands run in it as root, with no network
    (a network namespace of their own): the package installs, upgrades and runs offline."""

    def __init__(self, path: Path):
        self.path = path

    def sh(self, script: str, check: bool = True, env: dict[str, str] | None = None,
           proc: bool = True) -> subprocess.CompletedProcess:
        """``proc``: with /proc mounted (False: a chroot as an image build has it, bare)."""
        wrapper = (('mount -t proc proc "$1/proc" && ' if proc else '')
                   + 'mount --rbind /dev "$1/dev" && exec chroot "$1" /bin/sh -ec "$2"')
        result = subprocess.run(
            ["unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "sh", "-c", wrapper,
             "sh", str(self.path), script],
            capture_output=True, text=True, timeout=600, env={**ENV, **(env or {})})
        if check:
            assert result.returncode == 0, (script, result.stdout[-3000:],
                                            result.stderr[-3000:])
        return result

    def file(self, path: str) -> Path:
        return self.path / path.lstrip("/")

    def install(self, deb: Path) -> subprocess.CompletedProcess:
        shutil.copy(deb, self.file("/tmp") / deb.name)
        return self.sh(f"dpkg -i /tmp/{deb.name}")

    def stat(self, path: str) -> tuple[str, str, str]:
        mode, owner, group = self.sh(f"stat -c '%a %U %G' {path}").stdout.split()
        return mode, owner, group

    def digests(self, *paths: str) -> dict[str, str]:
        """SHA-256 of every file under the paths (as the root sees them)."""
        found = {}
        for top in paths:
            for path in sorted(self.file(top).rglob("*")) if self.file(top).is_dir() \
                    else [self.file(top)]:
                if path.is_file():
                    found[str(path.relative_to(self.path))] = hashlib.sha256(
                        path.read_bytes()).hexdigest()
        return found


@pytest.fixture
def root(tmp_path: Path, base_tar: Path) -> Iterator[Root]:
    path = tmp_path / "root"
    path.mkdir()
    subprocess.run(["tar", "-xf", str(base_tar), "-C", str(path)], check=True, timeout=300)
    yield Root(path)
    shutil.rmtree(path, ignore_errors=True)


def configure(root: Root) -> None:
    """What docs/install.md has the operator do: the config from the example, the credentials."""
    root.sh("install -m640 -o root -g pokdeng /etc/pokdeng-table/example.yaml "
            "/etc/pokdeng-table/table.yaml\n"
            "printf the-table-secret | install -m600 /dev/stdin "
            "/etc/pokdeng-table/credentials/backend-secret\n"
            "printf '%064d' 7 | install -m600 /dev/stdin "
            "/etc/pokdeng-table/credentials/journal-key")


def play_demo(root: Root) -> None:
    """A real journal in the state directory: two rounds of the demo table, keyed chain."""
    root.sh("pokdeng-table demo --rounds 2 --no-display --quiet "
            "--state-dir /var/lib/pokdeng-table/demo")
    assert root.file("/var/lib/pokdeng-table/demo/journal.sqlite").stat().st_size > 0


def test_install_puts_files_users_groups_and_modes_in_place_and_leaves_the_table_off(
        root: Root, debs: dict[str, Path]) -> None:
    result = root.install(debs[OLD])
    assert "installed, not enabled" in result.stdout
    # the metrics files' directory (docs/install.md §9), the daemon's to write
    assert root.stat("/var/lib/pokdeng-table-metrics") == ("755", "pokdeng", "pokdeng")
    # the guide's step 3 copies the udev rule to /etc/udev/rules.d and runs udevadm
    assert "udev" in depends(debs[OLD])
    assert root.file("/etc/udev/rules.d").is_dir() and root.file("/bin/udevadm").exists()

    listed = set(root.sh("dpkg -L pokdeng-table").stdout.split())
    for path in ("/usr/bin/pokdeng-table", "/opt/pokdeng-table/venv/bin/pokdeng-table",
                 "/lib/systemd/system/pokdeng-table.service",
                 "/lib/systemd/system/pokdeng-table@.service",
                 "/lib/systemd/system/pokdeng-display.service",
                 "/usr/lib/sysusers.d/pokdeng-table.conf",
                 "/usr/lib/sysusers.d/pokdeng-display.conf",
                 "/usr/lib/tmpfiles.d/pokdeng-table.conf", "/lib/udev/rules.d/99-pokdeng.rules",
                 "/usr/share/man/man1/pokdeng-table.1.gz",
                 "/usr/share/bash-completion/completions/pokdeng-table",
                 "/usr/share/zsh/vendor-completions/_pokdeng-table",
                 "/usr/share/doc/pokdeng-table/install.md",
                 "/usr/share/doc/pokdeng-table/copyright",
                 "/etc/pokdeng-table/example.yaml"):
        assert path in listed, path
        assert root.file(path).exists() or root.file(path).is_symlink(), path
    conffiles = root.sh("dpkg-query -W -f='${Conffiles}' pokdeng-table").stdout.split()
    assert "/etc/pokdeng-table/example.yaml" in conffiles

    # users and groups from sysusers.d; the daemon's group is nobody else's
    passwd = root.sh("getent passwd pokdeng").stdout.strip().split(":")
    assert passwd[5:] == ["/var/lib/pokdeng-table", "/usr/sbin/nologin"]
    for group in ("pokdeng", "pokdeng-control", "pokdeng-supervisor", "pokdeng-display"):
        members = root.sh(f"getent group {group}").stdout.strip().split(":")[3]
        assert members == "", (group, members)
    assert "pokdeng-display" in root.sh("id -nG pokdeng-display").stdout.split()
    assert "video" in root.sh("id -nG pokdeng-display").stdout.split()

    # directories from tmpfiles.d: the config for the daemon's group, the secrets for root
    assert root.stat("/etc/pokdeng-table") == ("750", "root", "pokdeng")
    assert root.stat("/etc/pokdeng-table/credentials") == ("700", "root", "root")
    assert root.stat("/usr/bin/pokdeng-table")[1:] == ("root", "root")

    # installed, not enabled or started: the operator enables it once it is configured
    enabled = root.sh("systemctl is-enabled pokdeng-table.service pokdeng-display.service",
                      check=False)
    assert enabled.stdout.split() == ["disabled", "disabled"], enabled
    assert not list(root.file("/etc/systemd/system").rglob("pokdeng*"))

    # the program runs from its venv, is the one the package installed, and has its bytecode
    version = root.sh("pokdeng-table version --verify")
    assert re.search(r"verified: all \d+ installed files match RECORD", version.stdout)
    assert f"pokdeng-table {UPSTREAM}" in version.stdout
    assert list(root.file("/opt/pokdeng-table/venv/lib").rglob("controller/__pycache__/*.pyc"))
    # ... and says so when a file is not what the package installed
    rtp = next(root.file("/opt/pokdeng-table/venv/lib").rglob("controller/rules/rtp.py"))
    rtp.write_text(rtp.read_text() + "\n# edited\n")
    tampered = root.sh("pokdeng-table version --verify", check=False)
    assert tampered.returncode == 1 and "changed: controller/rules/rtp.py" in tampered.stderr

    # the man page opens, and every document it names (SEE ALSO, the commands' help) is there
    page = root.sh("zcat /usr/share/man/man1/pokdeng-table.1.gz").stdout
    named = re.findall(r"(/usr/share/doc/pokdeng\\-table/[\w.\\-]+\.(?:md|json)"
                       r"|/etc/pokdeng\\-table/example\.yaml)", page)
    assert len(re.findall(r"/usr/share/doc/", page.split(".SH SEE ALSO", 1)[1])) >= 3
    assert "/etc/pokdeng\\-table/example.yaml" in named
    for path in named:
        assert root.file(path.replace("\\-", "-")).is_file(), path
    # the completion script is bash, and completes the installed program's commands
    completion = root.sh("bash -c '. /usr/share/bash-completion/completions/pokdeng-table; "
                         "COMP_WORDS=(pokdeng-table sup); COMP_CWORD=1; "
                         "COMP_LINE=\"pokdeng-table sup\"; COMP_POINT=${#COMP_LINE}; "
                         "_shtab_pokdeng_table; echo \"${COMPREPLY[*]}\"'")
    assert completion.stdout.split() == ["supervisor"]


def test_the_package_configures_in_a_chroot_without_proc(root: Root,
                                                          debs: dict[str, Path]) -> None:
    """An image being prepared: a bare chroot, no /proc, no systemd running. systemd-tmpfiles
    refuses to run there; the package must still end configured, with its directories made."""
    shutil.copy(debs[OLD], root.file("/tmp") / debs[OLD].name)
    installed = root.sh(f"test ! -e /proc/self && dpkg -i /tmp/{debs[OLD].name}", proc=False)
    assert "installed, not enabled" in installed.stdout
    assert root.sh("dpkg-query -W -f='${db:Status-Abbrev}' pokdeng-table",
                   proc=False).stdout.strip() == "ii"
    assert root.sh("dpkg --audit", proc=False).stdout == ""
    assert root.stat("/etc/pokdeng-table") == ("750", "root", "pokdeng")
    assert root.stat("/etc/pokdeng-table/credentials") == ("700", "root", "root")
    assert root.stat("/var/lib/pokdeng-table-metrics") == ("755", "pokdeng", "pokdeng")
    # and the upgrade the same way
    shutil.copy(debs[NEW], root.file("/tmp") / debs[NEW].name)
    root.sh(f"dpkg -i /tmp/{debs[NEW].name}", proc=False)
    assert root.sh("dpkg --audit", proc=False).stdout == ""


def test_the_packages_files_are_its_identity(root: Root, debs: dict[str, Path]) -> None:
    """Two builds of one commit, two revisions of the package: two digests; every file the
    package installs is verified, and an edited conffile is named but is no failure."""
    root.install(debs[OLD])
    old = json.loads(root.sh("pokdeng-table version --json").stdout)
    listed = root.sh("cat /opt/pokdeng-table/venv/lib/python3.11/site-packages/"
                     "pokdeng_table-*.dist-info/PACKAGE-FILES").stdout
    assert listed.startswith(f"# pokdeng-table {OLD} ")
    for path in ("/lib/systemd/system/pokdeng-table.service", "/lib/udev/rules.d/99-pokdeng.rules",
                 "/usr/lib/tmpfiles.d/pokdeng-table.conf", "/etc/pokdeng-table/example.yaml",
                 "/var/lib/dpkg/info/pokdeng-table.postinst"):
        assert f"  {path}\n" in listed, path
    root.sh("echo '# this studio' >> /etc/pokdeng-table/example.yaml")
    verified = root.sh("pokdeng-table version --verify")
    assert "and PACKAGE-FILES" in verified.stdout
    assert "edited conffile (yours to keep): /etc/pokdeng-table/example.yaml" in verified.stdout
    root.sh("echo '# edited' >> /lib/systemd/system/pokdeng-table.service")
    changed = root.sh("pokdeng-table version --verify", check=False)
    assert changed.returncode == 1
    assert "changed: /lib/systemd/system/pokdeng-table.service" in changed.stderr
    root.install(debs[NEW])
    new = json.loads(root.sh("pokdeng-table version --json").stdout)
    assert new["version"] == old["version"] and new["digest"] != old["digest"]
    root.sh("pokdeng-table version --verify")
    # an upgrade cut short after the unpack (a power cut): verify says so, not only dpkg --audit
    shutil.copy(debs[OLD], root.file("/tmp") / debs[OLD].name)
    root.sh(f"dpkg --unpack /tmp/{debs[OLD].name}")
    unfinished = root.sh("pokdeng-table version --verify", check=False)
    assert unfinished.returncode == 1
    assert "NOT VERIFIED: the Debian package is unpacked, not installed" in unfinished.stderr
    root.sh("dpkg --configure -a && pokdeng-table version --verify")


def test_systemd_analyze_verifies_the_installed_units(root: Root,
                                                      debs: dict[str, Path]) -> None:
    root.install(debs[OLD])
    units = ["/lib/systemd/system/pokdeng-table.service",
             "/lib/systemd/system/pokdeng-table@.service",
             "/lib/systemd/system/pokdeng-table@T01.service"]
    result = root.sh("systemd-analyze verify " + " ".join(units), check=False)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "pokdeng" in line] == []
    # the display's kiosk needs cage and chromium, which the package only suggests: verify
    # finds nothing else wrong with its unit
    display = root.sh("systemd-analyze verify /lib/systemd/system/pokdeng-display.service",
                      check=False)
    problems = [line for line in display.stderr.splitlines() if "pokdeng" in line]
    assert problems == ["pokdeng-display.service: Command /usr/bin/cage is not executable: "
                        "No such file or directory"], display.stderr


def test_config_check_passes_on_the_example_with_its_credentials(root: Root,
                                                                 debs: dict[str, Path]) -> None:
    root.install(debs[OLD])
    root.sh("install -m640 -o root -g pokdeng /etc/pokdeng-table/example.yaml "
            "/etc/pokdeng-table/table.yaml")
    check = ("CREDENTIALS_DIRECTORY=/etc/pokdeng-table/credentials "
             "pokdeng-table config check /etc/pokdeng-table/table.yaml")
    missing = root.sh(check, check=False)
    assert missing.returncode == 78, missing
    assert "backend-secret" in missing.stdout + missing.stderr
    configure(root)
    passed = root.sh(check, check=False)
    assert passed.returncode == 0, passed


def test_an_upgrade_keeps_the_journal_the_config_and_the_credentials(
        root: Root, debs: dict[str, Path]) -> None:
    root.install(debs[OLD])
    configure(root)
    root.sh("echo '# this studio: T01' >> /etc/pokdeng-table/example.yaml\n"
            "echo '# edited' >> /etc/pokdeng-table/table.yaml")
    play_demo(root)
    ids = root.sh("id pokdeng; id pokdeng-display").stdout
    kept = root.digests("/var/lib/pokdeng-table", "/etc/pokdeng-table")
    assert any(path.endswith("journal.sqlite") for path in kept)

    upgrade = root.install(debs[NEW])
    assert "Unpacking pokdeng-table (" + NEW in upgrade.stdout
    assert root.sh("dpkg-query -W -f='${Version} ${db:Status-Abbrev}' pokdeng-table") \
        .stdout.split() == [NEW, "ii"]
    assert root.digests("/var/lib/pokdeng-table", "/etc/pokdeng-table") == kept
    assert root.sh("id pokdeng; id pokdeng-display").stdout == ids
    assert root.stat("/etc/pokdeng-table") == ("750", "root", "pokdeng")
    assert root.stat("/etc/pokdeng-table/credentials") == ("700", "root", "root")
    # the new program reads the old journal, chain and key, and is itself as packaged
    verify = root.sh("pokdeng-table journal verify --state-dir /var/lib/pokdeng-table/demo")
    assert "chain holds" in verify.stdout
    root.sh("pokdeng-table version --verify")
    root.sh("CREDENTIALS_DIRECTORY=/etc/pokdeng-table/credentials "
            "pokdeng-table config check /etc/pokdeng-table/table.yaml")
    changelog = root.sh("zcat /usr/share/doc/pokdeng-table/changelog.Debian.gz").stdout
    assert changelog.startswith(f"pokdeng-table ({NEW})")


def test_remove_keeps_the_journal_and_purge_says_what_it_keeps(
        root: Root, debs: dict[str, Path]) -> None:
    root.install(debs[OLD])
    configure(root)
    play_demo(root)
    journal = root.digests("/var/lib/pokdeng-table")
    operator = root.digests("/etc/pokdeng-table/table.yaml", "/etc/pokdeng-table/credentials")
    shipped = [line.split(None, 5)[5].split(" -> ")[0].lstrip(".") for line in subprocess.run(
        ["dpkg-deb", "-c", str(debs[OLD])], capture_output=True, text=True,
        check=True).stdout.splitlines() if not line.startswith("d")]

    root.sh("dpkg -r pokdeng-table")
    assert not root.file("/opt/pokdeng-table").exists()  # the venv and its bytecode
    assert not root.file("/usr/bin/pokdeng-table").is_symlink()
    assert root.digests("/var/lib/pokdeng-table") == journal
    assert root.digests("/etc/pokdeng-table/table.yaml",
                        "/etc/pokdeng-table/credentials") == operator
    assert root.file("/etc/pokdeng-table/example.yaml").is_file()  # conffiles stay till purge

    # the operator's own files: the udev rule's copy, a drop-in and the studio repository's
    # APT source and key (docs/install.md §3, §5, §10)
    root.sh("mkdir -p /etc/udev/rules.d /etc/systemd/system/pokdeng-table.service.d "
            "/etc/apt/keyrings\n"
            "echo '# our shoe ids' > /etc/udev/rules.d/99-pokdeng.rules\n"
            "echo '[Service]' > /etc/systemd/system/pokdeng-table.service.d/credentials.conf\n"
            "echo 'deb [signed-by=/etc/apt/keyrings/pokdeng-table.gpg] http://repo.studio/p "
            "bookworm main' > /etc/apt/sources.list.d/pokdeng-table.list\n"
            ": > /etc/apt/keyrings/pokdeng-table.gpg")
    purge = root.sh("dpkg -P pokdeng-table")
    assert "Kept, as the casino's record" in purge.stdout
    yours = purge.stdout.split("Kept, yours", 1)[1].splitlines()[1:]
    assert yours == ["  /etc/udev/rules.d/99-pokdeng.rules",
                     "  /etc/systemd/system/pokdeng-table.service.d",
                     "  /etc/apt/sources.list.d/pokdeng-table.list",
                     "  /etc/apt/keyrings/pokdeng-table.gpg"]
    assert "  /var/lib/pokdeng-table" in purge.stdout.splitlines()
    assert "  /etc/pokdeng-table" in purge.stdout.splitlines()
    assert root.digests("/var/lib/pokdeng-table") == journal
    assert root.digests("/etc/pokdeng-table/table.yaml",
                        "/etc/pokdeng-table/credentials") == operator
    left = [path for path in shipped if root.file(path).exists() or root.file(path).is_symlink()]
    assert left == []
    status = root.sh("dpkg-query -W -f='${db:Status-Abbrev}' pokdeng-table", check=False)
    assert status.returncode != 0 or status.stdout.strip() in ("", "pn")
    root.sh("getent passwd pokdeng")  # the journal's files are still the daemon user's


def test_a_first_install_moves_a_venv_made_by_hand_aside_and_names_what_hides_the_package(
        root: Root, debs: dict[str, Path]) -> None:
    """The install by hand that came before the package: a venv at the same path, a unit copied
    into /etc/systemd/system, a manual page under /usr/local."""
    root.sh("python3 -m venv --without-pip /opt/pokdeng-table/venv\n"
            "mkdir /opt/pokdeng-table/venv/lib/python3.11/site-packages/"
            "structlog-25.1.0.dist-info\n"
            "echo 'Name: structlog' > /opt/pokdeng-table/venv/lib/python3.11/site-packages/"
            "structlog-25.1.0.dist-info/METADATA\n"
            "mkdir -p /usr/local/share/man/man1 && : > /usr/local/share/man/man1/pokdeng-table.1")
    shutil.copy(REPO / "systemd" / "pokdeng-table.service",
                root.file("/etc/systemd/system/pokdeng-table.service"))
    result = root.install(debs[OLD])
    assert "the venv installed by hand is now /opt/pokdeng-table/venv.before-package" \
        in result.stdout
    assert root.file("/opt/pokdeng-table/venv.before-package/lib/python3.11/site-packages/"
                     "structlog-25.1.0.dist-info/METADATA").is_file()
    site = root.file("/opt/pokdeng-table/venv/lib/python3.11/site-packages")
    assert len(list(site.glob("structlog-*.dist-info"))) == 1  # the package's one only
    assert not (site / "structlog-25.1.0.dist-info").exists()
    root.sh("pokdeng-table version --verify")
    assert "/etc/systemd/system/pokdeng-table.service overrides the package's unit" \
        in result.stderr
    assert "/usr/local/share/man/man1/pokdeng-table.1 hides" in result.stderr


def test_the_same_commit_builds_the_same_bytes(debs: dict[str, Path], tmp_path: Path) -> None:
    again = build(tmp_path, OLD, head_of(debs[OLD]))
    # compared as files, and told by what differs: pytest's diff of two packages' bytes
    # takes longer than the test's timeout
    if not filecmp.cmp(debs[OLD], again, shallow=False):
        pytest.fail("two builds of one commit differ:\n" + differences(debs[OLD], again))


def test_the_installed_size_is_counted_from_the_files_not_the_build_disk(
        debs: dict[str, Path]) -> None:
    """dpkg-gencontrol's count (each file or link rounded up to a KiB, anything else a KiB):
    a build disk's blocks vary with its history and made one commit build different bytes."""
    with package_files(debs[OLD]) as tar:
        members = [m for m in tar.getmembers() if m.name not in (".", "./")]
    counted = sum(-(-m.size // 1024) if m.isfile() else
                  -(-len(m.linkname.encode()) // 1024) if m.issym() else 1 for m in members)
    assert control(debs[OLD], "Installed-Size").strip() == str(counted)


def package_files(deb: Path) -> tarfile.TarFile:
    """The files a package installs, as a tar archive read in memory (use it in ``with``)."""
    tar_bytes = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True,
                               check=True).stdout
    return tarfile.open(fileobj=io.BytesIO(tar_bytes))


def control(deb: Path, *fields: str) -> str:
    """The package's control fields (all of them when none is named), as dpkg-deb prints them."""
    return subprocess.run(["dpkg-deb", "-f", str(deb), *fields], capture_output=True, text=True,
                          check=True).stdout


def differences(one: Path, other: Path) -> str:
    """What differs between two packages: control fields, then files (name, size, time, digest)."""
    def files(deb: Path) -> set[tuple]:
        with package_files(deb) as tar:
            return {(m.name, m.size, m.mtime, m.mode,
                     hashlib.sha256(tar.extractfile(m).read()).hexdigest()[:12] if m.isfile() else
                     m.linkname) for m in tar.getmembers()}

    fields = set(control(one).splitlines()) ^ set(control(other).splitlines())
    lines = [f"control: {sorted(fields)}"]
    lines += [f"file: {entry}" for entry in sorted(files(one) ^ files(other))[:40]]
    return "\n".join(lines)


def head_of(deb: Path) -> str:
    """The commit a package was built from (its changelog names it)."""
    with package_files(deb) as tar:
        member = tar.extractfile("./usr/share/doc/pokdeng-table/changelog.Debian.gz")
        assert member is not None
        text = gzip.decompress(member.read()).decode()
    return re.search(r"commit ([0-9a-f]+)", text).group(1)


@pytest.mark.skipif(shutil.which("lintian") is None and not REQUIRED,
                    reason="lintian not installed (Debian package: lintian)")
def test_lintian_finds_nothing_that_is_not_overridden_with_a_reason(
        debs: dict[str, Path]) -> None:
    result = subprocess.run(["lintian", "--info", "--fail-on", "error,warning",
                             str(debs[OLD])], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout
    tags = [line for line in result.stdout.splitlines() if re.match(r"[EW]: ", line)]
    assert tags == []
    # every override is still needed (an unused one hides nothing and explains nothing)
    assert "unused-override" not in result.stdout and "mismatched-override" not in result.stdout
    overrides = (REPO / "packaging" / "debian" / "lintian-overrides").read_text().split("\n\n")
    for block in overrides:
        lines = block.strip().splitlines()
        if any(line.startswith("pokdeng-table:") for line in lines):
            assert lines[0].startswith("#"), f"an override without its reason: {block}"


# --- booted: the upgrade of a running table, under systemd --------------------------------------

ROUND = ("8D", "KD", "QS", "JH", "9C", "2D", "3H", "4S", "5C", "6D", "7H", "8S", "TC")
FLIP_AND_BURNS = ("5H", "2C", "3C", "4C", "6C", "7C")


def _cannot_boot() -> str | None:
    if shutil.which("systemd-nspawn") is None:
        return "systemd-nspawn not installed (Debian package: systemd-container)"
    return _missing()


class Line:
    """The far end of a serial device the daemon opens as socket://127.0.0.1:PORT: a TCP
    server on loopback (the container shares the host's network); the latest connection is
    the device's cable."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.conn: socket.socket | None = None
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conn = conn

    def send(self, data: bytes) -> None:
        deadline = time.monotonic() + 30
        while self.conn is None:
            assert time.monotonic() < deadline, "the daemon never connected"
            time.sleep(0.05)
        self.conn.sendall(data)

    def close(self) -> None:
        self.server.close()
        if self.conn is not None:
            self.conn.close()


class Booted:
    """The root booted with systemd as PID 1 (systemd-nspawn --boot, the host's network);
    commands run inside it with nsenter, as root."""

    def __init__(self, root: Root, log: Path):
        self.root = root
        self.log = log.open("wb")
        self.proc = subprocess.Popen(
            ["systemd-nspawn", "--quiet", "--directory", str(root.path), "--register=no",
             "--keep-unit", "--boot"], stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=subprocess.STDOUT)
        self.leader = self._leader()

    def _leader(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "systemd-nspawn exited"
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                children = (task / "children").read_text().split()
                if children:
                    return int(children[0])
            time.sleep(0.1)
        raise AssertionError("the container's init did not start")

    def command(self, script: str) -> list[str]:
        return ["nsenter", "--target", str(self.leader), "--mount", "--uts", "--ipc", "--pid",
                "--root", "--wd", "--", "/bin/sh", "-ec", script]

    def sh(self, script: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(self.command(script), capture_output=True, text=True,
                                timeout=120, env=ENV)
        if check:
            assert result.returncode == 0, (script, result.stdout[-3000:], result.stderr[-3000:])
        return result

    def wait(self, script: str, what: str, timeout: float = 60) -> str:
        """Run ``script`` until it succeeds; its output."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.sh(script, check=False)
            if result.returncode == 0:
                return result.stdout
            if time.monotonic() > deadline:
                log = self.sh("journalctl -u 'pokdeng-table*' -n 40 --no-pager -o cat",
                              check=False).stdout
                raise AssertionError(f"{what}: {result.stdout} {result.stderr}\n{log}")
            time.sleep(0.3)

    def status(self) -> dict:
        return json.loads(self.sh("pokdeng-table status --json").stdout)

    def wait_status(self, predicate, what: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            result = self.sh("pokdeng-table status --json", check=False)
            status = json.loads(result.stdout) if result.returncode == 0 else {}
            if status and predicate(status):
                return status
            assert time.monotonic() < deadline, f"{what}; last status: {status}"
            time.sleep(0.2)

    def main_pid(self, unit: str = "pokdeng-table") -> str:
        return self.sh(f"systemctl show -P MainPID {unit}").stdout.strip()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # nspawn shuts the container down in order
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def events(root: Root) -> list[dict]:
    path = root.file("/var/lib/pokdeng-table/events.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.skipif(_cannot_boot() is not None and not REQUIRED, reason=_cannot_boot() or "")
def test_an_upgrade_and_a_removal_wait_for_the_open_round_under_systemd(
        root: Root, debs: dict[str, Path], tmp_path: Path) -> None:
    assert _cannot_boot() is None, _cannot_boot()
    shoe, panel = Line(), Line()
    root.install(debs[OLD])
    configure(root)
    config = {
        "table": {"id": "T01", "betting_seconds": 1},
        "shoe": {"driver": "beetek", "url": f"socket://127.0.0.1:{shoe.port}",
                 "reconnect_seconds": 0.2},
        "panel": {"driver": "line_panel", "url": f"socket://127.0.0.1:{panel.port}",
                  "reconnect_seconds": 0.2},
        "control": {"socket": "/run/pokdeng-table/control.sock", "group": "pokdeng-control"},
        "journal": {"key_credential": "journal-key"},
        "transports": {"file": {"path": "/var/lib/pokdeng-table/events.jsonl"}},
    }
    root.file("/etc/pokdeng-table/table.yaml").write_text(json.dumps(config))
    root.sh("systemctl enable pokdeng-table")
    booted = Booted(root, tmp_path / "boot.log")
    try:
        booted.wait("systemctl is-active pokdeng-table", "the table to start")
        booted.wait_status(lambda s: s["devices"].get("shoe") and s["devices"].get("panel"),
                           "the shoe and panel to connect")
        # a shoe and the first round, three cards out: a round is open
        panel.send(b"new_shoe\n")
        booted.wait_status(lambda s: s["state"] == "awaiting_flip", "new shoe")
        for card in FLIP_AND_BURNS:
            shoe.send(f" [Game]<Card:{card}> ".encode())
        booted.wait_status(lambda s: s["state"] == "ready", "the flip card and burns")
        panel.send(b"start_round\n")
        booted.wait_status(lambda s: s["betting_open"], "betting to open")
        for card in ROUND[:3]:
            shoe.send(f" [Game]<Card:{card}> ".encode())
        booted.wait_status(lambda s: s["cards_dealt"] == 3, "three cards dealt")
        pid = booted.main_pid()

        # a drain that does not finish in time stops the upgrade, and the table plays on
        root_deb = root.file("/root") / debs[NEW].name  # the booted /tmp is a tmpfs
        shutil.copy(debs[NEW], root_deb)
        refused = booted.sh(f"POKDENG_DRAIN_TIMEOUT=2 dpkg -i /root/{root_deb.name}", check=False)
        assert refused.returncode != 0, refused.stdout
        assert "did not drain; nothing was stopped" in refused.stderr
        assert booted.sh("dpkg-query -W -f='${Version} ${db:Status-Abbrev}' pokdeng-table") \
            .stdout.split() == [OLD, "ii"]
        assert booted.main_pid() == pid and booted.status()["round"] == 1

        # the upgrade waits for the open round, then stops, installs and starts the table
        upgrade = subprocess.Popen(booted.command(f"dpkg -i /root/{root_deb.name}"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=ENV)
        time.sleep(3)
        assert upgrade.poll() is None, upgrade.communicate()
        assert booted.main_pid() == pid  # still running the round
        assert "round_result" not in [e["type"] for e in events(root)]
        for card in ROUND[3:]:
            shoe.send(f" [Game]<Card:{card}> ".encode())
        out, err = upgrade.communicate(timeout=120)
        assert upgrade.returncode == 0, out + err
        assert "drained: safe to stop" in out
        assert "starting pokdeng-table.service again; it is still drained" in out
        assert booted.sh("dpkg-query -W -f='${Version}' pokdeng-table").stdout == NEW

        booted.wait("systemctl is-active pokdeng-table", "the upgraded table to start")
        assert booted.main_pid() != pid
        status = booted.wait_status(lambda s: s["state"] == "ready", "the upgraded table")
        assert status["draining"] and status["drained"] and status["round"] is None
        types = [e["type"] for e in events(root)]
        assert types.count("round_result") == 1 and types.count("drain_started") == 1
        assert types.index("drain_started") < types.index("round_result")
        # the same program in another revision of the package is another software
        assert types.count("software_changed") == 1
        released = booted.sh("pokdeng-table supervisor resume")
        assert "drain_ended" in released.stdout
        panel.send(b"start_round\n")
        booted.wait_status(lambda s: s["round"] == 2 and s["betting_open"],
                           "the next round on the new version")
        booted.sh("pokdeng-table version --verify")

        # removing the package mid-round waits for the round too; the journal stays
        removal = subprocess.Popen(booted.command("dpkg -r pokdeng-table"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=ENV)
        time.sleep(3)
        assert removal.poll() is None, removal.communicate()
        assert booted.status()["round"] == 2
        for card in ROUND:
            shoe.send(f" [Game]<Card:{card}> ".encode())
        out, err = removal.communicate(timeout=120)
        assert removal.returncode == 0, (out, err)
        assert "drained: safe to stop" in out
        assert booted.sh("systemctl is-active pokdeng-table", check=False).stdout.strip() \
            != "active"
        assert [e["type"] for e in events(root)].count("round_result") == 2
        assert root.file("/var/lib/pokdeng-table/journal.sqlite").stat().st_size > 0
        assert not root.file("/opt/pokdeng-table/venv").exists()
    finally:
        booted.close()
        shoe.close()
        panel.close()


@pytest.mark.skipif(_cannot_boot() is not None and not REQUIRED, reason=_cannot_boot() or "")
def test_an_upgrade_drains_and_restarts_each_table_of_the_template_unit(
        root: Root, debs: dict[str, Path], tmp_path: Path) -> None:
    """Two tables on one PC (pokdeng-table@T01, @T02), idle with no devices plugged in: each
    is drained (at once: no round is open), stopped, and started again drained."""
    assert _cannot_boot() is None, _cannot_boot()
    root.install(debs[OLD])
    for table in ("T01", "T02"):
        config = {"table": {"id": table}, "state_dir": f"/var/lib/pokdeng-table/{table}",
                  "shoe": {"driver": "beetek", "url": "socket://127.0.0.1:9"},
                  "control": {"socket": f"/run/pokdeng-table/{table}/control.sock",
                              "group": "pokdeng-control"},
                  "journal": {"key_credential": "journal-key"}}
        root.file(f"/etc/pokdeng-table/{table}.yaml").write_text(json.dumps(config))
        root.sh(f"install -d -m700 /etc/pokdeng-table/credentials/{table}\n"
                f"printf secret | install -m600 /dev/stdin "
                f"/etc/pokdeng-table/credentials/{table}/backend-secret\n"
                f"printf '%064d' 7 | install -m600 /dev/stdin "
                f"/etc/pokdeng-table/credentials/{table}/journal-key\n"
                f"systemctl enable pokdeng-table@{table}")
    shutil.copy(debs[NEW], root.file("/root") / debs[NEW].name)
    booted = Booted(root, tmp_path / "boot.log")
    try:
        status = {table: f"pokdeng-table status --config /etc/pokdeng-table/{table}.yaml --json"
                  for table in ("T01", "T02")}
        pids = {}
        for table in ("T01", "T02"):
            booted.wait(status[table], f"{table} to answer")
            pids[table] = booted.main_pid(f"pokdeng-table@{table}")
        upgrade = booted.sh(f"dpkg -i /root/{debs[NEW].name}")
        for table in ("T01", "T02"):
            assert f"starting pokdeng-table@{table}.service again; it is still drained" \
                in upgrade.stdout
            answer = json.loads(booted.wait(status[table], f"{table} to answer again"))
            assert answer["draining"] and answer["drained"], answer
            assert booted.main_pid(f"pokdeng-table@{table}") not in ("0", pids[table])
        assert upgrade.stdout.count("drained: safe to stop") == 2
    finally:
        booted.close()


@pytest.mark.skipif(_cannot_boot() is not None and not REQUIRED, reason=_cannot_boot() or "")
def test_a_first_boot_credentials_as_the_guide_says_and_a_shoe_node_made_after_the_start(
        root: Root, debs: dict[str, Path], tmp_path: Path) -> None:
    """One boot (booting is the slow part) for two things a table's first boots meet, under
    the real hardened unit: the credential drop-in of a table that signs nothing, and a shoe
    whose node udev makes after the unit started."""
    assert _cannot_boot() is None, _cannot_boot()
    root.install(debs[OLD])
    configure(root)
    root.sh("rm /etc/pokdeng-table/credentials/backend-secret")
    config = {"table": {"id": "T01"},
              "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe", "reconnect_seconds": 0.2},
              "control": {"socket": "/run/pokdeng-table/control.sock", "group": "pokdeng-control"},
              "journal": {"key_credential": "journal-key"},
              "transports": {"file": {"path": "/var/lib/pokdeng-table/events.jsonl"}}}
    root.file("/etc/pokdeng-table/table.yaml").write_text(json.dumps(config))
    booted = Booted(root, tmp_path / "boot.log")
    try:
        start_with_the_guides_drop_in(booted, root)
        open_a_shoe_node_made_after_the_start(booted)
    finally:
        booted.close()


def start_with_the_guides_drop_in(booted: Booted, root: Root) -> None:
    """A table with a keyed journal and no backend to sign for (docs/install.md §5): with no
    drop-in systemd refuses the unit for the missing backend-secret (243/CREDENTIALS), with a
    drop-in that empties LoadCredential= the daemon has no journal key (exit 78), and with the
    guide's drop-in it runs; `config check` says each of these before the start. The table is
    left running."""
    dropin = root.file("/etc/systemd/system/pokdeng-table.service.d/credentials.conf")
    check = "pokdeng-table config check /etc/pokdeng-table/table.yaml"

    def start(status: str) -> None:
        booted.sh("systemctl daemon-reload && systemctl reset-failed pokdeng-table || true\n"
                  "systemctl start --no-block pokdeng-table")
        booted.wait(f"test \"$(systemctl show -P ExecMainStatus pokdeng-table)\" = {status}"
                    + (" && systemctl is-active pokdeng-table" if status == "0" else ""),
                    f"the unit to end with {status}")

    checked = booted.sh(check, check=False)
    assert checked.returncode == 78
    assert "credential 'backend-secret': /etc/pokdeng-table/credentials/backend-secret " \
           "does not exist: the unit would fail to start (243/CREDENTIALS)" in checked.stderr
    start("243")
    booted.sh("systemctl stop pokdeng-table")

    dropin.parent.mkdir(parents=True)
    dropin.write_text("[Service]\nLoadCredential=\n")
    checked = booted.sh(check, check=False)
    assert checked.returncode == 78
    assert "journal.key_credential: credential 'journal-key' is not handed over by " \
           "pokdeng-table.service" in checked.stderr
    start("78")

    dropin.write_text("[Service]\nLoadCredential=\n"
                      "LoadCredential=journal-key:/etc/pokdeng-table/credentials/journal-key\n")
    assert "hands over: journal-key" in booted.sh(check).stdout
    start("0")


def open_a_shoe_node_made_after_the_start(booted: Booted) -> None:
    """The boot where udev makes /dev/pokdeng/shoe after the unit started: the status names
    what it finds at each step (no node; a ttyUSB node, major 188, with no driver registered
    for it anywhere on this machine: ENXIO, not the sandbox's EPERM; a device node the daemon's
    user may not open: EACCES), and the shoe opens as soon as the name leads to a device it may
    open, with no restart.

    What this container cannot show: the device allow-list itself. Its systemd runs on the
    host's cgroup v1 hierarchy, read-only inside nspawn, so no unit's device policy is applied
    here (a node of a major the unit does not allow opens too); the allow-list is checked by
    systemd-analyze and tests/service/test_systemd.py instead."""
    pid = booted.main_pid()

    def problem(words: str) -> str:
        status = booted.wait_status(
            lambda s: words in (s.get("device_problems") or {}).get("shoe", ""),
            f"the shoe's problem to say {words!r}")
        assert status["devices"]["shoe"] is False
        return status["device_problems"]["shoe"]

    assert problem("does not exist").startswith("/dev/pokdeng/shoe does not exist")
    booted.sh("mkdir -p /dev/pokdeng\n"
              "mknod -m 660 /dev/ttyUSB0 c 188 0 && chgrp pokdeng /dev/ttyUSB0\n"
              "ln -s ../ttyUSB0 /dev/pokdeng/shoe")
    assert problem("ENXIO").startswith(
        "/dev/pokdeng/shoe (-> /dev/ttyUSB0, char 188:0, root:pokdeng 0660) exists but "
        "cannot be opened: ENXIO (No such device or address)")
    # a device behind the name: a pty inside the container, as a USB-serial shoe's node;
    # first as a pts is made (root:tty 0620): the daemon's user may not open it
    booted.sh("python3 -c 'import os, pty, time\n"
              "master, slave = pty.openpty()\n"
              "os.symlink(os.ttyname(slave), \"/dev/pokdeng/shoe.new\")\n"
              "os.rename(\"/dev/pokdeng/shoe.new\", \"/dev/pokdeng/shoe\")\n"
              "time.sleep(300)' >/dev/null 2>&1 &")
    assert re.match(r"/dev/pokdeng/shoe \(-> /dev/pts/\d+, char 136:\d+, root:tty 0620\) "
                    r"exists but cannot be opened: EACCES \(Permission denied\): the "
                    r"daemon's user may not open it", problem("EACCES"))
    # then with the group and mode the udev rule gives a shoe
    booted.sh('chgrp pokdeng "$(readlink /dev/pokdeng/shoe)"\n'
              'chmod 660 "$(readlink /dev/pokdeng/shoe)"')
    status = booted.wait_status(lambda s: s["devices"].get("shoe") is True, "the shoe to open")
    assert status["device_problems"] == {}
    assert booted.main_pid() == pid  # no restart
