"""Fixtures shared across the wings: the daemon's directory and devices, supervisors, and the
real loopback backends (webhook, mosquitto) of testkit/backends.py."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, settings

from controller.service.telemetry.logging_setup import HANDLER_NAME
from drivers.sim.shoe import ShoeSimulator
from support.backends import need_mosquitto
from support.control_helpers import NOBODY, TemporaryGroup
from support.daemon_helpers import LinePanelPty
from testkit.backends import Mosquitto, WebhookBackend

# Property tests must not fail for being slow on a loaded CI runner: no per-example deadline,
# no too_slow health check. Loaded by default; HYPOTHESIS_PROFILE picks another registered one.
settings.register_profile("pokdeng", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "pokdeng"))


@pytest.fixture(autouse=True)
def fresh_log_context() -> Iterator[None]:
    """A daemon run in the test's own thread binds its table, shoe and round to the thread's
    log context (logging_setup.bind_table_context); the next test starts without them, and
    without the root handler its setup_logging left on the test's captured output (closed
    once the test ends: later tests' threads logging there printed "Logging error")."""
    yield
    structlog.contextvars.clear_contextvars()
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(handler)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A fresh directory for the daemon's files; Unix socket paths are limited to 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="pdt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def devices(short_dir: Path) -> Iterator[tuple[ShoeSimulator, LinePanelPty]]:
    shoe = ShoeSimulator(short_dir / "shoe", "beetek")
    shoe.start()
    panel = LinePanelPty()
    yield shoe, panel
    shoe.close(drain_timeout=0.2)
    panel.close()


@pytest.fixture
def supervisors() -> Iterator[TemporaryGroup]:
    """A supervisor group for the test, with nobody as a member (in the user database)."""
    group = TemporaryGroup(f"pdt-sup-{os.getpid()}", members=(NOBODY.pw_name,))
    yield group
    group.remove()


@pytest.fixture
def webhook_secret(tmp_path: Path) -> Path:
    path = tmp_path / "webhook.secret"
    path.write_bytes(b"table-T7-secret-\x01\x02\n")
    return path


@pytest.fixture
def webhook(webhook_secret: Path) -> Iterator[WebhookBackend]:
    backend = WebhookBackend(webhook_secret.read_bytes().rstrip(b"\n"))
    yield backend
    backend.down()


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    need_mosquitto()
    broker = Mosquitto(tmp_path)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def mosquitto_factory(tmp_path: Path):
    """Start brokers with options: ``mosquitto_factory(users=…, tls=…)``."""
    need_mosquitto()
    started: list[Mosquitto] = []

    def make(**options) -> Mosquitto:
        folder = tmp_path / f"broker{len(started)}"
        folder.mkdir()
        broker = Mosquitto(folder, **options)
        broker.start()
        started.append(broker)
        return broker

    yield make
    for broker in started:
        broker.stop()
