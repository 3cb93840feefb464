"""Two real ``esfis serve`` over the test PostgreSQL and moto's S3, behind Debian's nginx running
``docs/nginx/esfis.conf`` itself (TLS with a self-signed certificate, round robin, streams
unbuffered): an MCP client's whole session through the proxy with no error, both servers
answering it, the barrier holding; and a call held on one server, approved on the other's
settings page, applied exactly once."""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests import catalogs
from tests.http.conftest import Server, free_port, start_server, stop_server

pytestmark = pytest.mark.postgresql
CONFIG = Path(__file__).resolve().parents[2] / "docs" / "nginx" / "esfis.conf"
AUTH0 = "Acme authentication uses Auth0"
CLERK = "Globex authentication uses Clerk"
SECRET = "the staging database password is in vault path secret/acme-stg"
LEAK = "staging db password: vault secret/acme-stg"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def nginx() -> str:
    """Debian's nginx; installed by package name when missing and we may (root)."""
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if found is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-q"], check=False, capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-q", "nginx"], check=False, capture_output=True, timeout=1200)
        found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if found is None:
        pytest.fail("the proxy test runs Debian's nginx: apt-get install nginx (as root)")
    return found


@dataclass
class Proxied:
    url: str  # https, through nginx
    a: Server
    b: Server
    certificate: Path


def _certificate(folder: Path) -> tuple[Path, Path]:
    key, cert = folder / "privkey.pem", folder / "fullchain.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return key, cert


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory, s3) -> Iterator[Proxied]:
    root = tmp_path_factory.mktemp("nginx")
    work = root / "work"
    for name in ("acme", "acme/platform", "globex"):
        (work / name).mkdir(parents=True)
    key, cert = _certificate(root)
    port = free_port()
    public = f"https://127.0.0.1:{port}"
    shared = {
        "ESFIS_CATALOG": catalogs.CLUSTER.new_catalog(),
        "ESFIS_VECTORS": f"s3://{s3.bucket()}/esfis",
        "ESFIS_PUBLIC_URL": public,
        "FORWARDED_ALLOW_IPS": "127.0.0.1",  # the proxy's address: only its X-Forwarded-For counts
        **s3.env,
    }
    a = start_server(root / "home-a", work, **shared)
    b = start_server(root / "home-b", work, **shared)
    proxy = None
    try:
        site = CONFIG.read_text()
        for example, ours in (
            ("10.0.0.11:8765", a.url.removeprefix("http://")),
            ("10.0.0.12:8765", b.url.removeprefix("http://")),
            ("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
            ("/etc/ssl/esfis/fullchain.pem", str(cert)),
            ("/etc/ssl/esfis/privkey.pem", str(key)),
        ):
            assert example in site
            site = site.replace(example, ours)
        (root / "esfis.conf").write_text(site)
        temp = root / "nginx-temp"
        temp.mkdir()
        (root / "nginx.conf").write_text(
            f"master_process off; daemon off; pid {root}/nginx.pid; error_log {root}/nginx-error.log;\n"
            "events {}\n"
            f"http {{ access_log off; client_body_temp_path {temp}/body; proxy_temp_path {temp}/proxy;\n"
            f"  fastcgi_temp_path {temp}/fcgi; uwsgi_temp_path {temp}/uwsgi; scgi_temp_path {temp}/scgi;\n"
            f"  include {root}/esfis.conf; }}\n"
        )
        proxy = subprocess.Popen([nginx(), "-c", str(root / "nginx.conf"), "-p", str(root)], stderr=subprocess.PIPE)
        context = ssl.create_default_context(cafile=str(cert))
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{public}/healthz", verify=context, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                if proxy.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"nginx did not start: {(root / 'nginx-error.log').read_text()}") from None
                time.sleep(0.1)
        for name in ("acme", "acme/platform", "globex"):
            a.cli("space", "add", str(work / name))
        a.cli("remember", AUTH0, "--space", "acme")
        b.cli("remember", CLERK, "--space", "globex")
        a.cli("remember", SECRET, "--space", "acme/platform")
        a.tokens["operator"] = a.token("--operator")
        yield Proxied(public, a, b, cert)
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        stop_server(a)
        stop_server(b)


async def _ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, " ".join(getattr(c, "text", "") for c in result.content)
    assert result.structured_content is not None
    return result.structured_content


def _served_mcp(server: Server) -> int:
    return len(re.findall(r"POST /mcp 200", server.log.read_text()))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_mcp_session_through_nginx_round_robin_has_no_error_and_the_barrier_holds(proxied):
    before = (_served_mcp(proxied.a), _served_mcp(proxied.b))
    token = proxied.a.agent_token()
    verify = ssl.create_default_context(cafile=str(proxied.certificate))
    async with AsyncExitStack() as stack:
        # No keep-alive: every request a new connection, so the proxy hands them round.
        limits = httpx2.Limits(max_keepalive_connections=0)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, verify=verify, limits=limits, timeout=60)
        )
        url = f"{proxied.url}/mcp?space=acme/platform"
        client = await stack.enter_async_context(Client(streamable_http_client(url, http_client=http)))
        assert {"remember", "recall", "check_approval"} <= {t.name for t in (await client.list_tools()).tools}
        for _ in range(3):
            found = [m["text"] for m in (await _ok(client, "recall", query="staging database password"))["memories"]]
            assert SECRET in found and CLERK not in found
        written = await _ok(client, "remember", text="the platform's staging tenant is acme-stg")
        assert written["space"] == "acme/platform"
        held = await _ok(client, "remember", text=LEAK, personal=True)
        assert held["id"] is None and held["approval"]["status"] == "pending"
        assert (await _ok(client, "check_approval", id=held["approval"]["id"]))["status"] == "pending"
        await _ok(client, "forget", id=held["approval"]["id"])
    after = (_served_mcp(proxied.a), _served_mcp(proxied.b))
    assert after[0] > before[0] and after[1] > before[1], (before, after)  # both servers answered
    for server in (proxied.a, proxied.b):
        assert " 500 " not in server.log.read_text()


