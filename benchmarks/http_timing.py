"""Timing recalls through a real ``esfis serve``: one request after another, each timed from
send to answer, and every answer checked for memories from outside the caller's space."""

from __future__ import annotations

import time

import httpx
import numpy as np


def timed_recalls(client: httpx.Client, questions: list[str], space: str) -> tuple[list[float], int]:
    """(seconds per recall, answers from another space) for each question, asked from ``space``."""
    latencies, outside = [], 0
    for question in questions:
        started = time.perf_counter()
        answer = client.post("/v1/recall", json={"query": question, "space": space})
        latencies.append(time.perf_counter() - started)
        answer.raise_for_status()
        outside += sum(1 for m in answer.json()["memories"] if m["space"] != space)
    return latencies, outside


def percentiles_ms(latencies: list[float]) -> dict[str, float]:
    return {"p50_ms": float(np.percentile(latencies, 50) * 1000), "p95_ms": float(np.percentile(latencies, 95) * 1000)}
