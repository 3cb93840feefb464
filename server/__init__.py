"""The esfis service: the core (catalog, spaces, barrier, memories, bulk), the façade over it,
the vocabulary every layer shares, and the interfaces (CLI, HTTP, MCP, the web pages)."""
