"""Chroma, embedded (``chromadb.PersistentClient``), the two ways its users keep tenants apart.

- ``chroma-per-space``: a collection per space, as Chroma's multi-tenancy guide suggests; a
  caller reading several spaces asks each of its collections and merges by distance.
- ``chroma-where``: one collection holding every space, each row's space in its metadata, the
  query narrowed by ``where={"space": …}``.

Both with Chroma's own HNSW defaults (cosine; ef_construction 100, ef_search 100, M 16 in 1.5):
nothing tuned down. Where its answers miss, ``…-ef400`` asks again with ef_search raised
through ``collection.modify``, the documented knob.
"""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np

from benchmarks.peers import Peer, PeerUnavailable, folder_bytes, remove, space_names
from benchmarks.synthetic import Store

EF_RAISED = 400


def _collection_name(space: str) -> str:
    # Chroma's names: 3–512 of [a-zA-Z0-9._-], starting and ending alphanumeric.
    return "s-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in space) + "-0"


class Chroma(Peer):
    system = "Chroma"
    arms = ("chroma-per-space", "chroma-where", "chroma-per-space-ef400", "chroma-where-ef400")
    remedies = {"chroma-per-space-ef400": "chroma-per-space", "chroma-where-ef400": "chroma-where"}

    def __init__(self, root: Path, *, where: bool = True) -> None:
        """``where=False`` loads the collections per space only (no ``chroma-where`` arms)."""
        try:
            import chromadb
        except ImportError as e:
            raise PeerUnavailable(f"chromadb is not installed (pip install -e '.[peers]'): {e}") from e
        self.version = chromadb.__version__
        self.root = root
        self.client = chromadb.PersistentClient(path=str(root))
        self.collections: dict[str, object] = {}
        self.whole = None
        self.with_where = where
        self.costs: dict[str, tuple[float, int]] = {}  # arm family → (load seconds, bytes on disk)

    def load(self, store: Store) -> None:
        vectors, names = store.vectors, space_names(store)
        import time

        batch = self.client.get_max_batch_size()
        ids = [str(i) for i in range(len(vectors))]
        started = time.perf_counter()
        names = np.array(names, dtype=object)
        order = np.argsort(names, kind="stable")
        bounds = np.flatnonzero(names[order][1:] != names[order][:-1]) + 1
        for rows in np.split(order, bounds):
            space = str(names[rows[0]])
            collection = self.client.create_collection(
                _collection_name(space), configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
            )
            for at in range(0, len(rows), batch):
                part = rows[at : at + batch]
                collection.add(ids=[ids[r] for r in part], embeddings=vectors[part])
            self.collections[space] = collection
        self.costs["chroma-per-space"] = (time.perf_counter() - started, self.disk_bytes())
        if not self.with_where:
            return
        started = time.perf_counter()
        self.whole = self.client.create_collection(
            "all-spaces", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
        for at in range(0, len(vectors), batch):
            self.whole.add(
                ids=ids[at : at + batch],
                embeddings=vectors[at : at + batch],
                metadatas=[{"space": s} for s in names[at : at + batch]],
            )
        whole = time.perf_counter() - started
        self.costs["chroma-where"] = (whole, self.disk_bytes() - self.costs["chroma-per-space"][1])

    def _set_ef(self, ef: int) -> None:
        for collection in [*self.collections.values(), *([self.whole] if self.whole is not None else [])]:
            collection.modify(configuration={"hnsw": {"ef_search": ef}})  # type: ignore[attr-defined]

    def prepare(self, arm: str) -> str:
        raised = arm.endswith(f"-ef{EF_RAISED}")
        self._set_ef(EF_RAISED if raised else 100)
        some = self.whole if self.whole is not None else next(iter(self.collections.values()))
        in_force = some.configuration_json["hnsw"]["ef_search"]  # type: ignore[attr-defined]
        ef = (
            f"ef_search raised to {in_force} (collection.modify)"
            if raised
            else f"defaults (ef_search {in_force}, M 16, ef_construction 100)"
        )
        if arm.startswith("chroma-per-space"):
            return f"Chroma {self.version} PersistentClient, a collection per space, HNSW cosine, {ef}"
        return f"Chroma {self.version} PersistentClient, one collection, where space, HNSW cosine, {ef}"

    def search(self, arm: str, spaces: list[str], query: np.ndarray, k: int) -> list[int]:
        if arm.startswith("chroma-where"):
            where = {"space": spaces[0]} if len(spaces) == 1 else {"space": {"$in": spaces}}
            found = self.whole.query(query_embeddings=[query], n_results=k, where=where, include=[])  # type: ignore[union-attr]
            return [int(i) for i in found["ids"][0]]
        merged: list[tuple[float, int]] = []
        for space in spaces:
            found = self.collections[space].query(query_embeddings=[query], n_results=k, include=["distances"])  # type: ignore[attr-defined]
            merged += zip(found["distances"][0], (int(i) for i in found["ids"][0]))
        return [row for _, row in heapq.nsmallest(k, merged)]

    def disk_bytes(self) -> int:
        return folder_bytes(self.root)

    def cost(self, arm: str, load_seconds: float, disk_bytes: int) -> tuple[float, int]:
        return self.costs["chroma-where" if arm.startswith("chroma-where") else "chroma-per-space"]

    def close(self) -> None:
        import contextlib

        with contextlib.suppress(Exception):
            self.client.clear_system_cache()
        remove(self.root)
