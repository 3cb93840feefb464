"""Settings, read from the environment once, at the edge."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from server.errors import InvalidInput

TRAIL_DAYS = 90  # the default: runs that are over are pruned after this many days
BATCH_WINDOW_MS = 2.0  # the default: the most a server's query waits for others to embed with
APPROVAL_HOURS = 24.0  # the default: a call held for the operator expires after this long
APPROVAL_WAIT_S = 300.0  # the default: how long an MCP host's prompt may take before it counts as declined
OAUTH_TOKEN_S = 3600  # the default: an OAuth connection's access token lives this long
DISK_RESERVE_MB = 64  # the default: free room under home that writes leave to reads' bookkeeping

# What the torch runtime's libraries read from the environment when they are imported: the model
# is a local folder, never the hub; no progress bars; no tokenizer threads to fork a server into.
TORCH_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass(frozen=True)
class Settings:
    home: Path  # ESFIS_HOME, default ~/.esfis
    model: str | None  # ESFIS_MODEL: a local sentence-transformers folder; None: the packaged one
    embedder: str = "onnx"  # ESFIS_EMBEDDER: the model's runtime, onnx or torch
    device: str = "cpu"  # ESFIS_DEVICE: cpu, cuda or cuda:N
    query_precision: str = "int8"  # ESFIS_QUERY_PRECISION: the ONNX graph queries run on, int8 or fp32
    cache: Path | None = None  # ESFIS_CACHE, else $XDG_CACHE_HOME/esfis, else ~/.cache/esfis: the ONNX export
    failpoints: tuple[str, ...] = ()  # ESFIS_FAILPOINT: steps where tests kill the process (indexing.failpoints)
    catalog: str | None = None  # ESFIS_CATALOG: a postgresql:// URL; None: SQLite in home (server.catalog)
    vectors: str | None = None  # ESFIS_VECTORS: s3://bucket/prefix for the partitions; None: home/vectors
    trail_days: int = TRAIL_DAYS  # ESFIS_TRAIL_DAYS: runs that are over are pruned after this many days
    batch_window_ms: float = (
        BATCH_WINDOW_MS  # ESFIS_BATCH_WINDOW_MS: the most a server's query waits for company; 0: off
    )
    approval_hours: float = APPROVAL_HOURS  # ESFIS_APPROVAL_HOURS: a held call's life
    approval_wait_s: float = APPROVAL_WAIT_S  # ESFIS_APPROVAL_WAIT_S: an MCP host's prompt's time to answer
    # ESFIS_PUBLIC_URL: the server's public origin behind a proxy (https://esfis.example.com),
    # where the settings pages are announced and their cookies bound (server.web.site); None: the
    # address it listens on.
    public_url: str | None = None
    # ESFIS_OAUTH: on (the default) or off: whether esfis is an OAuth 2.1 authorization server for
    # /mcp (server.http.oauth); off, only static bearer tokens are taken.
    oauth: bool = True
    oauth_token_s: int = OAUTH_TOKEN_S  # ESFIS_OAUTH_TOKEN_S: an OAuth access token's life, 60..86400
    # ESFIS_BACKUP_KEY: 64 hex characters that key backups' manifests (server.bulk.backup_manifest);
    # None: the home's backup.key. Never shown.
    backup_key: str | None = field(default=None, repr=False)
    # ESFIS_DISK_RESERVE_MB: writes stop while the volume under home has less free than this (at
    # most 15% of the volume), so reads keep room for their bookkeeping (server.faults).
    disk_reserve_mb: int = DISK_RESERVE_MB

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        home = Path(env.get("ESFIS_HOME") or Path.home() / ".esfis").expanduser()
        cache = env.get("ESFIS_CACHE") or Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "esfis"
        return cls(
            home=home,
            model=env.get("ESFIS_MODEL") or None,
            embedder=env.get("ESFIS_EMBEDDER") or "onnx",
            device=env.get("ESFIS_DEVICE") or "cpu",
            query_precision=_choice(env, "ESFIS_QUERY_PRECISION", ("int8", "fp32")),
            cache=Path(cache).expanduser(),
            failpoints=tuple(f for f in (env.get("ESFIS_FAILPOINT") or "").split(",") if f.strip()),
            catalog=env.get("ESFIS_CATALOG") or None,
            vectors=env.get("ESFIS_VECTORS") or None,
            trail_days=_days(env.get("ESFIS_TRAIL_DAYS")),
            batch_window_ms=_window(env.get("ESFIS_BATCH_WINDOW_MS")),
            approval_hours=_number(env, "ESFIS_APPROVAL_HOURS", APPROVAL_HOURS, low=0.001, high=720, unit="hours"),
            approval_wait_s=_number(env, "ESFIS_APPROVAL_WAIT_S", APPROVAL_WAIT_S, low=1, high=3600, unit="seconds"),
            public_url=_origin(env.get("ESFIS_PUBLIC_URL")),
            oauth=_switch(env, "ESFIS_OAUTH"),
            oauth_token_s=int(_number(env, "ESFIS_OAUTH_TOKEN_S", OAUTH_TOKEN_S, low=60, high=86_400, unit="seconds")),
            backup_key=env.get("ESFIS_BACKUP_KEY") or None,
            disk_reserve_mb=int(
                _number(env, "ESFIS_DISK_RESERVE_MB", DISK_RESERVE_MB, low=0, high=1 << 20, unit="MiB")
            ),
        )

    @property
    def catalog_path(self) -> Path:
        """The SQLite catalog's file (unused when ``catalog`` names a PostgreSQL one)."""
        return self.home / "esfis.db"

    @property
    def vectors_path(self) -> Path:
        """This machine's folder of the vector store: the whole store by default; with
        ``vectors`` on S3, its locks and images only (``indexing.partitions.location``)."""
        return self.home / "vectors"


