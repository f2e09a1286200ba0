"""The test kit's backends (testkit/backends.py) as the tests use them: skip when no broker."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TypeVar

import pytest

from testkit.backends import mosquitto_missing

T = TypeVar("T")


def need_mosquitto() -> None:
    reason = mosquitto_missing()
    if reason:
        pytest.skip(reason)


def slow_connect_callback(transport, delay_s: float = 0.3) -> None:
    """Slow down an MQTT transport's connect callback, as a loaded machine does: it widens the
    moment between "connected" and paho's resend of what it still holds."""
    on_connect = transport._client.on_connect

    def slow_on_connect(*args):
        on_connect(*args)
        time.sleep(delay_s)

    transport._client.on_connect = slow_on_connect


def first_copies(keys: Iterable[T]) -> list[T]:
    """Each key once, where it first came: the order a subscriber first met them."""
    return list(dict.fromkeys(keys))