def test_a_call_held_on_one_server_is_approved_on_the_others_page_and_applied_once(proxied):
    a, b = proxied.a, proxied.b
    token = a.agent_token()
    with a.client(token) as on_a:
        assert SECRET in [
            m["text"]
            for m in on_a.post(
                "/v1/recall", json={"query": "staging database password", "space": "acme/platform"}
            ).json()["memories"]
        ]
        held = on_a.post("/v1/memories", json={"text": LEAK + " (held)", "personal": True})
        assert held.status_code == 202
        approval = held.json()["approval"]["id"]
    # B's own settings page, at B's address: its cookies are __Host- (the public address is
    # https), so they are carried by hand here, as the browser would carry them behind the proxy.
    base = re.search(r"esfis: settings page: https://[^/]+(/settings/[a-z2-7]{26}/)", b.log.read_text()).group(1)
    with httpx.Client(base_url=b.url, follow_redirects=False, timeout=30) as page:
        form = page.get(base + "sign-in")
        cookies = _cookies(form)
        signed = page.post(
            base + "sign-in",
            data={"csrf": CSRF.search(form.text).group(1), "token": a.tokens["operator"], "next": ""},
            headers={"Cookie": _header(cookies)},
        )
        assert signed.status_code == 303, signed.text
        cookies.update(_cookies(signed))
        listed = page.get(base + "approvals", headers={"Cookie": _header(cookies)})
        assert approval in listed.text
        for _ in range(2):  # twice: applied once
            page.post(
                base + "approvals",
                data={"csrf": CSRF.search(listed.text).group(1), "id": approval, "action": "approve"},
                headers={"Cookie": _header(cookies)},
            )
    with a.client(token) as on_a:
        status = on_a.get(f"/v1/approvals/{approval}").json()
        assert status["status"] == "approved" and status["memory"]
    anyone = b.client(b.agent_token(ai="cursor"))
    found = [
        m["text"] for m in anyone.post("/v1/recall", json={"query": "staging db password vault"}).json()["memories"]
    ]
    assert found.count(LEAK + " (held)") == 1


def _cookies(response: httpx.Response) -> dict[str, str]:
    found = {}
    for header in response.headers.get_list("set-cookie"):
        name, _, rest = header.partition("=")
        value = rest.split(";", 1)[0]
        if value and "max-age=0" not in header.lower():
            found[name] = value
    return found


def _header(cookies: dict[str, str]) -> str:
    return "; ".join(f"{k}={v}" for k, v in cookies.items())
