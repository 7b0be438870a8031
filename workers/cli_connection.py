"""The Temporal connection options of every command that talks to Temporal, as the `temporal` CLI
has them: `--address`, `--namespace`, `--profile`, `--api-key` and `--tls`.

Each flag stands for the variable of the same meaning (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`,
`TEMPORAL_PROFILE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS`): while the command runs, a flag given on
the command line replaces that variable, and `sleuth.workers.client.connect_config` then loads
the connection through `temporalio.envconfig` as always. So a flag overrides the variable, which
overrides the profile's value, as in the `temporal` CLI; `--profile` picks the TOML profile
(from `$TEMPORAL_CONFIG_FILE`, default `~/.config/temporalio/temporal.toml`).

This module imports nothing from Temporal: commands register their options before any of
Temporal's modules load.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

CONNECTION_OPTIONS: dict[str, str] = {
    "address": "TEMPORAL_ADDRESS",
    "namespace": "TEMPORAL_NAMESPACE",
    "profile": "TEMPORAL_PROFILE",
    "api_key": "TEMPORAL_API_KEY",
    "tls": "TEMPORAL_TLS",
}
"""Each connection option (its `args` attribute) and the Temporal variable it replaces."""
CONNECTION_FLAGS = ("--address", "--namespace", "--profile", "--api-key", "--tls")


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the five connection options (see the module docstring) to a command's parser."""
    group = parser.add_argument_group(
        "Temporal connection",
        "as in the `temporal` CLI; each flag overrides its TEMPORAL_* variable, which overrides "
        "the profile",
    )
    group.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="Temporal's frontend (default: $TEMPORAL_ADDRESS, the profile's, else "
        "localhost:7233, where Sleuth starts its embedded server if nothing answers)",
    )
    group.add_argument(
        "--namespace",
        metavar="NAME",
        help="the namespace (default: $TEMPORAL_NAMESPACE, the profile's, else default)",
    )
    group.add_argument(
        "--profile",
        metavar="NAME",
        help="the profile of the Temporal client config file (default: $TEMPORAL_PROFILE, "
        "else default)",
    )
    group.add_argument(
        "--api-key",
        metavar="KEY",
        help="API key, e.g. for Temporal Cloud; turns TLS on (default: $TEMPORAL_API_KEY)",
    )
    group.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="connect with TLS (--no-tls: without); default: $TEMPORAL_TLS, the profile's, "
        "else on with an API key and off without",
    )


def connection_variables(args: argparse.Namespace) -> dict[str, str]:
    """The TEMPORAL_* variables the command line's connection options set."""
    variables: dict[str, str] = {}
    for attribute, variable in CONNECTION_OPTIONS.items():
        value = getattr(args, attribute, None)
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        variables[variable] = value
    return variables


@contextlib.contextmanager
def connection_environment(args: argparse.Namespace) -> Iterator[None]:
    """While the command runs, its connection options replace their TEMPORAL_* variables (in
    this process and the ones it starts); afterwards the environment is as it was."""
    variables = connection_variables(args)
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
