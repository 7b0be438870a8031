"""The runtime: settings, data paths, artifacts, events, telemetry, logging, redaction, errors."""
