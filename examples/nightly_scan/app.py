"""A knowledge provider (the vendors to check) and the research each vendor gets."""

from sleuth import App, ItemRef, KnowledgeProvider, create_research_workflow, tool

VENDORS = {
    "acme": "Acme Corp: CRM vendor, contract renews in March, SOC 2 report dated 2025.",
    "globex": "Globex Inc: CRM vendor, contract renews in June, no SOC 2 report on file.",
}


class Vendors(KnowledgeProvider):
    def list_items(self) -> list[ItemRef]:
        return [ItemRef(id=key, label=key.title()) for key in VENDORS]

    def describe_item(self, ref: ItemRef) -> str:
        return f"Vendor {ref.label}: when does its contract renew, and is a SOC 2 report on file?"


@tool
def vendor_file(vendor: str) -> str:
    """What the vendor file says about a vendor: contract and compliance."""
    hits = [text for key, text in VENDORS.items() if key in vendor.lower()]
    return "\n".join(hits or VENDORS.values())


app = App()
app.provider("vendors", Vendors())
app.research(
    "vendor-risk",
    create_research_workflow(tools=[vendor_file], grounding_threshold=0.5, max_sub_questions=1),
)
