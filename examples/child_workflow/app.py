"""What Sleuth adds to this project: a research config and an agent, both with one tool."""

from sleuth import App, create_deepagent, create_research_workflow, tool

TASK_QUEUE = "child-workflow-example"


@tool
def price_list(company: str) -> str:
    """The list price per seat of a company's CRM."""
    return "Acme charges $40 per seat per month for its CRM."


app = App(task_queue=TASK_QUEUE)
app.research(
    "prices",
    create_research_workflow(tools=[price_list], grounding_threshold=0.5, max_sub_questions=1),
)
app.agent(
    "analyst",
    lambda: create_deepagent(tools=[price_list], grounding=False, max_iterations=4),
)
