"""What both catalog backends share (``server.catalog`` is the contract): the schema's
version, the dialect fragments, and how a catalog names itself in an error."""

from __future__ import annotations

import re
from dataclasses import dataclass

from server.errors import StoreUnavailable

SCHEMA_VERSION = 16  # 2: labels beside every memory (from_spaces), runs and their trail, grants; 3: forgetting;
#                    4: the store's live total (totals), kept by triggers; 5: partition versions
#                    (several machines: server.catalog.partition_sync); 6: run tokens and standing runs, ended
#                    runs, who took a step, signed-out web sessions; 7: held writes (approvals) and who
#                    answers a token's approvals; 8: OAuth connections (clients, consent, refresh tokens), rate counters;
#                    9: the access generation, moved by every write to ACCESS_TABLES (server.catalog.access);
#                    10: indexes for the memories page (a partition by time written, a memory's deliveries);
#                    11: a memory's data (server.memories.data); 12: run tokens by their opener (a cap);
#                    13: the address that asked for a consent, the rate counters' row count (caps);
#                    14: the fields of memories' data, indexed for recall's filter (server.memories.data_index);
#                    15: a recall's delivery items land unindexed by memory first (server.memories.delivery_moves);
#                    16: each row of the data's index carries its memory's time (a filter with no query
#                    reads the newest matches from the index)

# Version 16: each row of the data's index given its memory's time, once.
FIELDS_DATED = (
    "UPDATE memory_fields SET created_at = "
    "(SELECT m.created_at FROM memories m WHERE m.id = memory_fields.memory_id) WHERE created_at IS NULL"
)

# The tables whose rows decide what a caller may do, kept between requests under the access
# generation (server.catalog.access): a trigger on each moves it, in the writing transaction.
ACCESS_TABLES = ("spaces", "folders", "policies", "tokens")

# Version 6's columns, added to a catalog made before it: (table, column, type). Types are
# written for both backends ({T}: the text type).
V6_COLUMNS = (
    ("tokens", "runs_only", "INTEGER NOT NULL DEFAULT 0"),  # a harness's credential: opens runs, nothing else
    ("tokens", "run_id", "{T}"),  # a run token's one run
    ("tokens", "parent", "{T}"),  # the token that opened this run token
    ("tokens", "parent_run", "{T}"),  # the opener's standing run, whose labels this run token's run shares
    ("tokens", "expires_at", "BIGINT"),
    ("tokens", "standing", "INTEGER NOT NULL DEFAULT 0"),  # which standing run of this token is current
    ("runs", "kind", "{T} NOT NULL DEFAULT 'session'"),  # standing | token | session | once
    ("runs", "token_id", "{T}"),
    ("runs", "parent", "{T}"),  # a run whose carried labels this one shares (the opener's standing run)
    ("runs", "everywhere", "INTEGER NOT NULL DEFAULT 0"),  # sealed with no bound (an unscoped token)
    ("runs", "ended_at", "BIGINT"),
    ("runs", "ended_by", "{T}"),
    ("runs", "expires_at", "BIGINT"),
    ("run_steps", "actor", "{T}"),  # who took a step that is not the run's (an operator ending it)
)

# Version 7's columns, added to a catalog made before it.
V7_COLUMNS = (("tokens", "approvals", "{T} NOT NULL DEFAULT 'queue'"),)  # queue | host (server.barrier.approvals)

# Version 8's columns: an OAuth connection's token names its client and the resource it is bound to.
V8_COLUMNS = (
    ("tokens", "client", "{T}"),  # the OAuth client's name, as the consent page showed it
    ("tokens", "client_id", "{T}"),
    ("tokens", "resource", "{T}"),  # RFC 8707: the one resource this token is good for
)

# Version 11's columns: a memory's data, compact JSON, NULL for none (server.memories.data).
V11_COLUMNS = (("memories", "data", "{T}"), ("approvals", "data", "{T}"))  # a held write's data too

# Version 13's columns: the address that asked for a consent (a share of MAX_PENDING per address).
V13_COLUMNS = (("oauth_requests", "address", "{T}"),)

