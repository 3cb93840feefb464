"""Where a real ``esfis serve``'s recalls spent their time, read from its own ``/metrics``: each
stage's seconds (``esfis_recall_stage_seconds``) against the recall route's whole time in the
server (``esfis_http_request_duration_seconds``, measured by the outermost middleware). What no
stage names is the rest: HTTP parsing and routing, the body's validation, the gate's token look-up
and rate count, the thread hand-offs, and the caller's scope.

Read twice around a load (``Scrape`` before, ``Scrape`` after) and subtracted, so warm-ups and
other routes are left out."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

RECALL_ROUTE = ("POST", "/v1/recall")


@dataclass(frozen=True)
class Scrape:
    stages: dict[str, float]  # seconds summed, by stage
    recall_seconds: float  # the recall route's whole time in the server, summed
    recalls: int

    @classmethod
    def of(cls, client: httpx.Client) -> Scrape:
        """``client`` carries an operator token (``/metrics`` is the operator's)."""
        answer = client.get("/metrics")
        answer.raise_for_status()
        stages: dict[str, float] = {}
        seconds, count = 0.0, 0
        for family in text_string_to_metric_families(answer.text):
            for sample in family.samples:
                if sample.name == "esfis_recall_stage_seconds_sum":
                    stages[sample.labels["stage"]] = stages.get(sample.labels["stage"], 0.0) + sample.value
                elif (sample.labels.get("method"), sample.labels.get("route")) == RECALL_ROUTE:
                    if sample.name == "esfis_http_request_duration_seconds_sum":
                        seconds += sample.value
                    elif sample.name == "esfis_http_request_duration_seconds_count":
                        count += int(sample.value)
        return cls(stages, seconds, count)


def shares(before: Scrape, after: Scrape) -> dict[str, dict[str, float]]:
    """Milliseconds per recall and share of the server's time, by stage, with ``server`` (the
    whole) and ``rest`` (what no stage names), for the recalls between two scrapes."""
    recalls = after.recalls - before.recalls
    if recalls <= 0:
        return {}
    whole = (after.recall_seconds - before.recall_seconds) / recalls * 1000
    out: dict[str, dict[str, float]] = {}
    for stage in after.stages:  # whatever stages the server names: none falls into the rest unnamed
        ms = (after.stages.get(stage, 0.0) - before.stages.get(stage, 0.0)) / recalls * 1000
        out[stage] = {"ms": round(ms, 4), "share": round(ms / whole, 4) if whole else 0.0}
    rest = whole - sum(f["ms"] for f in out.values())
    out["rest"] = {"ms": round(rest, 4), "share": round(rest / whole, 4) if whole else 0.0}
    out["server"] = {"ms": round(whole, 4), "share": 1.0, "recalls": recalls}
    return out
