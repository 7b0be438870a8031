"""Cost: the price table and its overrides, cost in every usage and report, and `max_cost_usd`
enforced like the token limits for agents, research runs and decomposition trees."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth import Agent, DeepDecomposer, UsageLimits, create_research_workflow
from sleuth.flows.decompose import DECISION_PROMPT
from sleuth.models.base import Message, Usage
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.telemetry import model_request
from sleuth.usage.limits import UsageLimitExceeded
from sleuth.usage.pricing import (
    ModelPrice,
    catalogue_price,
    price_of,
    priced,
    set_prices,
    usd,
)
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model

DECISION_MARK = DECISION_PROMPT.splitlines()[0]
"""How the decomposer's decision prompt begins (as in tests/flows/test_decompose.py)."""
# One dollar per thousand input tokens, two per thousand output tokens: easy sums.
EXPENSIVE = ModelPrice(input_per_million=1000, output_per_million=2000)


@pytest.fixture(autouse=True)
def no_prices_set() -> Iterator[None]:
    set_prices(None)
    yield
    set_prices(None)


class Named:
    def __init__(self, name: str, provider: str = ""):
        self.name = name
        self.provider = provider


def test_catalogue_prices_by_name_and_dated_snapshot() -> None:
    """List prices come from genai-prices' bundled snapshot, matched within the provider."""
    assert price_of(Named("gpt-4o-mini", "openai")) == ModelPrice(
        input_per_million=0.15, output_per_million=0.6
    )
    assert price_of(Named("gpt-4o-mini-2024-07-18", "openai")) == price_of("openai:gpt-4o-mini")
    # A tiered price (above 200k prompt tokens) is charged its base tier.
    assert price_of("anthropic:claude-sonnet-4-5-20250929") == ModelPrice(
        input_per_million=3, output_per_million=15
    )
    assert price_of("anthropic:claude-sonnet-4-5-20250929") == catalogue_price(
        "anthropic", "claude-sonnet-4-5-20250929"
    )
    # A provider the catalogue does not know: the name alone.
    assert price_of("my-gateway:gpt-4o") == price_of("openai:gpt-4o") is not None
    assert price_of(Named("local:qwen2.5-coder-1.5b", "local")) == ModelPrice(
        input_per_million=0, output_per_million=0
    )
    assert price_of(Named("my-finetune", "openai")) is None


def test_overrides_from_a_toml_file_a_json_file_and_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleuth_home: Path
) -> None:
    sleuth_home.mkdir(parents=True, exist_ok=True)
    (sleuth_home / "prices.toml").write_text(
        '["openai:my-finetune"]\ninput_per_million = 3.0\noutput_per_million = 6.0\n'
        '["gpt-4o-mini"]\ninput_per_million = 0.2\noutput_per_million = 0.8\n'
    )
    assert price_of("openai:my-finetune") == ModelPrice(input_per_million=3, output_per_million=6)
    assert price_of(Named("gpt-4o-mini", "openai")) == ModelPrice(
        input_per_million=0.2, output_per_million=0.8
    )
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"local:qwen": {"input_per_million": 1, "output_per_million": 1}}))
    monkeypatch.setenv("SLEUTH_PRICES", str(prices))
    assert price_of("local:qwen") == ModelPrice(input_per_million=1, output_per_million=1)
    assert price_of("openai:my-finetune") is None  # the explicit file replaces the default one
    set_prices({"local:qwen": {"input_per_million": 9, "output_per_million": 9}})
    assert price_of("local:qwen") == ModelPrice(input_per_million=9, output_per_million=9)


def test_a_bad_price_file_says_what_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('["gpt-4o"]\ninput_per_million = -1\noutput_per_million = 1\n')
    monkeypatch.setenv("SLEUTH_PRICES", str(prices))
    with pytest.raises(InvalidSettingError, match="'gpt-4o' is not valid .*input_per_million"):
        price_of("openai:gpt-4o")
    monkeypatch.setenv("SLEUTH_PRICES", str(tmp_path / "missing.toml"))
    with pytest.raises(InvalidSettingError, match="no such file"):
        price_of("openai:gpt-4o")
    prices.write_text("not = [toml")
    monkeypatch.setenv("SLEUTH_PRICES", str(prices))
    with pytest.raises(InvalidSettingError, match="does not parse as TOML"):
        price_of("openai:gpt-4o")


def test_costs_read_well() -> None:
    assert (usd(0), usd(0.0000421), usd(1.23456)) == ("$0", "$0.000042", "$1.2346")


def test_priced_usage_and_unpriced_models_cost_zero() -> None:
    usage = Usage(input_tokens=1000, output_tokens=500)
    assert priced(Named("gpt-4o", "openai"), usage).cost_usd == pytest.approx(0.0025 + 0.005)
    assert priced(Named("my-finetune", "openai"), usage).cost_usd == 0.0
    assert (usage + priced(Named("gpt-4o", "openai"), usage)).cost_usd == pytest.approx(0.0075)


async def test_every_model_request_is_priced() -> None:
    set_prices({"scripted": EXPENSIVE})
    model = ScriptedModel([text("hi", input_tokens=1000, output_tokens=500)])
    response = await model_request(model, [Message(role="user", content="hello")])
    assert response.usage.cost_usd == pytest.approx(1.0 + 1.0)


