"""The report's section for one fact once (``test_dedupe.py``): evidence recall on LongMemEval_S
with every turn remembered twice, with the write-time check and without, and what the check
adds to a remember."""

from __future__ import annotations

from benchmarks.report.common import Checks, table


def section_dedupe(rows: list[dict], checks: Checks) -> list[str]:
    out: list[str] = []
    for r in rows:
        if "recall_once" in r:
            gap = r["recall_once"] - r["recall_dedupe_on"]
            body = [
                ["each turn once (no copies; the check on, as by default)", r["recall_once"], r["stored"]["once"], "–"],
                [
                    "each turn once, dedupe=false (the haystack's own repeats kept)",
                    r.get("recall_once_dedupe_off"),
                    r["stored"].get("once, dedupe off"),
                    0,
                ],
                [
                    "twice, the check on",
                    checks.check("dedupe.recall_gap", "gap to no copies", gap, shown=f"{r['recall_dedupe_on']:.4f}"),
                    r["stored"]["copies, dedupe on"],
                    r["refused_as_copies"]["copies, dedupe on"],
                ],
                ["twice, dedupe=false", r["recall_dedupe_off"], r["stored"]["copies, dedupe off"], 0],
            ]
            if "recall_no_fold" in r:
                body.append(
                    [
                        "twice, neither the check nor the recall's fold (ablation)",
                        r["recall_no_fold"],
                        r["stored"]["copies, no check, no fold"],
                        0,
                    ]
                )
            out += [f"Evidence recall@10 over {r['questions']} questions ({r['outcome']}).", ""]
            out += table(body, ["set", "evidence recall@10", "memories stored", "refused as copies"])
        if "check_ms" in r:
            out += [
                f"remember at {r['memories']} memories in the target space, {r['rounds']} rounds: p50 "
                f"{r['p50_with_check_ms']:.3f} ms with the check, {r['p50_without_check_ms']:.3f} ms without; "
                + checks.check("dedupe.check_ms", "the check's cost", r["check_ms"])
                + f" ({r['outcome']}).",
                "",
            ]
    return out
