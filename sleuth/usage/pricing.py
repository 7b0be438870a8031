"""What model calls cost: a price table per model, in USD per million input and output tokens.

Every model response is priced where it arrives (`sleuth.runtime.telemetry.model_request`), so
`Usage.cost_usd` sums like the token counts do and a run's cost is in its usage, its report, its
memo and its search attributes. Local models (and the scripted test model) cost nothing.

Catalogue prices come from `genai-prices` (the snapshot of list prices bundled with the installed
version: upgrade the package for newer ones; nothing is fetched at run time). Prices change and
contracts differ, so override them. Overrides come, later ones winning, from:

1. the file `$SLEUTH_PRICES` (else `$SLEUTH_HOME/prices.toml` when it exists), TOML or JSON:

   ```toml
   ["openai:gpt-4o-mini"]
   input_per_million = 0.15
   output_per_million = 0.60
   ```

2. `set_prices({...})` in code.

An override is looked up as `provider:name`, then by the bare name; the catalogue matches the
name within the provider (so a dated snapshot such as `gpt-4o-mini-2024-07-18` finds
`gpt-4o-mini`), or among all providers for a model that names none. A model priced in tiers by
prompt length (Claude above 200k input tokens) is charged its base tier. A model with no price
counts as costing 0, with a warning once; a run with `max_cost_usd` set refuses such a model
(see `require_price`).
"""

from __future__ import annotations

import functools
import json
import threading
import tomllib
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from genai_prices import data_snapshot
from genai_prices.types import TieredPrices
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.models.base import Model, Usage
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.log import get_logger
from sleuth.runtime.paths import sleuth_home
from sleuth.runtime.settings import load_settings

log = get_logger(__name__)

PRICES_ENV = "SLEUTH_PRICES"
"""Path of a TOML or JSON file of prices that override the built-in ones."""
FREE_PROVIDERS = frozenset({"local", "scripted"})
"""Providers whose models run on this machine (or in tests): they cost 0 unless a price is set."""


