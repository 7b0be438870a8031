"""Knowledge scans: providers of items, one research run per item, row sinks."""
