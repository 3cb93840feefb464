"""The targets of the peers benchmark (``benchmarks/test_peers.py``, issue 58), kept beside
``benchmarks/targets.py``'s book, which takes them in (one ``TARGETS`` for the report)."""

from __future__ import annotations

from benchmarks.target import Target

PEER_TARGETS: dict[str, Target] = {
    "peers.http_vs_fastest": Target(
        "esfis recall over HTTP p50, embedding included, against the fastest peer",
        "<=",
        1.0,
        "ms",
        relative_to="the fastest peer's in-process search p50 plus the query embedding's p50, same class",
        source="issue 58",
        full_only=True,
        why="a user who picks a peer still embeds the query: esfis over HTTP should cost no more than the "
        "fastest peer's search in process plus that embedding, while keeping its gate, log and barrier.",
    ),
    "peers.http_vs_networked": Target(
        "esfis recall over HTTP p50, embedding included, against the fastest complete networked peer",
        "<=",
        1.0,
        "ms",
        relative_to="the fastest networked peer's p50 whose answers were complete and exact (Chroma's server "
        "over HTTP, pgvector over its socket), plus the query embedding's p50, same class",
        source="issue 69",
        full_only=True,
        why="an agent asking esfis over HTTP should pay about what it would pay a vector server over a "
        "network plus its own embedding of the query, with the gate, policies, validity, fusion, one fact "
        "once and the delivery log kept.",
    ),
    "peers.esfis_other_spaces": Target(
        "esfis rows from another space, each arm and class",
        "==",
        0,
        source="issue 58",
        why="the isolation promise, on the peers' world, in process and over HTTP.",
    ),
    "peers.esfis_short": Target(
        "esfis answers short of 10 (fewer rows than the space could give)",
        "==",
        0,
        source="issue 58",
        why="scoping first never costs answers: a space holding k rows returns k.",
    ),
    "peers.esfis_recall": Target(
        "esfis recall@10 on the peers' world (exact partitions)",
        ">=",
        1.0,
        source="issue 58",
        why="partitions below the IVF threshold are scanned exactly: nothing to miss.",
    ),
}
