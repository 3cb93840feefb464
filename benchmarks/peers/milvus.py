"""Milvus Lite (``pymilvus.MilvusClient`` on a local file): one collection whose ``space`` field
is the partition key, searched with ``filter='space == "…"'``, as Milvus's multi-tenancy guide
advises for many tenants.

Its defaults: ``AUTOINDEX`` with the cosine metric, the partition key's default number of
partitions, the client's default consistency. After the bulk insert the collection is flushed
(without it Milvus Lite answered every search from its unsealed segment, about 700 ms a query on
20,000 rows here).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchmarks.peers import Peer, PeerUnavailable, folder_bytes, remove, space_names
from benchmarks.synthetic import Store

BATCH = 5_000


class MilvusLite(Peer):
    system = "Milvus Lite"
    arms = ("milvus-lite-partition-key",)

    def __init__(self, root: Path) -> None:
        try:
            import importlib.metadata

            from pymilvus import MilvusClient

            self.version = importlib.metadata.version("milvus-lite")
        except ImportError as e:
            raise PeerUnavailable(f"pymilvus or milvus-lite is not installed (pip install -e '.[peers]'): {e}") from e
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        try:
            self.client = MilvusClient(str(root / "milvus.db"))
        except Exception as e:  # its server process failed to start
            raise PeerUnavailable(f"Milvus Lite did not start here: {e}") from e
        self.partitions = 0

    def load(self, store: Store) -> None:
        vectors, names = store.vectors, space_names(store)
        from pymilvus import DataType

        schema = self.client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("space", DataType.VARCHAR, max_length=256, is_partition_key=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=vectors.shape[1])
        index = self.client.prepare_index_params()
        index.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
        self.client.create_collection("memories", schema=schema, index_params=index)
        for at in range(0, len(vectors), BATCH):
            rows = [
                {"id": i, "space": names[i], "vector": vectors[i]} for i in range(at, min(at + BATCH, len(vectors)))
            ]
            self.client.insert("memories", rows)
        self.client.flush("memories")
        self.partitions = int(self.client.describe_collection("memories").get("num_partitions") or 0)

    def prepare(self, arm: str) -> str:
        index = self.client.describe_index("memories", "vector")
        return (
            f"Milvus Lite {self.version}, one collection, space as the partition key ({self.partitions} partitions), "
            f"filter on space, {index.get('index_type')} {index.get('metric_type')} (defaults), flushed after the load"
        )

    def search(self, arm: str, spaces: list[str], query: np.ndarray, k: int) -> list[int]:
        names = ", ".join(json.dumps(s) for s in spaces)
        where = f"space == {json.dumps(spaces[0])}" if len(spaces) == 1 else f"space in [{names}]"
        found = self.client.search("memories", [query], limit=k, filter=where, output_fields=[])
        return [int(hit["id"]) for hit in found[0]]

    def disk_bytes(self) -> int:
        return folder_bytes(self.root)

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            remove(self.root)
