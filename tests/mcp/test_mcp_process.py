"""The process itself: nothing but protocol on stdout (a raw ``esfis mcp``, driven line by line
through a model load, a write and a recall, prints only JSON-RPC messages there), and a start
that imports neither the model stack nor the vector stack before the handshake."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

HEAVY = ("torch", "sentence_transformers", "transformers", "lancedb", "pyarrow", "numpy")


def test_the_handshake_path_imports_no_model_or_vector_stack(world):
    # What run_stdio does before it serves: resolve the standing, build the server.
    code = (
        "import os, sys\n"
        "from server.mcp.server import build_server\n"
        "from server.mcp.standing import stand\n"
        "from server.settings import Settings\n"
        "standing = stand(Settings.from_env(), os.environ, os.getcwd())\n"
        "assert standing.space == 'acme', standing\n"
        "build_server(lambda: None, standing)\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=world.folder("acme"),
        env=world.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def request(id_: int, method: str, params: dict | None = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}) + "\n"


def test_stdout_carries_only_json_rpc_messages(world):
    proc = subprocess.Popen(
        world.command("mcp"),
        cwd=world.folder("acme"),
        env=world.env(),
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    watchdog = threading.Timer(300, proc.kill)
    watchdog.start()
    try:
        lines: list[str] = []
        answers: dict[int, dict] = {}

        def answer(id_: int) -> dict:
            while id_ not in answers:  # answers may come out of order: calls run concurrently
                line = proc.stdout.readline()
                assert line, f"stdout closed early; stderr:\n{proc.stderr.read()}"
                lines.append(line)
                message = json.loads(line)
                answers[message.get("id")] = message
            return answers[id_]

        proc.stdin.write(
            request(
                1,
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "Raw Test Client", "version": "0"},
                },
            )
        )
        proc.stdin.flush()
        assert answer(1)["result"]["serverInfo"]["name"] == "esfis"
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        proc.stdin.write(request(2, "tools/list"))
        proc.stdin.write(request(3, "tools/call", {"name": "remember", "arguments": {"text": "Acme logs go to Loki"}}))
        proc.stdin.write(request(5, "tools/call", {"name": "forget", "arguments": {"id": "not-an-id"}}))
        proc.stdin.flush()
        assert len(answer(2)["result"]["tools"]) == 7
        assert answer(3)["result"]["isError"] is False  # the model loaded: the noisy part is over
        proc.stdin.write(request(4, "tools/call", {"name": "recall", "arguments": {"query": "where do logs go?"}}))
        proc.stdin.flush()
        assert "Acme logs go to Loki" in json.dumps(answer(4)["result"])
        assert answer(5)["result"]["isError"] is True
        rest, stderr = proc.communicate(timeout=30)  # closes stdin: the server's cue to stop
    finally:
        watchdog.cancel()
        proc.kill()
    lines += rest.splitlines(keepends=True)
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0", line
    assert proc.returncode == 0, stderr