class ModelPrice(BaseModel):
    """A model's price in USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_million: float = Field(ge=0)
    """USD per million input (prompt) tokens."""
    output_per_million: float = Field(ge=0)
    """USD per million output (completion) tokens."""

    def cost(self, usage: Usage) -> float:
        """What `usage` costs at this price, in USD."""
        return self.input_cost(usage.input_tokens) + self.output_cost(usage.output_tokens)

    def input_cost(self, tokens: int) -> float:
        return tokens * self.input_per_million / 1_000_000

    def output_cost(self, tokens: int) -> float:
        return tokens * self.output_per_million / 1_000_000

    def output_tokens_for(self, usd: float) -> int | None:
        """The most output tokens `usd` buys (None: output is free)."""
        if self.output_per_million == 0:
            return None
        return max(0, int(usd * 1_000_000 / self.output_per_million))


FREE = ModelPrice(input_per_million=0, output_per_million=0)


@functools.lru_cache(maxsize=256)
def catalogue_price(provider: str, name: str) -> ModelPrice | None:
    """The list price `genai-prices` knows for `name` (within `provider`, or among all providers
    when it is "" or a provider the catalogue lacks), or None. The base tier of a tiered price."""
    snapshot = data_snapshot.get_snapshot()
    if provider and all(known.id != provider for known in snapshot.providers):
        provider = ""  # a provider the catalogue does not know: match the name alone
    try:
        _, info = snapshot.find_provider_model(name, None, provider or None, None)
    except LookupError:
        return None
    prices = info.get_prices(datetime.now(UTC))
    input_price, output_price = _base(prices.input_mtok), _base(prices.output_mtok)
    if input_price is None and output_price is None:
        return None
    return ModelPrice(
        input_per_million=float(input_price or 0), output_per_million=float(output_price or 0)
    )


def _base(price: Decimal | TieredPrices | None) -> Decimal | None:
    return price.base if isinstance(price, TieredPrices) else price


_lock = threading.Lock()
_overrides: dict[str, ModelPrice] = {}
_file_cache: tuple[Path, float, dict[str, ModelPrice]] | None = None
_warned: set[str] = set()


def set_prices(prices: Mapping[str, ModelPrice | Mapping[str, float]] | None) -> None:
    """Set prices in code (`{"openai:gpt-4o-mini": ModelPrice(...)}` or `{"name": {"input_per_million":
    ..., "output_per_million": ...}}`); they win over the file and the built-in table.
    `set_prices(None)` drops every price set this way."""
    parsed = _parse_table(prices or {}, where="set_prices")
    with _lock:
        _overrides.clear()
        _overrides.update(parsed)


def prices_file() -> Path | None:
    """The price file in effect: `$SLEUTH_PRICES`, else `$SLEUTH_HOME/prices.toml` if it exists."""
    explicit = load_settings().prices
    if explicit is not None:
        path = explicit.expanduser()
        if not path.is_file():
            raise InvalidSettingError(
                f"{PRICES_ENV}={explicit}: no such file; point it at a TOML or JSON price table "
                "or unset it"
            )
        return path
    default = sleuth_home() / "prices.toml"
    return default if default.is_file() else None


def load_prices_file(path: Path) -> dict[str, ModelPrice]:
    """The price table of a TOML or JSON file (`{model: {input_per_million, output_per_million}}`)."""
    text = path.read_text()
    try:
        data: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise InvalidSettingError(
            f"price file {path} does not parse as {'JSON' if path.suffix == '.json' else 'TOML'}: "
            f"{exc}"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidSettingError(f"price file {path} must map model names to prices")
    return _parse_table(data, where=f"price file {path}")


def _parse_table(data: Mapping[str, Any], *, where: str) -> dict[str, ModelPrice]:
    table: dict[str, ModelPrice] = {}
    for name, value in data.items():
        if isinstance(value, ModelPrice):
            table[name] = value
            continue
        try:
            table[name] = ModelPrice.model_validate(value)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'price'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidSettingError(
                f"{where}: the price of {name!r} is not valid ({problems}); give "
                "input_per_million and output_per_million in USD, 0 or more"
            ) from None
    return table


def _file_prices() -> dict[str, ModelPrice]:
    global _file_cache
    path = prices_file()
    if path is None:
        return {}
    modified = path.stat().st_mtime
    with _lock:
        if _file_cache is not None and _file_cache[:2] == (path, modified):
            return _file_cache[2]
    table = load_prices_file(path)
    with _lock:
        _file_cache = (path, modified, table)
    return table


def model_key(model: Model) -> str:
    """`provider:name` for a model whose adapter names its provider, else its name."""
    provider = getattr(model, "provider", "")
    name = model.name
    if provider and not name.startswith(f"{provider}:"):
        return f"{provider}:{name}"
    return name


def price_of(model: Model | str) -> ModelPrice | None:
    """The price of `model` (a Model or a `provider:name`), or None when no table has it."""
    key = model if isinstance(model, str) else model_key(model)
    provider, _, bare = key.partition(":") if ":" in key else ("", "", key)
    with _lock:
        overrides = dict(_overrides)
    for table in (overrides, _file_prices()):
        for candidate in (key, bare):
            if candidate in table:
                return table[candidate]
    if provider in FREE_PROVIDERS:
        return FREE
    return catalogue_price(provider, bare)


def require_price(model: Model) -> ModelPrice:
    """The price of `model`; an error that says how to add one when it has none (a cost budget
    cannot be kept with a model of unknown price)."""
    price = price_of(model)
    if price is None:
        raise InvalidSettingError(
            f"model {model_key(model)!r} has no price, so max_cost_usd cannot be enforced: add "
            f'it to a price file (${PRICES_ENV}, e.g. ["{model_key(model)}"] input_per_million = '
            "… output_per_million = …) or call sleuth.set_prices(...)"
        )
    return price


def usd(cost: float) -> str:
    """A cost for people: `$0`, `$0.000042` below a cent, `$1.2345` above."""
    if cost == 0:
        return "$0"
    return f"${cost:.6f}" if cost < 0.01 else f"${cost:.4f}"


def priced(model: Model, usage: Usage) -> Usage:
    """`usage` with its cost at `model`'s price (0, with a warning once, for an unpriced model)."""
    price = price_of(model)
    if price is None:
        key = model_key(model)
        if key not in _warned:
            _warned.add(key)
            log.warning(
                "pricing.unpriced_model",
                model=key,
                hint=f"its calls count as costing 0; add a price to ${PRICES_ENV}",
            )
        return usage.model_copy(update={"cost_usd": 0.0})
    return usage.model_copy(update={"cost_usd": price.cost(usage)})
