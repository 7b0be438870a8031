"""Write docs/settings.md, the settings reference, from `SleuthSettings`' field docstrings.

    python scripts/gen_settings_reference.py           # rewrite docs/settings.md
    python scripts/gen_settings_reference.py --check   # exit 1 if docs/settings.md is stale

tests/project/test_reference_docs.py fails when the page and the model disagree: change a field
or its docstring, run this script, commit both.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's sleuth, whatever is installed
PAGE = ROOT / "docs" / "settings.md"

HEADER = """# Settings reference

Generated from the field docstrings of `sleuth.runtime.settings.SleuthSettings` by
`python scripts/gen_settings_reference.py`; do not edit by hand.

Sleuth's settings are environment variables, all read and checked by that one model: field `name`
is the variable `SLEUTH_<NAME>`. A bad value stops any command at start with the variable and the
form it takes; an empty variable counts as unset. Code reads them the same way:
`sleuth.load_settings()` returns the checked `sleuth.SleuthSettings`. `sleuth doctor` shows the
settings in force (secrets hidden).

Temporal's own variables (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, TLS, API keys and profiles)
are read by `temporalio.envconfig`, as the Temporal CLI reads them: see
[Temporal Cloud and TLS](scale-out.md#temporal-cloud-and-tls). Traces go where OpenTelemetry's
standard `OTEL_*` variables say: see [Tracing](operations.md#tracing).
"""


def shown_default(default: Any) -> str:
    """The default as the page shows it: `none` for no value, whole floats without `.0`."""
    if default is None or default == [] or default == {}:
        return "unset"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, float):
        return f"`{default:g}`"
    return f"`{default}`"


def render() -> str:
    """The page's text, from the settings model as it is now."""
    from sleuth.runtime.settings import SleuthSettings, env_name

    lines = [HEADER, "| variable | default | meaning |", "| --- | --- | --- |"]
    for name, field in SleuthSettings.model_fields.items():
        meaning = " ".join((field.description or "").split()).replace("|", "\\|")
        lines.append(f"| `{env_name(name)}` | {shown_default(field.default)} | {meaning} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from scripts.generated_page import write_or_check

    description = (__doc__ or "").splitlines()[0]
    return write_or_check(PAGE, render(), __file__, description, argv)


if __name__ == "__main__":
    sys.exit(main())
