"""Deterministic Temporal workflows (sandbox-safe: no I/O, no clocks). Import classes from here."""

from __future__ import annotations

from typing import Any

ALL_WORKFLOWS: list[Any] = []