async def test_agent_usage_and_research_report_carry_the_cost() -> None:
    set_prices({"scripted": EXPENSIVE})
    agent = Agent(ScriptedModel([text("answer", input_tokens=100, output_tokens=50)]))
    result = await agent.arun("q")
    assert result.usage.cost_usd == pytest.approx(0.1 + 0.1)
    spec = create_research_workflow(model=scripted_model(ResearchScript()), tools=[lookup])
    report = (await spec.execute("CRM growth?")).final_state
    expected = EXPENSIVE.cost(Usage(**report.usage.model_dump(exclude={"total_tokens"})))
    assert report.cost_usd == pytest.approx(expected) and report.cost_usd > 0


def test_usage_limits_refuse_a_request_the_dollars_left_cannot_pay_for() -> None:
    limits = UsageLimits(max_cost_usd=1.0)
    messages = [Message(role="user", content="x" * 400)]  # about 100 input tokens: $0.10
    cap = limits.check_before_request(Usage(cost_usd=0.5), messages, EXPENSIVE)
    assert cap == 200  # $0.40 left after the input buys 200 output tokens at $2 per thousand
    with pytest.raises(UsageLimitExceeded, match="max_cost_usd=1.0"):
        limits.check_before_request(Usage(cost_usd=0.95), messages, EXPENSIVE)
    with pytest.raises(InvalidSettingError, match="price is unknown"):
        limits.check_before_request(Usage(), messages, None)
    free = ModelPrice(input_per_million=0, output_per_million=0)
    assert limits.check_before_request(Usage(cost_usd=0.99), messages * 100, free) is None
    with pytest.raises(UsageLimitExceeded):  # spent is spent, even before a free call
        limits.check_before_request(Usage(cost_usd=1.0), messages, free)


async def test_an_agent_stops_at_its_cost_budget() -> None:
    set_prices({"scripted": EXPENSIVE})
    model = ScriptedModel(
        [tool_call("lookup", topic=f"t{n}", input_tokens=300, output_tokens=100) for n in range(5)]
    )
    agent = Agent(model, tools=[lookup], limits=UsageLimits(max_cost_usd=1.0))
    result = await agent.arun("Research CRM.")
    assert result.stop_reason == "budget_exhausted"
    assert result.usage.cost_usd <= 1.0
    assert len(model.calls) < 5


class UnpricedModel(ScriptedModel):
    provider = "custom"


async def test_an_unpriced_model_under_a_cost_budget_is_refused_with_what_to_do() -> None:
    agent = Agent(UnpricedModel([text("x")], name="mystery"), limits=UsageLimits(max_cost_usd=1.0))
    with pytest.raises(InvalidSettingError, match="'custom:mystery' has no price.*SLEUTH_PRICES"):
        await agent.arun("q")


async def test_a_research_run_ends_budget_exhausted_when_its_budget_is_spent() -> None:
    set_prices({"scripted": EXPENSIVE})
    spec = create_research_workflow(
        model=scripted_model(ResearchScript(verdicts=[False])), tools=[lookup], max_cost_usd=0.3
    )
    report = (await spec.execute("CRM growth?")).final_state
    assert report.end_reason == "budget_exhausted"
    assert report.max_cost_usd == 0.3
    # Every request was checked before it was made; the judge and rewrites never ran past it.
    assert report.cost_usd <= 0.3 + 1e-9
    unbounded = create_research_workflow(
        model=scripted_model(ResearchScript(verdicts=[False])), tools=[lookup]
    )
    assert (await unbounded.execute("CRM growth?")).final_state.cost_usd > 0.3


async def test_a_per_run_cost_budget_overrides_the_config() -> None:
    set_prices({"scripted": EXPENSIVE})
    spec = create_research_workflow(
        model=scripted_model(ResearchScript(verdicts=[False])), tools=[lookup]
    )
    report = (await spec.execute({"prompt": "CRM growth?", "max_cost_usd": 0.3})).final_state
    assert report.end_reason == "budget_exhausted" and report.cost_usd <= 0.3 + 1e-9


def test_a_research_budget_needs_priced_models_at_definition_time() -> None:
    with pytest.raises(InvalidSettingError, match="'custom:mystery' has no price"):
        create_research_workflow(model=UnpricedModel(name="mystery"), max_cost_usd=1.0)
    with pytest.raises(InvalidSettingError, match="max_cost_usd must be more than 0"):
        create_research_workflow(model=ScriptedModel(), max_cost_usd=0)
    spec = create_research_workflow(model=UnpricedModel(name="mystery"))
    with pytest.raises(InvalidSettingError, match="has no price"):
        spec.initial_state("q", max_cost_usd=1.0)


async def test_a_decomposition_tree_keeps_its_cost_budget() -> None:
    """The tree's dollars are shared like its tokens: it never spends more than its budget."""
    set_prices({"scripted": EXPENSIVE})
    subtasks = [f"subtask {i}: check the vendor's pricing page" for i in range(8)]
    leaves_run: list[str] = []

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        # A real model reads what the request weighs and stops at the output cap it was given.
        weight = sum(len(m.content) for m in call.messages) // 4
        output = min(50, call.max_output_tokens or 50)
        if call.system_text.startswith(DECISION_MARK):
            decision = json.dumps({"direct": False, "subtasks": subtasks})
            return text(decision, input_tokens=weight, output_tokens=output)
        leaves_run.append(call.last_user_text)
        return text("noted", input_tokens=weight, output_tokens=output)

    limited = await DeepDecomposer(
        ScriptedModel(responder=respond), max_depth=1, max_fan_out=2, budget={"max_cost_usd": 0.8}
    ).arun("root")
    assert limited.spent.cost_usd <= 0.8
    assert 1 <= len(leaves_run) < len(subtasks)
    assert limited.outcome == "budget_exhausted"
    assert limited.tree.count("skipped") == len(subtasks) - len(leaves_run)
