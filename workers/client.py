"""Temporal clients, always with the pydantic data converter."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from sleuth.config import temporal_address, temporal_namespace


async def connect(address: str | None = None, *, namespace: str | None = None) -> Client:
    """Connect to Temporal at `address` (default `$TEMPORAL_ADDRESS` or localhost:7233)."""
    return await Client.connect(
        address or temporal_address(),
        namespace=namespace or temporal_namespace(),
        data_converter=pydantic_data_converter,
    )
