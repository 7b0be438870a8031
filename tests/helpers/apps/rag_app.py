"""An app with one in-memory datastore, for `sleuth ingest --app` tests."""

from sleuth import App
from sleuth.rag import InMemoryVectorStore, RAGRetriever

app = App(task_queue="rag-tests")
app.datastore("guides", RAGRetriever(store=InMemoryVectorStore()), description="how-to guides")
