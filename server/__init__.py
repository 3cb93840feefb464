"""The esfis service: the domain core and its interfaces (CLI, HTTP, MCP)."""
