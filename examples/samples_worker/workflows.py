"""Your own workflow, as in Temporal's samples. Sleuth's workflows live under `sleuth.workflows`,
so this module's name does not collide with them."""

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import fetch_ticket


@workflow.defn
class TicketWorkflow:
    @workflow.run
    async def run(self, ticket_id: str) -> str:
        return await workflow.execute_activity(
            fetch_ticket, ticket_id, start_to_close_timeout=timedelta(seconds=30)
        )
