"""The logins and client ids a table's connections take, derived from its table id: a config
whose names would be another connection's is refused.

On the studio broker (config/mosquitto/pokdeng.conf: ``use_username_as_clientid``) a login is
its client id, and an MQTT client id is held by one connection at a time: a second connection
with it throws the first off, whose "offline" will is then published. Each table has two
(docs/backend.md, "MQTT"): ``<username>`` (its table id) for events and status, and
``<username>-health`` for its health topic (``health_login`` in controller/transports/mqtt.py);
without that broker the client ids are ``<client_id>`` (default ``pokdeng-table-<table id>``)
and ``<client_id>-health`` (controller/transports/mqtt_health.py). So a table id, a login or a
client id ending in ``-health`` is another table's health connection, and one table's two
logins must differ. And the studio broker's own logins (``RESERVED_LOGINS``: the game backend,
the fleet view; config/mosquitto/pokdeng.acl) are no table's: a table taking one would throw
that client off, take its persistent session, and read every table's topics with its rights.
"""

from __future__ import annotations

from typing import Any

#: what the health topic's connection adds to the table's login and client id
HEALTH_SUFFIX = "-health"

#: the studio broker's fixed logins, which are their client ids (config/mosquitto/pokdeng.acl,
#: docs/backend.md "One identity per login"), and whose each one is
RESERVED_LOGINS = {
    "backend": "the game backend's login and client id (it reads every table's events and "
               "holds a persistent session)",
    "fleet": "the studio fleet view's login and client id (it reads every table's health)",
}


def login_problems(table_id: str | None, mqtt: Any | None) -> list[str]:
    """``key path: why`` for each name of this table that is another connection's;
    ``mqtt``: the MQTT transport's settings, if configured."""
    problems = []
    if table_id is not None and table_id in RESERVED_LOGINS:
        problems.append(f"table.id: {_reserved(table_id, 'choose another table id')}")
    if table_id is not None and table_id.endswith(HEALTH_SUFFIX):
        problems.append(f"table.id: {_health_of(table_id, 'table id')}; choose an id that "
                        f"does not end in {HEALTH_SUFFIX}")
    if mqtt is None:
        return problems
    key = "transports.mqtt"
    for option in ("username", "health_username", "client_id"):
        name = getattr(mqtt, option)
        if name in RESERVED_LOGINS:
            problems.append(f"{key}.{option}: {_reserved(name, 'choose another name')}")
    if mqtt.username and mqtt.username.endswith(HEALTH_SUFFIX):
        problems.append(f"{key}.username: {_health_of(mqtt.username, 'login')}")
    if mqtt.health_username and mqtt.health_username == mqtt.username:
        problems.append(f'{key}.health_username: "{mqtt.health_username}" is also the login of '
                        "the event connection (username): the broker makes a login its client "
                        "id, so the table's two connections would throw each other off")
    if mqtt.client_id and mqtt.client_id.endswith(HEALTH_SUFFIX):
        stem = mqtt.client_id[:-len(HEALTH_SUFFIX)]
        problems.append(f'{key}.client_id: "{mqtt.client_id}" is the client id of the health '
                        f'connection of "{stem}" (<client_id>{HEALTH_SUFFIX}): the two would '
                        "throw each other off the broker")
    return problems


def _health_of(name: str, what: str) -> str:
    stem = name[:-len(HEALTH_SUFFIX)]
    return (f'"{name}" is the health topic\'s login and client id of the table whose {what} is '
            f'"{stem}" (<{what}>{HEALTH_SUFFIX}, docs/backend.md "MQTT"): the two would throw '
            "each other off the broker")


def _reserved(name: str, advice: str) -> str:
    return (f'"{name}" is {RESERVED_LOGINS[name]} on the studio broker (config/mosquitto/'
            "pokdeng.acl): a table connecting with it would throw that client off the broker "
            f"and act with its rights; {advice}")
