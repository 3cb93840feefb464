"""A backup's manifest (``manifest.json``), keyed: an HMAC-SHA256 over its canonical JSON, with
a key kept outside the backup. The manifest holds the sha256 of the catalog and of every
partition, so whoever could write the backup folder could otherwise change what a restore loads
(a token made operator in the catalog, say) and write the digests again; without the key, no
MAC they write verifies.

**The key** is 32 random bytes, in hex: the file ``--key-file`` names, else
``ESFIS_BACKUP_KEY``, else the home's ``backup.key`` (0600), made by its first backup. It is
never copied into a backup. A restore goes into another home, so it is given the key the same
ways (``--forgets-from HOME`` also lends that home's ``backup.key``). The manifest names its key
by an id (a digest of it, which tells nothing of the key), so a restore given another key says
so. An operator who has no key restores with ``--no-key``, taking the folder on trust: the
digests still catch damage, not changes made on purpose.

A manifest of format 1 (before backups were keyed) carries no MAC: it restores with ``--no-key``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.bulk.backup_folder import CATALOG, DUMP, INCOMPLETE, MANIFEST
from server.catalog.shared import SCHEMA_VERSION
from server.errors import BackupDamaged, BackupNotTrusted, InvalidInput
from server.spaces import PERSONAL_KEY, validate_space_name

FORMAT = 2  # keyed: "key_id" and "mac"
FORMATS = (1, 2)
KEY_FILE = "backup.key"
_HEX_KEY = re.compile(r"[0-9a-f]{64}")
_KEY_ID = re.compile(r"[0-9a-f]{16}")  # as BackupKey.id writes it: shown in messages, so never anything else
_HOW = "--key-file FILE or ESFIS_BACKUP_KEY; the home that took it keeps it in backup.key"


@dataclass(frozen=True)
class BackupKey:
    secret: bytes = field(repr=False)
    origin: str  # where it was found, for messages: a file's path or ESFIS_BACKUP_KEY

    @property
    def id(self) -> str:
        return hashlib.sha256(b"esfis backup key id\x00" + self.secret).hexdigest()[:16]

    def mac(self, manifest: dict[str, Any]) -> str:
        return hmac.new(self.secret, _canonical(manifest), hashlib.sha256).hexdigest()


def _canonical(manifest: dict[str, Any]) -> bytes:
    """Every field but the MAC, in one spelling: what is written is what is checked."""
    body = {k: v for k, v in manifest.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


# -- where the key comes from ------------------------------------------------------------------


def parse_key(text: str, *, origin: str) -> BackupKey:
    value = text.strip().lower()
    if not _HEX_KEY.fullmatch(value):
        raise InvalidInput(
            f"the backup key in {origin} must be 64 hex characters (32 random bytes: openssl rand -hex 32)",
            field="key_file",
        )
    return BackupKey(bytes.fromhex(value), origin)


def key_from_file(path: str | os.PathLike[str]) -> BackupKey:
    try:
        text = Path(path).read_text(errors="replace")[:200]
    except OSError as exc:
        raise InvalidInput(f"cannot read the backup key {path}: {exc.strerror}", field="key_file") from None
    return parse_key(text, origin=str(path))


def home_key(home: Path) -> BackupKey:
    """The home's own key (``backup.key``, 0600), made on first use: written whole under a
    temporary name and linked, so a racing backup either wins the link or reads the winner's."""
    path = Path(home) / KEY_FILE
    if not path.exists():
        temporary = path.with_name(f".{KEY_FILE}.{secrets.token_hex(6)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    return key_from_file(path)


def key_for_backup(*, key_file: str | os.PathLike[str] | None, given: str | None) -> BackupKey | None:
    """``--key-file``, else ``ESFIS_BACKUP_KEY``, read before the backup starts (a bad one is
    said first); None: the home's ``backup.key``, which the backup makes if it must."""
    if key_file is not None:
        return key_from_file(key_file)
    if given is not None:
        return parse_key(given, origin="ESFIS_BACKUP_KEY")
    return None


def key_for_restore(
    *, key_file: str | os.PathLike[str] | None, given: str | None, source_home: Path | None
) -> BackupKey | None:
    """``--key-file``, else ``ESFIS_BACKUP_KEY``, else the ``backup.key`` of the home the
    backup came from (``--forgets-from`` names it) when there is one; else None."""
    if key_file is not None:
        return key_from_file(key_file)
    if given is not None:
        return parse_key(given, origin="ESFIS_BACKUP_KEY")
    if source_home is not None and (source_home / KEY_FILE).is_file():
        return key_from_file(source_home / KEY_FILE)
    return None


# -- sealing and reading ---------------------------------------------------------------------


def sealed(manifest: dict[str, Any], key: BackupKey) -> dict[str, Any]:
    keyed = {**manifest, "key_id": key.id}
    return {**keyed, "mac": key.mac(keyed)}


def read_manifest(source: Path, *, key: BackupKey | None, no_key: bool = False) -> dict[str, Any]:
    """A complete backup's manifest, its MAC verified with ``key`` (unless ``no_key``: the
    operator takes the folder on trust), its shape checked. Refuses a folder that holds no
    complete backup, one newer than this esfis, and one that does not verify."""
    source = Path(source)
    if (source / INCOMPLETE).exists() or not (source / MANIFEST).is_file():
        raise InvalidInput(
            f"{source} holds no complete backup (no manifest: a backup killed half way, or not a backup)", field="path"
        )
    try:
        manifest = json.loads((source / MANIFEST).read_bytes())
    except (OSError, ValueError) as exc:
        raise BackupDamaged(
            f"the manifest of the backup in {source} cannot be read ({str(exc)[:200]}): damaged", field="path"
        ) from None
    if not isinstance(manifest, dict):
        raise BackupDamaged(f"the manifest of the backup in {source} is not a JSON object: damaged", field="path")
    schema = manifest.get("schema")
    if manifest.get("format") not in FORMATS or not isinstance(schema, int) or schema > SCHEMA_VERSION:
        raise InvalidInput(
            f"the backup in {source} is of format {manifest.get('format')!r}, catalog schema "
            f"{schema!r}: not one this esfis reads (a newer esfis made it: upgrade)",
            field="path",
        )
    if key is not None and no_key:
        raise InvalidInput("--no-key restores without checking a key: give a key or --no-key, not both", field="no_key")
    if not no_key:
        _verify(source, manifest, key)
    _check_shape(source, manifest)
    return manifest


def _verify(source: Path, manifest: dict[str, Any], key: BackupKey | None) -> None:
    mac, key_id = manifest.get("mac"), manifest.get("key_id")
    if not isinstance(mac, str) or not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        raise BackupNotTrusted(
            f"the manifest of the backup in {source} carries no MAC (a backup made before esfis keyed "
            "them, or one whose MAC was removed): restore it with --no-key only if you trust the folder",
            field="path",
        )
    if key is None:
        raise InvalidInput(
            f"the backup in {source} is keyed (key {key_id}): give its key ({_HOW}), "
            "or --no-key to take the folder on trust",
            field="key_file",
        )
    if key_id != key.id:
        raise BackupNotTrusted(
            f"the backup in {source} was keyed with key {key_id}, not with the key given ({key.id}, "
            f"from {key.origin}): give its key ({_HOW})",
            field="key_file",
        )
    if not hmac.compare_digest(mac, key.mac(manifest)):
        raise BackupNotTrusted(
            f"the manifest of the backup in {source} does not verify with its key ({key.id}): it was "
            "changed after the backup was taken; nothing was restored",
            field="path",
        )


def _check_shape(source: Path, manifest: dict[str, Any]) -> None:
    """The fields a restore reads, of the types it reads them as (a manifest taken on trust may
    be anything): every later step can then name what is damaged."""
    catalog, partitions = manifest.get("catalog"), manifest.get("partitions")
    fine = (
        isinstance(manifest.get("taken_at_micros"), int)
        and isinstance(manifest.get("model"), str)
        and isinstance(manifest.get("dimension"), int)
        and isinstance(manifest.get("forget_after_load", {}), dict)
        and isinstance(catalog, dict)
        and isinstance(catalog.get("sha256"), str)
        and (catalog.get("kind", "sqlite"), catalog.get("file", CATALOG)) in (("sqlite", CATALOG), ("pg_dump", DUMP))
        and isinstance(partitions, list)
        and all(
            isinstance(p, dict)
            and _partition_key(p.get("key"))
            and isinstance(p.get("rows"), int)
            and isinstance(p.get("sha256"), str)
            for p in partitions
        )
    )
    if not fine:
        raise BackupDamaged(f"the manifest of the backup in {source} is not whole: damaged", field="path")


def _partition_key(key: object) -> bool:
    """A key as ``server.spaces.partition_key`` makes it (errors name it: never anything else)."""
    if key == PERSONAL_KEY:
        return True
    if not isinstance(key, str) or not key.startswith("space:"):
        return False
    try:
        validate_space_name(key.removeprefix("space:"))
    except InvalidInput:
        return False
    return True
