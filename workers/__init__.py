"""Worker process, CLI, client helpers, schedules and the embedded dev server."""