def torch_defaults() -> None:
    """Set ``TORCH_DEFAULTS`` where the environment chose nothing else: the edge's part of loading
    the model, handed to ``load_embedder`` as ``before_torch`` (``indexing/`` reads and writes no
    environment), which calls it just before torch is imported, if it ever is."""
    for name, value in TORCH_DEFAULTS.items():
        os.environ.setdefault(name, value)


def _days(value: str | None) -> int:
    if not value:
        return TRAIL_DAYS
    if not value.strip().isdigit() or not 1 <= int(value) <= 36_500:
        raise InvalidInput(
            f"ESFIS_TRAIL_DAYS must be a whole number of days from 1 to 36500, not {value[:40]!r}",
            field="ESFIS_TRAIL_DAYS",
        )
    return int(value)


def _window(value: str | None) -> float:
    if not value:
        return BATCH_WINDOW_MS
    try:
        window = float(value)
    except ValueError:
        window = -1.0
    if not 0.0 <= window <= 100.0:  # also refuses nan
        raise InvalidInput(
            f"ESFIS_BATCH_WINDOW_MS must be a number of milliseconds from 0 to 100, not {value[:40]!r}",
            field="ESFIS_BATCH_WINDOW_MS",
        )
    return window


def _number(env: Mapping[str, str], name: str, default: float, *, low: float, high: float, unit: str) -> float:
    value = env.get(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not low <= number <= high:  # also refuses nan
        raise InvalidInput(
            f"{name} must be a number of {unit} from {low:g} to {high:g}, not {value[:40]!r}", field=name
        )
    return number


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (the first when unset)."""
    value = (env.get(name) or choices[0]).strip().lower()
    if value not in choices:
        raise InvalidInput(f"{name} must be {' or '.join(choices)}, not {value[:40]!r}", field=name)
    return value


def _switch(env: Mapping[str, str], name: str) -> bool:
    value = (env.get(name) or "on").strip().lower()
    if value not in ("on", "off", "1", "0", "true", "false"):
        raise InvalidInput(f"{name} must be on or off, not {value[:40]!r}", field=name)
    return value in ("on", "1", "true")


def _origin(value: str | None) -> str | None:
    """An origin, ``scheme://host[:port]`` (a trailing ``/`` is dropped): esfis is served at the
    root of its public address, so a path, a query or a user name is refused."""
    if not value or not value.strip():
        return None
    text = value.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        parts = urlsplit("")
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or "@" in parts.netloc
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or "#" in text
        or "?" in text
    ):
        raise InvalidInput(
            "ESFIS_PUBLIC_URL must be the server's public origin, like https://esfis.example.com "
            f"(http or https, no path), not {text[:80]!r}",
            field="ESFIS_PUBLIC_URL",
        )
    return f"{parts.scheme}://{parts.netloc.lower()}"
