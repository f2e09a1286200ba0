"""What the panel drivers share (their options: drivers/options.py)."""

from __future__ import annotations

from controller.rate_limited_log import RateLimitedLog

__all__ = ["RateLimitedLog"]
