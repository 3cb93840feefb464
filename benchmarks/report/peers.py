"""The sections on esfis against what users would pick instead: every system's figures on the
same synthetic world (``test_peers.py``), and evidence recall on LongMemEval_S side by side
(``test_peers_quality.py``)."""

from __future__ import annotations

from benchmarks.report.common import Checks, fmt, table

ESFIS_ARMS = ("esfis-search", "esfis-recall", "esfis-http")


def _classes(rows: list[dict]) -> list[str]:
    for r in rows:
        if r.get("classes"):
            return list(r["classes"])
    return []


def _mib(value: int | None) -> float | None:
    return None if value is None else value / 2**20


def section_peers(rows: list[dict], checks: Checks) -> list[str]:
    classes = _classes(rows)
    if not classes:
        return ["No arm of this run has figures.", ""]
    first = next(r for r in rows if r.get("classes"))
    out = [
        f"One world for every system: {fmt(first.get('store_size'))} clustered 384-d memories over "
        f"{fmt(first.get('spaces'))} spaces ({fmt(first.get('spaces', 12) - 12)} Zipf-sized, a probe space, a 1,000-row space and ten of 5 to 50 "
        "rows), no row expired; the same query vectors for every system, the exact cosine top 10 inside the "
        "caller's space as the truth. Peers run in this process and are given the query vector; `esfis-search` is "
        "esfis's index alone, `esfis-recall` its whole recall in process (judged against its own exact answer, "
        "feedback included), `esfis-http` a real `esfis serve` asked each query's *text* (embedded by the server). "
        "Recall is tie-aware recall@10; *short* counts answers with fewer rows than the space could give; *other "
        "space* counts rows from a space the caller did not ask. Every figure as measured, misses included.",
        "",
    ]
    head = ["system", "arm"]
    for name in classes:
        head += [f"{name} p50 / p95 ms", f"{name} recall@10"]
    head += ["short answers", "rows of another space", "load s", "disk MiB", "test"]
    body = []
    for r in rows:
        if r.get("unavailable"):
            why = r["unavailable"] if r["unavailable"].startswith("not ") else f"not measured: {r['unavailable']}"
            body.append([r.get("system"), r.get("arm"), why, *["–"] * (2 * len(classes) + 3), r["outcome"]])
            continue
        figures = r.get("classes", {})
        cells: list[object] = [r.get("system"), r.get("arm")]
        for name in classes:
            f = figures.get(name, {})
            cells += [f"{fmt(f.get('p50_ms'))} / {fmt(f.get('p95_ms'))}", f.get("recall_at_10")]
        short = sum(f.get("short_answers", 0) for f in figures.values())
        other = sum(f.get("other_space_rows", 0) for f in figures.values())
        if r.get("arm") in ESFIS_ARMS:
            short = checks.check("peers.esfis_short", r["arm"], short)
            other = checks.check("peers.esfis_other_spaces", r["arm"], other)
            if r.get("arm") == "esfis-search":
                worst = min(f.get("recall_at_10", 0.0) for f in figures.values())
                checks.check("peers.esfis_recall", "esfis-search, every class", worst)
        cells += [short, other, r.get("load_seconds"), _mib(r.get("disk_bytes")), r["outcome"]]
        body.append(cells)
    out += table(body, head)
    out += _against_fastest(rows, classes, checks)
    out += ["What each arm was given:", ""]
    out += [f"- `{r.get('arm')}`: {r.get('config') or r.get('unavailable', 'not recorded')}" for r in rows]
    return out + [""]


def _complete(figures: dict) -> bool:
    return figures.get("recall_at_10") == 1.0 and figures.get("short_answers") == 0


def _against_fastest(rows: list[dict], classes: list[str], checks: Checks) -> list[str]:
    """esfis over HTTP beside the fastest peer's in-process search plus the query embedding (the
    target), and beside the fastest peer whose answers were complete and exact (for context)."""
    http = next((r for r in rows if r.get("arm") == "esfis-http" and r.get("classes")), None)
    peers = [r for r in rows if r.get("classes") and r.get("arm") not in ESFIS_ARMS]
    if http is None or not peers or http.get("embedding_p50_ms") is None:
        return ["esfis over HTTP against the fastest peer: not in this run.", ""]
    embedding = http["embedding_p50_ms"]
    body = []
    for name in classes:
        fastest = min(peers, key=lambda r: r["classes"][name]["p50_ms"])
        search = fastest["classes"][name]["p50_ms"]
        whole = [r for r in peers if _complete(r["classes"][name])]
        best = min(whole, key=lambda r: r["classes"][name]["p50_ms"]) if whole else None
        measured = http["classes"][name]["p50_ms"]
        body.append(
            [
                name,
                f"{fastest['arm']} {fmt(search)} (recall@10 {fmt(fastest['classes'][name]['recall_at_10'])}, "
                f"{fastest['classes'][name]['short_answers']} short)",
                f"{best['arm']} {fmt(best['classes'][name]['p50_ms'])}" if best else "none",
                embedding,
                checks.check("peers.http_vs_fastest", name, measured, search + embedding),
                measured - embedding,
            ]
        )
    lead = (
        "esfis over HTTP, embedding included, against the fastest peer's in-process search plus the query "
        f"embedding alone ({http.get('embedding_runtime') or 'the default query graph'}, timed in the same test). "
        "The target takes the fastest peer whatever it answered; the fastest peer whose answers were complete "
        "and exact (recall@10 1.00, none short) is shown beside it."
    )
    head = [
        "class",
        "fastest peer, p50 ms",
        "fastest complete peer, p50 ms",
        "embedding p50 ms",
        "esfis HTTP p50 ms (target)",
        "esfis HTTP less the embedding, ms",
    ]
    return [lead, ""] + table(body, head) + _against_networked(http, peers, classes, checks) + _stages(http, classes)


