"""CLI commands that start long-running interfaces or move data in bulk: serve, mcp, import,
token. Each imports its interface only when run, so ``esfis recall`` never pays for FastAPI,
the MCP SDK or the model stack."""

from __future__ import annotations

import argparse


def cmd_serve(args) -> None:
    from server.arenas import limit_malloc_arenas
    from server.http.app import serve

    limit_malloc_arenas()  # a long-lived process with many threads
    serve(host=args.host, port=args.port)


def cmd_mcp(args) -> None:
    from server.arenas import limit_malloc_arenas
    from server.mcp.server import run_stdio

    limit_malloc_arenas()
    run_stdio()


def cmd_import(args) -> None:
    from server.importer import run_cli_import

    run_cli_import(args)


def cmd_token(args) -> None:
    from server.tokens import run_cli_token

    run_cli_token(args)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the HTTP API (and the operator's web page)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("mcp", help="serve MCP over stdio, in the space of the current folder")
    p.set_defaults(run=cmd_mcp)

    p = sub.add_parser("import", help="bulk import JSON Lines or Parquet (FILE, or - for stdin)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--ai", help="the AI recorded as writer (default: $ESFIS_AI, else 'import')")
    p.add_argument("--batch-size", type=int, default=4096, help="rows embedded and written at a time (at most 8192)")
    p.add_argument("--format", choices=["jsonl", "parquet"], help="default: from the file's extension")
    p.set_defaults(run=cmd_import)

    token = sub.add_parser("token", help="create, list and revoke HTTP tokens").add_subparsers(
        dest="token_command", required=True
    )
    p = token.add_parser("create", help="print a new token (shown once)")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--ai", dest="token_ai", help="the AI this token acts as")
    who.add_argument("--operator", action="store_true", help="a token that administers")
    p.add_argument("--space", dest="token_space", help="with --ai: act only inside this space's subtree")
    p.set_defaults(run=cmd_token)
    p = token.add_parser("list", help="list tokens (never their secrets)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_token)
    p = token.add_parser("revoke", help="revoke a token by its id")
    p.add_argument("token_id", metavar="ID")
    p.set_defaults(run=cmd_token)
