"""The same-fact threshold, calibrated on data with the real model: precision and recall of
``server.memories.duplicates.same_fact`` over a grid of cosine thresholds and term overlaps.

Pairs, from LongMemEval user turns (the sample shipped in ``benchmarks/data``, MIT licence;
the full S split with ``full``):

- same fact: a turn and its paraphrase (``benchmarks.paraphrases.paraphrase``);
- not the same fact: a turn and the turn with one value changed (``value_changed``: a number, a
  day, a colour, a name), and a turn and its nearest other turn of the same haystack.

    python -m benchmarks.dedupe_calibration [full] [--turns N]

prints the grid as a Markdown table (docs/recall.md holds the chosen row).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import dataclass

import numpy as np

from benchmarks.longmemeval import SAMPLE, full_data
from benchmarks.paraphrases import paraphrase, value_changed
from server.memories import duplicates

COSINES = (0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.96)
TERMS = (0.4, 0.5, 0.6, 0.7)
MAX_CHARS = 600  # memories are short facts; the longest turns are whole documents pasted in


@dataclass(frozen=True)
class Pairs:
    a: list[str]
    b: list[str]
    cosines: np.ndarray
    same: np.ndarray  # bool


def turns(*, full: bool, count: int) -> list[list[str]]:
    """Up to ``count`` short user turns, grouped by haystack (the first questions')."""
    raw = json.load(gzip.open(full_data() if full else SAMPLE))
    groups: list[list[str]] = []
    seen: set[str] = set()
    total = 0
    for q in raw["questions"]:
        group = []
        for sid in q["haystack"]:
            for text in raw["sessions"][sid]["turns"]:
                if 20 <= len(text) <= MAX_CHARS and text not in seen:
                    seen.add(text)
                    group.append(text)
        groups.append(group)
        total += len(group)
        if total >= count:
            break
    return groups


def make_pairs(groups: list[list[str]], embedder, *, count: int) -> Pairs:
    a: list[str] = []
    b: list[str] = []
    same: list[bool] = []
    originals = [t for g in groups for t in g][:count]
    for i, text in enumerate(originals):
        a.append(text)
        b.append(paraphrase(text, seed=i))
        same.append(True)
        changed = value_changed(text, seed=i)
        if changed is not None and changed != text:
            a.append(text)
            b.append(changed)
            same.append(False)
    vectors = embedder.embed_documents(a + b)
    va, vb = vectors[: len(a)], vectors[len(a) :]
    cosines = np.einsum("ij,ij->i", va, vb)
    # The nearest other turn of the same haystack: the hardest distinct text there is.
    start = 0
    for group in groups:
        members = [t for t in group if t in set(originals)]
        if len(members) < 2:
            continue
        gv = embedder.embed_documents(members)
        sims = gv @ gv.T
        np.fill_diagonal(sims, -1)
        for i, j in enumerate(sims.argmax(axis=1)):
            a.append(members[i])
            b.append(members[j])
            same.append(members[i] == members[j])
            cosines = np.append(cosines, sims[i, j])
        start += len(members)
    return Pairs(a, b, cosines, np.array(same))


def grid(pairs: Pairs) -> list[tuple[float, float, float, float, int, int]]:
    """(cosine, terms, precision, recall, false positives, false negatives) for each cell."""
    rows = []
    kept = duplicates.SAME_FACT_COSINE, duplicates.SAME_TERMS
    try:
        for cosine in COSINES:
            for terms in TERMS:
                duplicates.SAME_FACT_COSINE, duplicates.SAME_TERMS = cosine, terms
                said = np.array(
                    [duplicates.same_fact(x, y, float(c)) for x, y, c in zip(pairs.a, pairs.b, pairs.cosines)]
                )
                tp = int((said & pairs.same).sum())
                fp = int((said & ~pairs.same).sum())
                fn = int((~said & pairs.same).sum())
                precision = tp / (tp + fp) if tp + fp else 1.0
                recall = tp / (tp + fn) if tp + fn else 1.0
                rows.append((cosine, terms, precision, recall, fp, fn))
    finally:
        duplicates.SAME_FACT_COSINE, duplicates.SAME_TERMS = kept
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dedupe_calibration")
    parser.add_argument("full", nargs="?", default="")
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args(argv)
    from indexing.embedding.embedder import load_embedder

    embedder = load_embedder(None)
    groups = turns(full=args.full == "full", count=args.turns)
    pairs = make_pairs(groups, embedder, count=args.turns)
    positives, negatives = int(pairs.same.sum()), int((~pairs.same).sum())
    print(f"{positives} same-fact pairs, {negatives} other pairs ({embedder.name})\n")
    print("| cosine ≥ | terms ≥ | precision | recall | false same | missed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for cosine, terms, precision, recall, fp, fn in grid(pairs):
        print(f"| {cosine} | {terms} | {precision:.3f} | {recall:.3f} | {fp} | {fn} |")


if __name__ == "__main__":
    main(sys.argv[1:])
