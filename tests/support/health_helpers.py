"""Reading the retained health topic from a real broker, and its JSON Schema."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from jsonschema import Draft202012Validator
from paho.mqtt.enums import CallbackAPIVersion

from support.waiting import wait_until

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "health.schema.json"


def health_validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


class HealthSubscriber:
    """A paho client on ``<prefix>/<table>/health``: every message with its retain flag."""

    def __init__(self, port: int, table: str = "T1", prefix: str = "pokdeng",
                 login: tuple[str, str] | None = None):
        self.topic = f"{prefix}/{table}/health"
        self.messages: list[tuple[dict[str, Any], bool]] = []
        self.texts: list[str] = []
        self.changed = threading.Condition()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2,
                                  client_id=f"health-sub-{time.time()}")
        self.client.on_message = self._on_message
        if login is not None:
            self.client.username_pw_set(*login)
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.on_connect = lambda c, *a: c.subscribe(self.topic, qos=1)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert subscribed.wait(5), "could not subscribe to the health topic"

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        with self.changed:
            self.texts.append(message.payload.decode())
            self.messages.append((json.loads(message.payload), bool(message.retain)))
            self.changed.notify_all()

    def latest(self) -> dict[str, Any] | None:
        with self.changed:
            return self.messages[-1][0] if self.messages else None

    def wait_for(self, predicate, timeout: float = 15.0, what: str = "a health message"):
        def found() -> dict[str, Any] | None:
            latest = self.latest()
            return latest if latest is not None and predicate(latest) else None

        return wait_until(found, timeout, what, condition=self.changed,
                          details=lambda: f"got {self.messages[-3:]}")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
