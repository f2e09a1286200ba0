"""The journal check's state in one line, for ``pokdeng-table status``.

Apart from controller/service/trust/journal_check.py (the check itself), so that ``status`` shows it
without importing what the check runs on: structlog (and with it asyncio) and the journal.
"""

from __future__ import annotations

from typing import Any


def check_text(status: dict[str, Any] | None) -> str | None:
    """One line for ``status`` and STATUS=: "running", "ok at <time>", "FAILED: <reason>",
    "waiting to run: <why it could not start>"."""
    if not isinstance(status, dict):
        return None
    state = status.get("state")
    if state == "ok":
        return f"ok at {status.get('at')} ({status.get('records')} records)"
    if state == "failed":
        return f"FAILED: {status.get('reason')}"
    if state == "waiting":
        return f"waiting to run: {status.get('reason')}"
    return str(state) if state else None
