"""Fixtures shared by the service tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.histories import make_histories


@pytest.fixture(scope="module")
def histories(tmp_path_factory) -> dict[str, Path]:
    """Real demo tables' state directories (support/histories.py), built once per module."""
    return make_histories(tmp_path_factory.mktemp("histories"))
