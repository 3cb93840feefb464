"""OAuth clients: the programs that ask for a connection (``server.spaces.connections``), as the
catalog keeps them (``oauth_clients``).

Two kinds: *registered* (RFC 7591, a client secret only as its sha256) and *document* (a Client
ID Metadata Document read from its URL, read again when it is stale). Strangers register and
name documents, so each kind is bounded (``MAX_CLIENTS``: a flood of registrations leaves
documents room, and the reverse), and a client that never came to a connection or a request is
pruned a day after it was first stored (``UNUSED_CLIENT_S``). Whether the operator has said yes
to a client (``consented``) decides whether an ``/authorize`` error may be sent to its redirect
URI: a registration alone vouches for nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from server.catalog import Catalog, Tx
from server.clock import Clock, from_micros, system_clock, to_micros
from server.errors import TooManyRequests

MAX_CLIENTS = 10_000  # clients of each kind (registered, document), at most
UNUSED_CLIENT_S = 86_400  # a client with no connection and no request is pruned after a day
MAX_CLIENT_ID = 2048  # a client id (a document's URL) longer than this names no client


@dataclass(frozen=True)
class StoredClient:
    client_id: str
    kind: str  # registered | document
    info: dict[str, Any]  # as the client registered it (a secret as its sha256)
    fetched_at: datetime | None


class ClientBook:
    def __init__(self, catalog: Catalog, clock: Clock = system_clock) -> None:
        self.catalog = catalog
        self.clock = clock

    def save(self, client_id: str, kind: str, info: dict[str, Any]) -> None:
        """Store a client (a document read again updates its row); ``TooManyRequests`` when a new
        one would pass ``MAX_CLIENTS`` of its kind."""
        now = to_micros(self.clock())
        with self.catalog.transaction() as tx:
            known = tx.one("SELECT kind FROM oauth_clients WHERE client_id = ?", (client_id,))
            if known is None:  # a document read again updates its row: only a new client counts
                count = tx.one("SELECT count(*) AS n FROM oauth_clients WHERE kind = ?", (kind,))
                if count is not None and count["n"] >= MAX_CLIENTS:
                    raise TooManyRequests(f"this server holds as many {kind} clients as it takes: try later")
            tx.execute(
                "INSERT INTO oauth_clients (client_id, kind, info, created_at, fetched_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (client_id) DO UPDATE SET info = excluded.info, fetched_at = excluded.fetched_at",
                (client_id, kind, json.dumps(info), now, now if kind == "document" else None),
            )

    def get(self, client_id: str) -> StoredClient | None:
        row = self.catalog.one("SELECT * FROM oauth_clients WHERE client_id = ?", (client_id,))
        if row is None:
            return None
        return StoredClient(row["client_id"], row["kind"], json.loads(row["info"]), from_micros(row["fetched_at"]))

    def consented(self, client_id: str) -> bool:
        """Whether the operator has said yes to this client: a request of it approved, or a
        connection made for it (revoked since or not). Only such a client's redirect URI is sent
        an ``/authorize`` error (RFC 9700 §4.11.2): a registration alone vouches for nothing."""
        if not isinstance(client_id, str) or not client_id or len(client_id) > MAX_CLIENT_ID:
            return False
        row = self.catalog.one(
            "SELECT 1 AS one FROM oauth_requests WHERE client_id = ? AND status IN ('approved', 'exchanged') "
            "UNION ALL SELECT 1 AS one FROM tokens WHERE client_id = ? LIMIT 1",
            (client_id, client_id),
        )
        return row is not None


def prune_unused(tx: Tx, now: int) -> None:
    """Clients of either kind with no connection and no request, ``UNUSED_CLIENT_S`` after they
    were first stored (``now`` in micros; in the caller's transaction, after its requests are
    pruned, so a client whose requests just went goes with them)."""
    tx.execute(
        "DELETE FROM oauth_clients WHERE created_at <= ? AND client_id NOT IN "
        "(SELECT client_id FROM tokens WHERE client_id IS NOT NULL) AND client_id NOT IN "
        "(SELECT client_id FROM oauth_requests)",
        (now - UNUSED_CLIENT_S * 1_000_000,),
    )