# Version 8's tables (server.spaces.connections): OAuth clients, the requests that wait for the
# operator's consent (and, once approved, their one-minute code), and refresh tokens. Every
# secret is kept as its sha256 only.
OAUTH_TABLES = """
CREATE TABLE IF NOT EXISTS oauth_clients (
    client_id {T} PRIMARY KEY,
    kind {T} NOT NULL,              -- registered (RFC 7591) | document (a Client ID Metadata Document)
    info {T} NOT NULL,              -- JSON: the client's metadata (a client secret as its sha256)
    created_at {I} NOT NULL,
    fetched_at {I}                  -- a document: when it was read
);
CREATE TABLE IF NOT EXISTS oauth_requests (
    id {T} PRIMARY KEY,             -- the consent page's address: 128 random bits
    client_id {T} NOT NULL,
    client_name {T} NOT NULL,
    params {T} NOT NULL,            -- JSON: redirect_uri, code_challenge, state, scopes, resource
    status {T} NOT NULL,            -- pending | approved | denied | exchanged
    created_at {I} NOT NULL,
    expires_at {I} NOT NULL,        -- the consent's, then the code's
    code_hash {T} UNIQUE,
    ai {T},
    space {T},                      -- NULL: everywhere
    decided_by {T},
    token_id {T},                   -- the connection's token, once the code is exchanged
    address {T}                     -- who asked (version 13): a share of the pending ones each
);
CREATE INDEX IF NOT EXISTS oauth_requests_by_expiry ON oauth_requests (expires_at);
CREATE TABLE IF NOT EXISTS oauth_refresh (
    hash {T} PRIMARY KEY,
    token_id {T} NOT NULL,
    client_id {T} NOT NULL,
    created_at {I} NOT NULL,
    expires_at {I} NOT NULL,
    used_at {I}                     -- rotated: shown again, it ends the connection
);
CREATE INDEX IF NOT EXISTS oauth_refresh_by_token ON oauth_refresh (token_id);
CREATE TABLE IF NOT EXISTS rate_counters (
    key {T} PRIMARY KEY,            -- a limit and whom it counts (server.spaces.rates): no secret
    count {I} NOT NULL,
    expires_at {I} NOT NULL         -- the window's end, in microseconds
);
"""

# Version 7's table, for both backends ({T}: the text type, {I}: the 64-bit integer type). One
# write a person must approve, held for the operator (server.barrier.approvals); its text is
# cleared the moment it is decided, expires or is withdrawn.
APPROVALS_TABLE = """
CREATE TABLE IF NOT EXISTS approvals (
    id {T} PRIMARY KEY,
    status {T} NOT NULL,            -- pending | approved | declined | expired | void | withdrawn
    action {T} NOT NULL,            -- remember | replace | forget
    rule {T} NOT NULL,              -- data_barrier | untrusted_source
    ai {T} NOT NULL,
    transport {T} NOT NULL,
    run_id {T} NOT NULL,
    run_kind {T} NOT NULL,
    run_name {T} NOT NULL,
    run_parent {T},
    token_id {T},
    scope {T},                      -- the token's subtree
    space {T},                      -- where the caller stood
    target {T},                     -- where it writes (NULL: personal)
    carried {T} NOT NULL,           -- JSON marks the run carried when it was held
    blocked {T} NOT NULL,           -- JSON marks that need the person
    origins {T} NOT NULL,           -- JSON origin marks the write gave
    text {T},                       -- NULL once decided, and for a forget (the memory holds it)
    data {T},                       -- the write's data as stored (server.memories.data); NULL as text is
    memory_id {T},                  -- replace: the old memory; forget: the memory
    valid_until {I},
    created_at {I} NOT NULL,
    expires_at {I} NOT NULL,
    decided_at {I},
    decided_by {T},
    reason {T},
    result {T}                      -- the memory written
);
CREATE UNIQUE INDEX IF NOT EXISTS approvals_one_pending_per_run ON approvals (run_id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS approvals_by_created ON approvals (created_at);
"""


@dataclass(frozen=True)
class Dialect:
    """The fragments of SQL the backends write differently. Each takes one ``?``.

    ``values``: a FROM item giving one column ``value`` (text) for each element of a JSON array
    of scalars. ``rows`` with ``item(i, type)``: a FROM item giving one ``value`` per element of
    a JSON array of arrays, and the ``i``-th field of one, as ``type``. ``find``: the function
    giving where a string lies in another (0: nowhere)."""

    values: str
    rows: str
    item_template: str  # formatted with i and type
    find: str

    def item(self, i: int, type_: str = "TEXT") -> str:
        return self.item_template.format(i=i, type=type_)


def refuse_newer(version: int) -> None:
    """A catalog whose schema is newer than this esfis is never opened (nor marked older)."""
    if version > SCHEMA_VERSION:
        raise StoreUnavailable(
            f"the catalog has schema version {version}, newer than this esfis's ({SCHEMA_VERSION}): upgrade esfis"
        )


def redacted(url: str) -> str:
    """A connection URL fit for an error message: without its user and password."""
    return re.sub(r"//[^@/]*@", "//", url)
