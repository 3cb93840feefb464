"""``esfis mcp`` and ``/mcp``: the MCP interface, a thin layer over the service façade.

    standing       where a stdio server stands (its space, its run) and who calls (the AI)
    server         the seven tools over the façade, and the one place errors become tool errors
    descriptions   what each tool tells the model
    person         who answers a call that needs a person: the host's user, or the operator
    opening        the service, opened and warmed in the background after the handshake
    stdio          ``esfis mcp``: the process over stdin/stdout, one run per session

Over HTTP, ``server.http.mcp`` serves the same server at ``/mcp``.
"""
