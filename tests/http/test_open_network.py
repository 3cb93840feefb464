"""What a stranger can leave behind on an open network, against a real ``esfis serve --workers 2``
with OAuth on (both catalogs): clients read from a metadata document are capped and pruned like
registered ones; an ``/authorize`` error goes back only to a client the operator has said yes to,
and is shown on esfis's own page otherwise (RFC 9700 §4.11.2); a client's name is shown inert on
every page that names it; a connection refreshing as fast as it may keeps a bounded number of
refresh rows; one address holds at most its share of the consents waiting for the operator."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest

from server.catalog import open_catalog
from server.errors import TooManyRequests
from server.settings import Settings
from server.spaces.connections import (
    CONSENT_S,
    KEPT_USED_REFRESH,
    MAX_PENDING_PER_ADDRESS,
    ConnectionBook,
)
from server.spaces.oauth_clients import MAX_CLIENTS, UNUSED_CLIENT_S
from server.spaces.tokens import TokenBook
from tests.conftest import MovableClock
from tests.http.conftest import Server, start_server, stop_server
from tests.http.oauth_support import (
    CALLBACK,
    authorize,
    connect,
    consent,
    exchange,
    pkce,
    query_of,
    refresh,
    register,
)

HOSTILE_NAME = (
    "Evil\r\x1b[2K\u202egnp.exe\u200b"  # a carriage return, an ANSI erase, a bidi override, a zero-width space
)
RAW = ("\r", "\x1b", "\u202e", "\u200b")
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class _Documents(BaseHTTPRequestHandler):
    bodies: dict[str, bytes] = {}
    fetched: Counter[str] = Counter()

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.fetched[self.path] += 1
        body = self.bodies.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def documents():
    """Client ID Metadata Documents, served by the test on loopback: (base URL, publish)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Documents)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def publish(path: str, name: str = "Document host") -> str:
        client_id = base + path
        _Documents.bodies[path] = json.dumps(
            {"client_id": client_id, "client_name": name, "redirect_uris": [CALLBACK]}
        ).encode()
        return client_id

    try:
        yield publish
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("open-network")
    (root / "work" / "acme").mkdir(parents=True)
    # More OAuth requests a minute than the default from one address: the limit is
    # tests/http/test_rate_limits.py's to prove.
    server = start_server(root / "home", root / "work", workers=2, ESFIS_RATE_OAUTH="1000/minute")
    try:
        server.cli("space", "add", str(root / "work" / "acme"))
        server.tokens["operator"] = server.token("--operator")
        yield server
    finally:
        stop_server(server)


def catalog_of(server: Server):
    return open_catalog(Settings(home=server.home, model=None, catalog=server.env.get("ESFIS_CATALOG")))


def client_ids(server: Server, kind: str) -> set[str]:
    catalog = catalog_of(server)
    try:
        return {r["client_id"] for r in catalog.all("SELECT client_id FROM oauth_clients WHERE kind = ?", (kind,))}
    finally:
        catalog.close()


# -- clients read from a metadata document: capped and pruned ---------------------------------


def test_document_clients_are_capped_and_a_known_one_is_still_read_again(served, documents):
    """With as many document clients as the catalog keeps, a new one is refused (nothing
    stored, the reason said), a known one is still read again, and registration (a cap of its
    own) still works."""
    known = documents("/capped/known.json")
    assert authorize(served.url, known, pkce()[1]).status_code == 302
    decoys = [f"https://decoy-{i}.example/client.json" for i in range(MAX_CLIENTS)]
    catalog = catalog_of(served)
    try:
        with catalog.transaction() as tx:
            tx.execute(
                "INSERT INTO oauth_clients (client_id, kind, info, created_at, fetched_at) "
                f"SELECT value, 'document', '{{}}', 0, 0 FROM {tx.sql.values}",
                (json.dumps(decoys),),
            )
        fresh = documents("/capped/new.json")
        refused = authorize(served.url, fresh, pkce()[1])
        assert refused.status_code == 400, refused.text
        assert "try later" in refused.json()["error_description"]
        assert fresh not in client_ids(served, "document")
        with catalog.transaction() as tx:  # the known one's copy is stale: it must be read again
            tx.execute("UPDATE oauth_clients SET fetched_at = 0 WHERE client_id = ?", (known,))
        assert authorize(served.url, known, pkce()[1]).status_code == 302
        assert register(served.url).status_code == 201
    finally:
        with catalog.transaction() as tx:
            tx.execute(
                f"DELETE FROM oauth_clients WHERE client_id IN (SELECT value FROM {tx.sql.values})",
                (json.dumps(decoys),),
            )
        catalog.close()


