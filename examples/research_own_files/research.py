"""An App whose research config searches the `handbook` store that `sleuth ingest` fills."""

from sleuth import App, RAGRetriever, SQLiteStore, create_research_workflow

app = App()
app.datastore(
    "handbook",
    RAGRetriever(store=SQLiteStore.named("handbook")),
    description="the company handbook: refunds, support hours",
)
app.research(
    "handbook",
    create_research_workflow(datastores=["handbook"], grounding_threshold=0.5, max_sub_questions=1),
)
