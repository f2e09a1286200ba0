"""The studio broker recipe of docs/backend.md ("The studio broker, step by step"), followed as
a studio would on Debian: config/mosquitto/pokdeng.conf in conf.d beside Debian's own
mosquitto.conf, a test certificate, the password file, ACL and key owned by `mosquitto`;
the real broker (which drops root for the `mosquitto` user) starts, and the backend logs in
over TLS. Needs root, Debian's mosquitto package (its user and main config)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from testkit.backends import MOSQUITTO, free_port, mosquitto_missing

REPO = Path(__file__).resolve().parents[2]
DEBIAN_MAIN = Path("/etc/mosquitto/mosquitto.conf")

pytestmark = pytest.mark.mosquitto


def _missing() -> str | None:
    if (why := mosquitto_missing()) is not None:
        return why
    if os.geteuid() != 0:
        return "needs root: the recipe hands files to the mosquitto user"
    try:
        pwd.getpwnam("mosquitto")
    except KeyError:
        return "no mosquitto user (Debian's mosquitto package makes it)"
    if not DEBIAN_MAIN.exists() or shutil.which("mosquitto_passwd") is None:
        return f"no {DEBIAN_MAIN} or mosquitto_passwd: not Debian's mosquitto package"
    if shutil.which("mosquitto_pub") is None:
        return "no mosquitto_pub (Debian: apt-get install mosquitto-clients)"
    return None


@pytest.fixture
def root():
    """A scratch root the mosquitto user can walk into (pytest's tmp_path is root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="pokdeng-broker-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_studio_broker_recipe_starts_a_broker_the_backend_logs_in_to(root: Path) -> None:
    if (why := _missing()) is not None:
        pytest.skip(why)
    etc, port = root / "etc" / "mosquitto", free_port()
    (etc / "conf.d").mkdir(parents=True)
    (etc / "certs").mkdir()
    owned = {name: root / name for name in ("run", "log", "lib")}
    for folder in owned.values():
        folder.mkdir()
        shutil.chown(folder, "mosquitto", "mosquitto")  # as Debian's package leaves them
    # Debian's own main config, its paths moved into the scratch root
    main = DEBIAN_MAIN.read_text()
    main = (main.replace("/run/mosquitto/", f"{owned['run']}/")
            .replace("/var/lib/mosquitto/", f"{owned['lib']}/")
            .replace("/var/log/mosquitto/", f"{owned['log']}/")
            .replace("/etc/mosquitto/conf.d", str(etc / "conf.d")))
    (etc / "mosquitto.conf").write_text(main)
    studio = (REPO / "config" / "mosquitto" / "pokdeng.conf").read_text()
    studio = studio.replace("/etc/mosquitto", str(etc)).replace(
        "listener 8883", f"listener {port} 127.0.0.1")
    (etc / "conf.d" / "pokdeng.conf").write_text(studio)
    # the recipe's steps: a test certificate, the logins, the ACL, each owned by mosquitto
    cert, key = etc / "certs" / "broker.pem", etc / "certs" / "broker.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    passwords, acl = etc / "pokdeng.passwd", etc / "pokdeng.acl"
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(passwords), "backend", "b-pw"],
                   check=True, capture_output=True)
    shutil.copy(REPO / "config" / "mosquitto" / "pokdeng.acl", acl)
    for path in (key, passwords, acl):
        shutil.chown(path, "mosquitto", "mosquitto")
        path.chmod(0o600)

    broker = subprocess.Popen([MOSQUITTO, "-c", str(etc / "mosquitto.conf")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            if broker.poll() is not None:
                log = next(owned["log"].glob("*.log"), None)
                pytest.fail(f"the broker exited: {broker.stdout.read() if broker.stdout else ''}"
                            f"{log.read_text() if log else ''}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the broker did not listen within 10 s"
                time.sleep(0.05)
        # mosquitto-clients: the backend's login over TLS, trusting the test certificate
        done = subprocess.run(["mosquitto_pub", "-h", "localhost", "-p", str(port), "--cafile",
                               str(cert), "-u", "backend", "-P", "b-pw", "-q", "1",
                               "-t", "pokdeng/T01/resend", "-m", '{"from_seq": 1}'],
                              capture_output=True, text=True, timeout=20)
        assert done.returncode == 0, done.stderr
    finally:
        broker.terminate()
        broker.wait(10)
