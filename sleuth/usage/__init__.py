"""Usage: one `UsageLimits` for tokens, requests, tool calls and cost; budgets; prices."""
