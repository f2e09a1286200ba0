"""The test kit's backends (testkit/backends.py) as the tests use them: skip when no broker."""

from __future__ import annotations

import pytest

from testkit.backends import mosquitto_missing


def need_mosquitto() -> None:
    reason = mosquitto_missing()
    if reason:
        pytest.skip(reason)
