"""Apps: the `App` registry, YAML agents and their tool entries, the built-in demo app."""
