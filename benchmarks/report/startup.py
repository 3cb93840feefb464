"""The sections on a process's start: CLI wall time (``test_cli_wall.py``), MCP start-up
(``test_mcp_startup.py``) and the server's (``test_serve_startup.py``)."""

from __future__ import annotations

from benchmarks.report.common import Checks, fmt, table


def section_cli(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        command = r.get("command", r["name"])
        key = "cli.recall_s" if command == "recall" else "cli.other_s"
        body.append(
            [command, r.get("rounds"), checks.check(key, command, r.get("p50_s")), r.get("max_s"), r["outcome"]]
        )
    return table(body, ["command", "rounds", "median s", "max s", "test"])


def section_mcp(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        launch = "launch_to_tools_list_s" in r
        body.append(
            [
                r["name"],
                checks.check("mcp.median_s", "launch → tools/list", r.get("median_s"))
                if launch
                else f"{fmt(r.get('median_s'))} (no target)",
                r["outcome"],
            ]
        )
    return table(body, ["benchmark", "median s", "test"])


def section_serve(rows: list[dict], checks: Checks) -> list[str]:
    body = [[r["name"], fmt(r.get("healthz_median_s")), fmt(r.get("model_ready_median_s")), r["outcome"]] for r in rows]
    return table(body, ["benchmark", "launch → /healthz, median s", "launch → model ready, median s", "test"])
