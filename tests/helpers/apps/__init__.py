"""Small App modules that tests load by `--app` target."""
