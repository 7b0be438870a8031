"""`sleuth setup`: register Sleuth's search attributes on a Temporal namespace."""

from __future__ import annotations

import argparse

from sleuth.workers.cli_connection import add_connection_arguments
from sleuth.workers.embedded import connect_temporal
from sleuth.workers.search_attributes import attribute_table, register_search_attributes


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "setup",
        help="register Sleuth's search attributes on a Temporal namespace",
        description=(
            "Add Sleuth's search attributes (SleuthGroundingScore, SleuthCostUsd, …) to the "
            "namespace through the operator service, so runs can be filtered in the Web UI and "
            "with `temporal workflow list --query`. Safe to run again. The embedded server "
            "registers them itself; run this once per namespace of a cluster."
        ),
    )
    add_connection_arguments(parser)
    parser.set_defaults(func=run_setup_command)


async def run_setup_command(args: argparse.Namespace) -> int:
    client = await connect_temporal(namespace=args.namespace)
    address = client.service_client.config.target_host
    report = await register_search_attributes(client, args.namespace)
    kinds = dict(attribute_table())
    for name in [*report.added, *report.already]:
        state = "added" if name in report.added else "already registered"
        print(f"  {name:<24} {kinds[name]:<8} {state}")
    print(
        f"sleuth setup: namespace {report.namespace!r} at {address} has Sleuth's "
        f"{len(kinds)} search attributes ({len(report.added)} added). Try: temporal workflow "
        "list --query 'SleuthGroundingScore < 0.6'"
    )
    return 0
