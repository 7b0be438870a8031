"""Private helpers shared across the SDK (no public API here)."""
