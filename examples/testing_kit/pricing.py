"""The App under test: a research config with one tool."""

from sleuth import App, create_research_workflow, tool


@tool
def price_list(company: str) -> str:
    """The list price per seat of a company's CRM."""
    return "Acme charges $40 per seat per month for its CRM."


def build_app(model: object = None) -> App:
    """The App; tests hand it a scripted model, production leaves the default."""
    app = App(task_queue="pricing")
    app.research(
        "prices",
        create_research_workflow(
            model=model, tools=[price_list], grounding_threshold=0.5, max_sub_questions=1
        ),
    )
    return app
