"""What ``esfis serve`` says when it starts: where the settings page is, and — on a fresh home,
to a person at a terminal only — a first operator token to sign in with, so that nobody needs
the CLI first. Never to a log. And the web layer reaches the core through the façade only.
"""

from __future__ import annotations

import ast
import io
import re
import stat
from pathlib import Path

from indexing.embedding.testing import HashingEmbedder
from server.cli import main
from server.facade import open_service
from server.web import announcement, settings_url
from server.web.operators import operator_sign_in
from server.web.site import segment_of
from tests.catalogs import settings_for

WEB = Path(__file__).resolve().parents[2] / "server" / "web"
TOKEN = re.compile(r"esfis_[A-Za-z0-9_-]{43}")
ADDRESS = re.compile(r"esfis: settings page: http://127\.0\.0\.1:8765/settings/([a-z2-7]{26})/\n")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _start(home: Path, out: io.StringIO):
    service = open_service(settings_for(home), embedder=HashingEmbedder())
    for line in announcement(service, "127.0.0.1", 8765, at_terminal=out.isatty()):
        print(line, file=out)
    return service


def test_a_fresh_home_at_a_terminal_shows_a_first_operator_token_once(home):
    first = Terminal()
    service = _start(home, first)
    segment = ADDRESS.search(first.getvalue()).group(1)
    secret = TOKEN.search(first.getvalue()).group(0)
    assert operator_sign_in(service, secret).operator
    service.close()
    again = Terminal()
    _start(home, again).close()
    assert ADDRESS.search(again.getvalue()).group(1) == segment  # the same address, start after start
    assert not TOKEN.search(again.getvalue())


def test_a_log_never_gets_a_token_and_none_is_made(home):
    log = io.StringIO()
    service = _start(home, log)
    assert "settings page" in log.getvalue() and "esfis token create --operator" in log.getvalue()
    assert not TOKEN.search(log.getvalue()) and service.operator.tokens() == []
    service.close()


def test_the_settings_url_names_a_host_a_browser_can_open(home):
    home.mkdir(parents=True)
    segment = segment_of(home)
    assert settings_url(home, "0.0.0.0", 8765) == f"http://127.0.0.1:8765/settings/{segment}/"
    assert settings_url(home, "::1", 9000) == f"http://[::1]:9000/settings/{segment}/"
    assert settings_url(home, "example.lan", 80) == f"http://example.lan:80/settings/{segment}/"
    public = settings_url(home, "0.0.0.0", 8765, "https://esfis.example.com")
    assert public == f"https://esfis.example.com/settings/{segment}/"  # ESFIS_PUBLIC_URL, as a proxy serves it


def test_the_address_is_128_random_bits_kept_private_in_the_home(home, tmp_path):
    home.mkdir(parents=True)
    segment = segment_of(home)
    assert re.fullmatch(r"[a-z2-7]{26}", segment) and segment_of(home) == segment
    assert stat.S_IMODE((home / "web-path.key").stat().st_mode) == 0o600
    other = tmp_path / "another-home"
    other.mkdir()
    assert segment_of(other) != segment  # each home its own
    (home / "web-path.key").unlink()
    assert segment_of(home) != segment  # deleting the file moves the pages


def test_esfis_settings_url_prints_what_serve_printed(home, capsys, monkeypatch):
    monkeypatch.setenv("ESFIS_HOME", str(home))
    monkeypatch.delenv("ESFIS_PUBLIC_URL", raising=False)
    assert main(["settings-url"]) == 0
    assert capsys.readouterr().out == f"http://127.0.0.1:8765/settings/{segment_of(home)}/\n"
    assert main(["settings-url", "--port", "9000"]) == 0
    assert capsys.readouterr().out == f"http://127.0.0.1:9000/settings/{segment_of(home)}/\n"
    monkeypatch.setenv("ESFIS_PUBLIC_URL", "https://esfis.example.com/")
    assert main(["settings-url"]) == 0
    assert capsys.readouterr().out == f"https://esfis.example.com/settings/{segment_of(home)}/\n"


def test_the_web_layer_calls_the_facade_only():
    """server.web may import the façade (server.facade), the error tree, the text forms every
    interface shows names in (server.render: ``inert``) and itself: never the catalog, the
    registry, the token book or any other book."""
    allowed = {"server.facade", "server.errors", "server.render"}
    for path in WEB.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for name in names:
                if name.split(".")[0] == "server" and not name.startswith("server.web"):
                    assert name in allowed, f"{path.name} imports {name}"
