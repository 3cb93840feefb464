"""Settings, read from the environment once, at the edge."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    home: Path  # ESFIS_HOME, default ~/.esfis
    model: str | None  # ESFIS_MODEL: a local sentence-transformers folder; None: the packaged one

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        home = Path(env.get("ESFIS_HOME") or Path.home() / ".esfis").expanduser()
        return cls(home=home, model=env.get("ESFIS_MODEL") or None)

    @property
    def catalog_path(self) -> Path:
        return self.home / "esfis.db"

    @property
    def vectors_path(self) -> Path:
        return self.home / "vectors"
