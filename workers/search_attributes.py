"""Registering Sleuth's search attributes (`sleuth.activities.attributes`) on a namespace.

The embedded dev server gets them as start flags (`dev_server_flags`); a cluster gets them
through the operator service (`register_search_attributes`, what `sleuth setup` runs). Temporal
Cloud namespaces are managed through its own API: add them there (`tcld namespace
search-attributes add`, with the names and types `attribute_table` lists).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sleuth.activities.attributes import SLEUTH_ATTRIBUTES, expected_types, type_name
from sleuth.runtime.errors import SleuthError


class SearchAttributeSetupError(SleuthError, RuntimeError):
    """The namespace refused Sleuth's search attributes (a name taken with another type, no
    room left for its type, or no permission)."""


@dataclass
class Registration:
    """What `register_search_attributes` did."""

    namespace: str
    added: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)


def attribute_table() -> list[tuple[str, str]]:
    """Each Sleuth attribute's name and type, as `temporal` and `tcld` write them."""
    return [(key.name, type_name(int(key.indexed_value_type))) for key in SLEUTH_ATTRIBUTES]


def dev_server_flags() -> list[str]:
    """`--search-attribute Name=Type` for each Sleuth attribute (`temporal server start-dev`)."""
    return [
        arg for name, kind in attribute_table() for arg in ("--search-attribute", f"{name}={kind}")
    ]


async def register_search_attributes(client: Client, namespace: str | None = None) -> Registration:
    """Add the Sleuth attributes the namespace lacks; those it has with the right type stay.

    Raises `SearchAttributeSetupError` when one exists with another type, or the server refuses
    (the message says what to do)."""
    namespace = namespace or client.namespace
    report = Registration(namespace=namespace)
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
    except RPCError as exc:
        raise SearchAttributeSetupError(_refusal(namespace, exc)) from None
    present = {**dict(listed.system_attributes), **dict(listed.custom_attributes)}
    missing: dict[str, int] = {}
    for name, value_type in expected_types().items():
        if name not in present:
            missing[name] = value_type
        elif present[name] == value_type:
            report.already.append(name)
        else:
            raise SearchAttributeSetupError(
                f"namespace {namespace!r} has {name} as {type_name(present[name])}, but Sleuth "
                f"sets it as {type_name(value_type)}; remove it (temporal operator "
                f"search-attribute remove --name {name}) and run `sleuth setup` again"
            )
    if missing:
        try:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=namespace,
                    search_attributes={
                        name: IndexedValueType.ValueType(value_type)
                        for name, value_type in missing.items()
                    },
                )
            )
        except RPCError as exc:
            raise SearchAttributeSetupError(_refusal(namespace, exc)) from None
        report.added = sorted(missing)
    return report


def _refusal(namespace: str, exc: RPCError) -> str:
    table = ", ".join(f"{name}={kind}" for name, kind in attribute_table())
    hint = (
        "your credentials may not manage search attributes; ask the cluster's operator"
        if exc.status == RPCStatusCode.PERMISSION_DENIED
        else "on Temporal Cloud, add them with `tcld namespace search-attributes add`"
        if exc.status == RPCStatusCode.UNIMPLEMENTED
        else "check the server's limits on custom search attributes"
    )
    return (
        f"namespace {namespace!r} refused Sleuth's search attributes: {exc.message}. "
        f"{hint[0].upper()}{hint[1:]}; Sleuth needs {table}"
    )