def test_a_document_client_with_no_connection_is_pruned_after_a_day_and_a_connected_one_kept(served, documents):
    """The upkeep's prune (``ConnectionBook.prune``, run every minute by the server), two days
    on: a document client that only asked is gone (its document is read again when it next
    asks), one the operator connected stays, and so does a registered client that connected."""
    asked = documents("/pruned/asked.json")
    assert authorize(served.url, asked, pkce()[1]).status_code == 302
    kept = documents("/pruned/connected.json")
    verifier, challenge = pkce()
    started = authorize(served.url, kept, challenge)
    back = consent(served.url, started.headers["location"], served.tokens["operator"], ai="kept-host", space="acme")
    assert exchange(served.url, kept, query_of(back)["code"], verifier).status_code == 200
    registered = connect(served.url, served.tokens["operator"], ai="registered-host").client_id
    assert {asked, kept} <= client_ids(served, "document")
    catalog = catalog_of(served)
    try:
        later = MovableClock(datetime.now(UTC) + timedelta(seconds=2 * UNUSED_CLIENT_S))
        ConnectionBook(catalog, TokenBook(catalog), later).prune()
    finally:
        catalog.close()
    documents_left = client_ids(served, "document")
    assert asked not in documents_left and kept in documents_left
    assert registered in client_ids(served, "registered")
    fetched = _Documents.fetched["/pruned/asked.json"]
    assert authorize(served.url, asked, pkce()[1]).status_code == 302
    assert _Documents.fetched["/pruned/asked.json"] == fetched + 1


# -- /authorize's errors: never an open redirector --------------------------------------------


def _plain_pkce(url: str, client_id: str, redirect: str = CALLBACK) -> httpx.Response:
    """A malformed authorization (PKCE ``plain``), which the SDK answers with an error redirect."""
    return authorize(url, client_id, pkce()[0], method="plain", redirect=redirect)


def test_an_authorize_error_for_a_client_nobody_consented_to_is_shown_here_not_redirected(served, documents):
    """A stranger registers ``https://evil.example/phish`` and sends people a malformed
    ``/authorize`` link on esfis's address: esfis shows the error on its own page (400, the
    pages' CSP) and never sends the browser there. A metadata-document client likewise."""
    client_id = register(served.url, redirect="https://evil.example/phish").json()["client_id"]
    answer = _plain_pkce(served.url, client_id, "https://evil.example/phish")
    assert answer.status_code == 400 and "location" not in answer.headers
    assert answer.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert "invalid_request" in answer.text and "evil.example" not in answer.text
    document = documents("/errors/stranger.json")
    shown = _plain_pkce(served.url, document)
    assert shown.status_code == 400 and "location" not in shown.headers
    wrong_resource = authorize(
        served.url, client_id, pkce()[1], redirect="https://evil.example/phish", resource="https://other.example/mcp"
    )
    assert wrong_resource.status_code == 400 and "invalid_target" in wrong_resource.text


def test_an_authorize_error_for_a_consented_client_goes_back_to_its_redirect_uri(served):
    """Once the operator said yes to a client, its redirect URI is vouched for: an error goes
    back there (RFC 6749 §4.1.2.1), with ``state`` as given."""
    client_id = connect(served.url, served.tokens["operator"], ai="consented-host").client_id
    answer = _plain_pkce(served.url, client_id)
    assert answer.status_code == 302
    location = answer.headers["location"]
    assert location.startswith(CALLBACK) and query_of(location)["error"] == "invalid_request"
    assert query_of(location)["state"] == "state-1"


# -- a stranger's client name, inert on every page ---------------------------------------------


def _inert(html: str) -> None:
    for char in RAW:
        assert char not in html, f"{char!r} reached the page raw"
    assert "\\r\\x1b[2K\\u202egnp.exe\\u200b" in html  # shown, as the CLI shows it


def test_a_strangers_client_name_is_inert_on_the_landing_the_consent_and_the_tokens_pages(served):
    client_id = register(served.url, name=HOSTILE_NAME).json()["client_id"]
    verifier, challenge = pkce()
    landing = authorize(served.url, client_id, challenge).headers["location"]
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=30) as browser:
        _inert(browser.get(landing).text)
        signed = browser.post(landing, data={"token": served.tokens["operator"]})
        consent_page = signed.headers["location"]
        page = browser.get(consent_page)
        _inert(page.text)
        form = {"csrf": CSRF.search(page.text).group(1), "decision": "approve", "ai": "inert-host", "space": "acme"}
        back = browser.post(consent_page, data=form).headers["location"]
        assert exchange(served.url, client_id, query_of(back)["code"], verifier).status_code == 200
        settings = urlsplit(consent_page).path.rsplit("/connections/", 1)[0]
        tokens = browser.get(f"{settings}/tokens")
        assert tokens.status_code == 200 and "inert-host" in tokens.text
        _inert(tokens.text)


