"""The report's top: the header (the run, its commit and tree, the machine, the recall
definition) and "Targets", the summary of every check the sections made."""

from __future__ import annotations

import platform

from benchmarks.missed import MISSED_BECAUSE, WRITTEN_FOR
from benchmarks.report.common import Checks, Run, table
from benchmarks.targets import RECALL_DEFINITION, TARGETS


def header(run: Run) -> list[str]:
    cpu = run.machine.get("cpu", {})
    title = "# esfis benchmark report"
    if run.kind == "partial":
        title += f" — partial rerun, commit {run.short}, not a full run"
    out = [title, ""]
    legacy = (
        " (as pytest-benchmark recorded it: `git describe --dirty`, untracked files not seen)"
        if run.porcelain is None
        else ""
    )
    if run.dirty is None:
        out += ["> ⚠️ **The tree's state was not recorded**: this run cannot say whether it measured a commit.", ""]
    elif run.dirty:
        out += [
            f"> ⚠️ **Measured from a dirty tree**{legacy}: commit `{run.commit}` with uncommitted changes"
            + (" (`git status --porcelain` at the start of the run):" if run.porcelain else "."),
            ">",
        ]
        out += [f"> `{line}`" for line in run.porcelain or [] if not line[3:].startswith("benchmarks/results/")] + [""]
    else:
        out += [f"**Commit `{run.commit}`**, clean tree{legacy}.", ""]
    if run.commit_at_end and run.commit and run.commit_at_end != run.commit:
        out += [f"> ⚠️ HEAD moved during the run: `{run.commit}` at the start, `{run.commit_at_end}` at the end.", ""]
    if run.kind == "complete":
        how = "one complete run (`scripts/bench" + (" full" if run.mode == "full" else "") + "`)"
    elif run.kind == "partial":
        how = (
            "a partial run (a selection of benchmarks"
            + (f", overrides {run.overrides}" if run.overrides else "")
            + "): no cell here stands for a full run"
        )
    else:
        how = "a run whose raw file predates run labels (whether it was complete is not recorded)"
    out += [
        f"Run: {run.mode_text}, {how}, {run.when}; raw data `{run.path.name}`, the only source of every figure below.",
        "",
    ]
    out += length(run)
    if run.mode == "quick":
        out += [
            "> Quick mode: small stores and few queries. Targets stated for the full mode's sizes are marked "
            "*(full-mode target)*; their verdicts here say little.",
            "",
        ]
    out += [
        f"Machine: {cpu.get('brand_raw', platform.processor())}, {cpu.get('count', '?')} cores, "
        f"Python {run.machine.get('python_version', platform.python_version())}, {run.machine.get('system', '')} "
        f"{run.machine.get('release', '')}.",
        "",
        "Latency: p50/p95 of the timed pass (pytest-benchmark rounds, one query or request each), in ms.",
        "",
        f"Recall, everywhere in this report: {RECALL_DEFINITION}.",
        "",
    ]
    return out


RUN_MINUTES_TARGET = 60  # a full run on 2 cores, the default model's arms only (issue 34)


def length(run: Run) -> list[str]:
    """How long the run took, and where the time went: the modules that took longest."""
    if run.wall_seconds is None:
        return ["Length of the run: not recorded in this raw file.", ""]
    by_module: dict[str, float] = {}
    for test, seconds in run.seconds.items():
        module = test.split("::")[0].rsplit("/", 1)[-1]
        by_module[module] = by_module.get(module, 0.0) + seconds
    slowest = sorted(by_module.items(), key=lambda item: -item[1])[:6]
    longest = "Longest: " + ", ".join(f"`{m}` {s / 60:.1f} min" for m, s in slowest) + "."
    minutes = run.wall_seconds / 60
    if run.preparation_seconds is None:
        verdict = ""
        if run.mode == "full":
            verdict = (
                f" ({'✅' if minutes <= RUN_MINUTES_TARGET else '❌'} target ≤ {RUN_MINUTES_TARGET} min on 2 cores)"
            )
        before = (
            "quick mode prepares nothing"
            if run.mode == "quick"
            else "the LongMemEval preparation before it not recorded"
        )
        return [f"Length of the run: {minutes:.1f} min for the benchmarks{verdict}, {before}. {longest}", ""]
    prepared = run.preparation_seconds / 60
    total = minutes + prepared
    cached = run.preparation_seconds < PREPARATION_CACHED_S
    return [
        f"Length of the run: {total:.1f} min "
        f"({'✅' if total <= RUN_MINUTES_TARGET else '❌'} target ≤ {RUN_MINUTES_TARGET} min on 2 cores): "
        f"{prepared:.1f} min of LongMemEval preparation"
        + (
            " (its vectors were in this machine's cache; on a fresh machine it embeds them first, "
            "see docs/benchmarks.md)"
            if cached
            else " (embedding its texts on this machine)"
        )
        + f", then {minutes:.1f} min for the benchmarks. {longest}",
        "",
    ]


PREPARATION_CACHED_S = 60  # a preparation this short read its vectors from the cache


def summary(checks: Checks) -> list[str]:
    met = sum(1 for c in checks.items if c[4].startswith("✅"))
    missed = [c for c in checks.items if c[4].startswith("❌")]
    out = [
        "## Targets",
        "",
        f"{met} of {len(checks.items)} checks met, {len(missed)} missed"
        + (
            f", {len(checks.items) - met - len(missed)} without a figure"
            if len(checks.items) - met - len(missed)
            else ""
        )
        + ". Targets are defined in `benchmarks/targets.py`.",
        "",
    ]
    out += table(checks.items, ["figure", "cell", "measured", "target", "met"])
    return out + missed_targets(checks)


def missed_targets(checks: Checks) -> list[str]:
    """Each target this run missed, once: what it is for, and what is known of why it is missed."""
    if not checks.missed:
        return []
    out = [
        "### The targets missed, and why",
        "",
        f"*Why it is missed* was written after reading the raw file of the full run of {WRITTEN_FOR} "
        "(`benchmarks/missed.py`), and the figures it quotes are that run's unless it names another; "
        "where this run is a later one, its own figures are the tables'.",
        "",
    ]
    for key, cells in checks.missed.items():
        target = TARGETS[key]
        out.append(
            f"- **{target.what}** ({target.describe()}; {target.source or 'no source'}), missed in "
            f"{cells} cell{'s' if cells > 1 else ''}. "
            f"*What it is for:* {target.why or 'not stated.'} "
            f"*Why it is missed:* {MISSED_BECAUSE.get(key, 'not explained yet.')}"
        )
    return out + [""]
