"""A backend's word on where it stands that comes before the daemon listens is not lost.

An MQTT transport connects while the daemon is still building its other parts; the backend's
retained position comes right behind the SUBACK, before the daemon's history guard has set
its listener. Were that word dropped, the broker would never send it again on this
connection, and the table's events for that backend would wait for ever ("waiting for the
backend to say where it stands")."""

from __future__ import annotations

import json
import threading

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.transports import create
from support.journal_helpers import TABLE
from support.waiting import wait_until

pytestmark = pytest.mark.mosquitto


def test_a_retained_position_that_came_before_the_listener_is_handed_over(mosquitto):
    backend = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="backend-held",
                          protocol=mqtt.MQTTv5)
    backend.connect("127.0.0.1", mosquitto.port)
    backend.loop_start()
    try:
        backend.publish(f"pokdeng/{TABLE}/held", json.dumps({"seq": 0}), qos=1,
                        retain=True).wait_for_publish(5)
        transport = create("mqtt", {"host": "127.0.0.1", "port": mosquitto.port,
                                    "connect_timeout_s": 2.0}, table=TABLE)
        try:
            # connected, and the retained position in, with nobody listening yet
            wait_until(lambda: transport._unheard_held is not None, 10,
                       "the retained position to come")
            heard: list[object] = []
            got = threading.Event()

            def listener(_transport: object, value: object) -> None:
                heard.append(value)
                got.set()

            transport.held_listener = listener
            assert got.wait(5), "the word that came first was lost"
            assert heard == [{"seq": 0}]
        finally:
            transport.close()
        backend.publish(f"pokdeng/{TABLE}/held", b"", qos=1, retain=True).wait_for_publish(5)
    finally:
        backend.disconnect()
        backend.loop_stop()
