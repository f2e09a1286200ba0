"""The panel tests' shared fixture: a test that leaves a driver thread running fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.panel_helpers import driver_threads, wait_until


@pytest.fixture
def no_leaked_driver_threads() -> Iterator[None]:
    before = driver_threads()
    yield
    wait_until(lambda: not (driver_threads() - before), 3, "driver threads to end")