# -- a connection's own rows -----------------------------------------------------------------


def test_a_connection_refreshing_as_fast_as_it_may_keeps_a_bounded_number_of_rows(served):
    """Each refresh rotates the token and keeps the used one to catch a replay: only the newest
    ``KEPT_USED_REFRESH`` are kept, and the last used one shown again still ends the connection."""
    link = connect(served.url, served.tokens["operator"], ai="refreshing-host")
    current = link.refresh
    used = []
    for _ in range(KEPT_USED_REFRESH + 8):
        answer = refresh(served.url, link.client_id, current)
        assert answer.status_code == 200, answer.text
        used.append(current)
        current = answer.json()["refresh_token"]
    catalog = catalog_of(served)
    try:
        rows = catalog.all("SELECT used_at FROM oauth_refresh WHERE client_id = ?", (link.client_id,))
    finally:
        catalog.close()
    assert len(rows) == KEPT_USED_REFRESH + 1  # the newest used ones, and the one in use
    assert refresh(served.url, link.client_id, used[-1]).status_code == 400  # replayed: refused …
    assert refresh(served.url, link.client_id, current).status_code == 400  # … and the connection ended


# -- consents waiting for the operator: a share per address -------------------------------------


def test_one_address_holds_at_most_its_share_of_the_pending_consents(home):
    """``MAX_PENDING`` requests may wait for the operator; one address fills at most
    ``MAX_PENDING_PER_ADDRESS`` of them (429, ``Retry-After``: when its first expires), so a
    stranger cannot keep every other host from asking. A decided one frees a place; so does
    time. On the catalog under test."""
    from tests.catalogs import settings_for

    catalog = open_catalog(settings_for(home))
    clock = MovableClock()
    book = ConnectionBook(catalog, TokenBook(catalog), clock)
    try:

        def ask(address: str) -> str:
            params = {"redirect_uri": CALLBACK, "code_challenge": pkce()[1], "state": "s", "resource": "r"}
            return book.ask("https://host.example/client.json", "Host", params, address=address)

        mine = [ask("203.0.113.7") for _ in range(MAX_PENDING_PER_ADDRESS - 1)]
        clock.advance(seconds=60)
        mine.append(ask("203.0.113.7"))
        with pytest.raises(TooManyRequests) as refused:
            ask("203.0.113.7")
        assert str(MAX_PENDING_PER_ADDRESS) in refused.value.message and "this address" in refused.value.message
        assert refused.value.retry_after == CONSENT_S - 60  # the first of them expires then
        ask("198.51.100.2")  # another address has its own share
        book.deny(mine[-1], by="operator")
        ask("203.0.113.7")  # a decided one frees its place
        with pytest.raises(TooManyRequests):
            ask("203.0.113.7")
        clock.advance(seconds=CONSENT_S - 59)  # the first 19 expired
        ask("203.0.113.7")
    finally:
        catalog.close()


def test_a_stranger_past_its_share_of_pending_consents_is_told_so_on_esfis_page(served):
    """Over HTTP: the request past the address's share is shown why on esfis's own page (an
    unconsented client: never sent to its redirect URI), and asks nothing of the operator."""
    client_id = register(served.url).json()["client_id"]
    catalog = catalog_of(served)
    try:
        pending = "SELECT address FROM oauth_requests WHERE status = 'pending'"
        already = len(catalog.all(pending))  # the module's other tests, from this address too
        waiting = [authorize(served.url, client_id, pkce()[1]) for _ in range(MAX_PENDING_PER_ADDRESS - already)]
        assert all(r.status_code == 302 and "/oauth/connect/" in r.headers["location"] for r in waiting)
        refused = authorize(served.url, client_id, pkce()[1])
        assert refused.status_code == 400 and "location" not in refused.headers
        assert "temporarily_unavailable" in refused.text and "from this address wait" in refused.text
        assert [r["address"] for r in catalog.all(pending)] == ["127.0.0.1"] * MAX_PENDING_PER_ADDRESS
    finally:
        with catalog.transaction() as tx:  # leave the address its share for any test after
            tx.execute("DELETE FROM oauth_requests WHERE status = 'pending'")
        catalog.close()