def _against_networked(http: dict, peers: list[dict], classes: list[str], checks: Checks) -> list[str]:
    """esfis over HTTP beside the fastest complete networked peer plus the query embedding (issue
    69's target): what an agent querying a vector server over a network pays."""
    networked = [r for r in peers if r.get("networked")]
    if not networked:
        return ["esfis over HTTP against a networked peer: no networked peer in this run.", ""]
    embedding = http["embedding_p50_ms"]
    body = []
    for name in classes:
        whole = [r for r in networked if _complete(r["classes"][name])]
        measured = http["classes"][name]["p50_ms"]
        if not whole:
            body.append([name, "none complete", embedding, fmt(measured), "–"])
            continue
        best = min(whole, key=lambda r: r["classes"][name]["p50_ms"])
        peer = best["classes"][name]["p50_ms"]
        body.append(
            [
                name,
                f"{best['arm']} {fmt(peer)}",
                embedding,
                checks.check("peers.http_vs_networked", name, measured, peer + embedding),
                measured / (peer + embedding),
            ]
        )
    lead = (
        "esfis over HTTP against the fastest networked peer whose answers were complete and exact (asked over a "
        "socket: Chroma's server over HTTP, pgvector over PostgreSQL's), plus the same query embedding: what an "
        "agent would pay a vector server over a network and its own embedding."
    )
    head = [
        "class",
        "fastest complete networked peer, p50 ms",
        "embedding p50 ms",
        "esfis HTTP p50 ms (target)",
        "ratio",
    ]
    return [lead, ""] + table(body, head)


STAGE_NAMES = {  # the recall pipeline's stages (server/facade/recall.py), then the names before it
    "reach": "reach: the caller's scope",
    "permissions": "permissions: the partitions' live counts",
    "filter": "filter over data",
    "relevance": "relevance: partition search, BM25 fusion, feedback, merge",
    "validity": "validity: the catalog's last word, labels, data",
    "deliver": "deliver: delivery log and run step (one commit)",
    "embedding": "query embedding",
    "search": "partition search",
    "fusion": "BM25 fusion, feedback, merge",
    "catalog": "catalog reads (counts, validity, labels, data)",
    "fold": "folding copies",
    "delivery_log": "delivery log and run step (one commit)",
    "encoding": "the answer's JSON",
    "rest": "the rest: HTTP, routing, validation, the gate's token and rate count, thread hand-offs, scope",
}


def _stages(http: dict, classes: list[str]) -> list[str]:
    """Where the server's time went, per class, from the server's own /metrics (``server_stages``),
    and what HTTP alone costs this client (its /healthz round trip)."""
    if not any(http["classes"][name].get("stages") for name in classes):
        return []
    floor = http.get("http_floor_p50_ms")
    lead = (
        "Where esfis's HTTP recall spends its time, per class: milliseconds per recall in the server (mean, from "
        "its own /metrics: each stage's histogram against the recall route's whole time) and each stage's share. "
        "The client's own time and the loopback are the client's mean less the server's. "
        f"HTTP alone, the same client's round trip to `/healthz`: p50 {fmt(floor)} ms."
    )
    head = ["stage"] + [f"{name}: ms (share)" for name in classes]
    named = {stage for name in classes for stage in http["classes"][name].get("stages", {})} - {"server", "rest"}
    body = []
    for stage in [*(s for s in STAGE_NAMES if s in named), *sorted(named - set(STAGE_NAMES)), "rest"]:
        row: list[object] = [STAGE_NAMES.get(stage, stage)]
        for name in classes:
            f = http["classes"][name].get("stages", {}).get(stage)
            row.append("–" if f is None else f"{fmt(f['ms'])} ({f['share']:.0%})")
        body.append(row)
    server = ["the server, whole (mean)"]
    client = ["the client and the loopback (client's mean less the server's)"]
    for name in classes:
        figures = http["classes"][name]
        whole = figures.get("stages", {}).get("server", {}).get("ms")
        server.append(fmt(whole))
        mean = figures.get("mean_ms")
        client.append("–" if whole is None or mean is None else fmt(mean - whole))
    return [lead, ""] + table(body + [server, client], head)


def section_peers_quality(rows: list[dict], checks: Checks) -> list[str]:
    first = rows[0] if rows else {}
    out = [
        f"LongMemEval_S, one space per question ({fmt(first.get('spaces'))} spaces, {fmt(first.get('memories'))} "
        "user turns), every system holding the same all-MiniLM-L6-v2 vectors and asked each question's vector "
        "inside its space; esfis answers what its recall serves (cosine fused with BM25, then feedback), the "
        "others their plain vector search. Over the questions with evidence: any@5 (some evidence in the top "
        "5), all@10 (all of it in the top 10), NDCG@10.",
        "",
    ]
    body = [
        [
            r.get("system"),
            r.get("questions"),
            r.get("any@5"),
            r.get("all@10"),
            r.get("ndcg@10"),
            r.get("other_space_rows"),
            r.get("load_seconds"),
            r["bench_p50_ms"],
            r["outcome"],
        ]
        for r in rows
    ]
    return out + table(
        body,
        [
            "system",
            "questions",
            "any@5",
            "all@10",
            "NDCG@10",
            "rows of another space",
            "load s",
            "query p50 ms",
            "test",
        ],
    )
