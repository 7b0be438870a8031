"""A deep agent that searches its notes, then submits an answer with its confidence."""

from sleuth import create_deepagent, tool

NOTES = {
    "acme": "Acme charges $40 per seat per month for its CRM.",
    "globex": "Globex charges $55 per seat per month for its CRM.",
}


@tool
def search_notes(query: str) -> str:
    """Search the pricing notes for a company or a topic."""
    hits = [note for name, note in NOTES.items() if name in query.lower()]
    return "\n".join(hits or NOTES.values())


@tool
def submit(answer: str, confidence: float) -> str:
    """Submit the final answer with your confidence, from 0 to 1."""
    return "accepted"


agent = create_deepagent(
    tools=[search_notes, submit],
    system_prompt="You answer pricing questions from the notes. Search first, then submit.",
    submit_tool="submit",
    enable_todos=True,
)

if __name__ == "__main__":
    result = agent.run_sync("What does Acme charge per seat?")
    print("stopped:", result.stop_reason)
    print("tools called:", ", ".join(item.tool for item in result.evidence))
    print("answer:", result.message)
