"""A table's secret vouches for its own events only: the documented verifier
(docs/durability.md) refuses a message that carries another table's event, even with a good
signature, so table T8 cannot speak for table T7."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.transports import PermanentError
from controller.transports.http import HttpTransport, HttpTransportSettings
from support.journal_helpers import TABLE, event
from testkit.backends import WebhookBackend, documented_verifier

OTHER = "T8"  # a second table whose secret the backend also knows


def as_table(url: str, secret: Path, table: str) -> HttpTransport:
    return HttpTransport(HttpTransportSettings(url, str(secret), allow_insecure=True),
                         table=table)


def test_a_signed_batch_with_another_tables_event_is_refused_and_nothing_stored(
        webhook: WebhookBackend, webhook_secret: Path) -> None:
    forged = {**event(99999), "table": TABLE, "id": f"{TABLE}:99999"}
    with as_table(webhook.url, webhook_secret, OTHER) as t:
        with pytest.raises(PermanentError):
            t.deliver([{**event(1), "table": OTHER, "id": f"{OTHER}:1"}, forged])
        assert webhook.foreign == 1 and webhook.bad_signatures == 0  # signed, yet refused
        assert webhook.stored == []
        own = {**event(1), "table": OTHER, "id": f"{OTHER}:1"}
        t.deliver([own])
    assert webhook.stored == [own]
    with as_table(webhook.url, webhook_secret, TABLE) as t:  # the table's own: stored
        t.deliver([event(1)])
    assert webhook.stored == [own, event(1)]


@pytest.mark.parametrize(("change", "why"), [
    ({"table": OTHER}, "names another table"),
    ({"id": f"{OTHER}:1"}, "an id of another table"),
    ({"seq": 2}, "an id that is not <table>:<seq>"),
    ({"table": None}, "no table")])
def test_the_verifier_names_every_event_that_is_not_the_tables_own(change: dict,
                                                                   why: str) -> None:
    verifier = documented_verifier()
    assert verifier.foreign_events([event(1), event(2)], TABLE) == [], why
    odd = {**event(1), **change}
    assert verifier.foreign_events([event(2), odd], TABLE) == [str(odd["id"])], why
