"""Your own activities, as in Temporal's samples: nothing here knows about Sleuth."""

from temporalio import activity

TICKETS = {"T-1": "Customer asks whether Acme's CRM costs more than $40 per seat."}


@activity.defn
async def fetch_ticket(ticket_id: str) -> str:
    return TICKETS.get(ticket_id, "no such ticket")
