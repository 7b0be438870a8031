"""A user's test of their own research config, with Sleuth's test kit: the plugin, a scripted
model and a time-skipping Temporal server, all from `sleuth.testing`."""

from pricing import build_app

from sleuth.testing import (
    ModelCall,
    ScriptedModel,
    SleuthTestEnvironment,
    node_of_request,
    text,
    tool_call,
)

ANSWER = "Acme charges $40 per seat per month for its CRM."


def answer(call: ModelCall) -> object:
    node = node_of_request(call.messages)
    if node == "execute" and not any(m.role == "tool" for m in call.messages):
        return tool_call("price_list", company="Acme")
    if node == "plan":
        return text('["What does Acme charge per seat?"]')
    if node == "grounding_eval":
        return text("Yes")
    return text(ANSWER)


async def test_the_report_is_grounded_in_the_price_list() -> None:
    app = build_app(ScriptedModel(responder=answer))
    async with SleuthTestEnvironment(app) as env:
        outcome = await env.research("What does Acme charge per seat?", research="prices")
    report = outcome.final_state
    assert report.status == "grounded"
    assert report.summary.startswith(ANSWER)
    assert [c.grounded for c in report.claims] == [True]
