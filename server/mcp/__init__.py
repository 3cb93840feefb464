"""``esfis mcp``: the MCP interface (stdio), a thin layer over the service façade.

``standing`` decides, once at start, where the server stands (its space, its run) and who calls
(the AI); ``server`` declares the four tools and maps errors in one place.
"""
