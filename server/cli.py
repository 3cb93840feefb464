"""The ``esfis`` command line: parsing and printing over the service façade, nothing more.

Errors print one line on stderr and exit non-zero (the code depends on the kind of error, never
on whether an unseen id exists). ``--allow``, ``--deny`` and ``--why`` are top-level flags, as
in ``esfis --deny '*' acme``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from server import render
from server.errors import BadImportLine, EsfisError, InvalidInput
from server.models import DEFAULT_LIMIT, MAX_LIMIT
from server.settings import Settings


def _service():
    from server.facade import open_service

    return open_service(Settings.from_env())


def _places():
    import server.facade  # with the service: never at start-up

    return server.facade


def _caller(service, args: argparse.Namespace):
    ai = args.ai or os.environ.get("ESFIS_AI") or "cli"
    space = getattr(args, "space", None) or os.environ.get("ESFIS_SPACE") or None
    run = getattr(args, "run_name", None) or os.environ.get("ESFIS_RUN") or None
    return service.caller(ai, space=space, cwd=None if space else os.getcwd(), transport="cli", run=run)


def _ask_at_terminal(request) -> bool | None:
    """A person at the call: a yes/no prompt, only when a terminal is attached."""
    if not sys.stdin.isatty():
        return None
    print(request.message(), file=sys.stderr)
    print("approve? [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


# -- commands -------------------------------------------------------------------------------


def cmd_space_add(args) -> None:
    space = _service().operator.add_space(args.folder, args.name)
    print(space.name)


def cmd_space_list(args) -> None:
    spaces = _service().operator.spaces()
    if args.json:
        print(json.dumps({"spaces": [render.space_json(s) for s in spaces]}, indent=2))
    else:
        print(render.spaces_table(spaces))


def cmd_space_remove(args) -> None:
    removed = _service().operator.remove_space(args.name, purge=args.purge)
    print(f"removed space {args.name}" + (f" and forgot {removed} memories" if removed else ""))


def cmd_policy_list(args) -> None:
    rules = _service().operator.policies()
    if args.json:
        print(json.dumps({"policies": [render.rule_json(r) for r in rules]}, indent=2))
    else:
        print(render.rules_table(rules))


def cmd_policy_clear(args) -> None:
    _service().operator.clear_policy(args.ai_name, args.target or _places().EVERYWHERE)


def cmd_remember(args) -> None:
    service = _service()
    memory = service.remember(
        _caller(service, args),
        args.text,
        personal=args.personal,
        valid_until=args.valid_until,
        labels=args.label,
        ask=_ask_at_terminal,
    )
    print(memory.id)


def cmd_recall(args) -> None:
    service = _service()
    result = service.recall(_caller(service, args), args.query, limit=args.limit)
    if args.json:
        print(json.dumps(render.recall_json(result.memories), indent=2))
    else:
        print(render.recall_table(result.memories))


def cmd_get(args) -> None:
    service = _service()
    memory = service.get(_caller(service, args), args.id)
    print(json.dumps(render.memory_json(memory), indent=2) if args.json else render.memory_text(memory.text))


def cmd_replace(args) -> None:
    service = _service()
    memory = service.replace(_caller(service, args), args.id, args.text, space=args.new_space, ask=_ask_at_terminal)
    print(memory.id)


def cmd_forget(args) -> None:
    service = _service()
    service.forget(_caller(service, args), args.id, ask=_ask_at_terminal)
    print(f"forgot {args.id}")


def cmd_share(args) -> None:
    service = _service()
    reference = service.share(_caller(service, args), args.ids)
    print(json.dumps(render.reference_json(reference), indent=2) if args.json else reference.ref)


def cmd_open(args) -> None:
    service = _service()
    reference, memories = service.open_context(_caller(service, args), args.ref)
    if args.json:
        print(json.dumps(render.opened_json(reference, memories), indent=2))
    else:
        print("\n".join(f"{m.id}  [{m.labels.space or 'personal'}]  {render.memory_text(m.text)}" for m in memories))


def cmd_runs(args) -> None:
    """``esfis runs [--last N]``, ``runs end RUN``, ``runs prune [--days N]`` (operator)."""
    service = _service()
    if args.runs_command == "end":
        run = service.operator.end_run(args.run_id, by="cli")
        print(json.dumps(render.run_json(run), indent=2) if args.json else f"ended {run.id}")
    elif args.runs_command == "prune":
        pruned = service.operator.prune_trail(days=args.days)
        print(
            f"pruned {pruned.runs} runs, {pruned.steps} steps and {pruned.tokens} run tokens; "
            f"ended {pruned.ended} idle sessions"
        )
    else:
        runs = service.operator.run_list(last=args.last)
        if args.json:
            print(json.dumps({"runs": [render.run_json(r) for r in runs]}, indent=2))
        else:
            print(render.runs_table(runs))


def cmd_trail(args) -> None:
    run, steps = _service().operator.trail(args.run_id)
    print(json.dumps(render.run_json(run, steps), indent=2) if args.json else render.trail_text(run, steps))


def cmd_grant(args) -> None:
    service = _service()
    if args.grant_command == "add":
        if (args.to is None) == (not args.personal):
            raise InvalidInput("grant add takes TO or --personal (exactly one)", field="to")
        grant = service.operator.add_grant(
            args.source, _places().PERSONAL if args.personal else args.to, ai=args.grant_ai, until=args.until
        )
        print(grant.id)
    elif args.grant_command == "list":
        grants = service.operator.grants()
        print(
            json.dumps({"grants": [render.grant_json(g) for g in grants]}, indent=2)
            if args.json
            else render.grants_table(grants)
        )
    else:
        service.operator.revoke_grant(args.grant_id)
        print(f"revoked {args.grant_id}")


def cmd_trust(args) -> None:
    service = _service()
    if args.trust_command == "add":
        print(service.operator.trust(args.source).source)
    elif args.trust_command == "list":
        sources = service.operator.trusted_sources()
        print(
            json.dumps({"trusted_sources": [render.trusted_json(t) for t in sources]}, indent=2)
            if args.json
            else "\n".join(t.source for t in sources) or "(no trusted sources: every origin mark is untrusted)"
        )
    else:
        service.operator.distrust(args.source)
        print(f"{args.source} is untrusted again")


def cmd_deliveries(args) -> None:
    deliveries = _service().operator.deliveries(ai=args.ai_filter, space=args.space_filter, last=args.last)
    if args.json:
        print(json.dumps({"deliveries": [render.delivery_json(d) for d in deliveries]}, indent=2))
    else:
        print(render.deliveries_table(deliveries))


def cmd_allow_deny(effect: str, values: list[str]) -> None:
    if not 1 <= len(values) <= 2:
        raise InvalidInput(f"usage: esfis --{effect} AI [SPACE]", field=effect)
    rule = _service().operator.set_policy(values[0], values[1] if len(values) == 2 else _places().EVERYWHERE, effect)
    print(rule.describe())


def cmd_why(value: str, as_json: bool) -> None:
    try:
        delivery_id = int(value)
    except ValueError:
        raise InvalidInput(f"--why takes a delivery number, got {value!r}", field="why") from None
    why = _service().operator.why(delivery_id)
    print(json.dumps(render.why_json(why), indent=2) if as_json else render.why_text(why))


# Long-running interfaces and bulk moves import their stack only when run, so ``esfis recall``
# never pays for FastAPI, the MCP SDK or tqdm.


def cmd_serve(args) -> None:
    from server.arenas import limit_malloc_arenas
    from server.http.workers import serve

    limit_malloc_arenas()  # a long-lived process with many threads
    if args.batch_window_ms is not None:  # the workers read it from the environment
        os.environ["ESFIS_BATCH_WINDOW_MS"] = str(args.batch_window_ms)
    serve(host=args.host, port=args.port, workers=args.workers)


def cmd_mcp(args) -> None:
    from server.arenas import limit_malloc_arenas
    from server.mcp.server import run_stdio

    limit_malloc_arenas()
    run_stdio()


def cmd_sweep(args) -> None:
    """``esfis sweep``: purge rows no catalog entry names, from every partition."""
    import math
    from datetime import timedelta

    if not math.isfinite(args.older_than) or not 5 <= args.older_than <= 10**8:
        raise InvalidInput(
            "--older-than must be a number of minutes from 5 to 100000000 (a younger row may "
            "be a write still in flight)",
            field="older_than",
        )
    service = _service()
    try:
        purged, partitions = service.operator.sweep_orphans(timedelta(minutes=args.older_than))
    finally:
        service.close()
    print(f"purged {purged} orphan rows from {partitions} partitions")


def cmd_reindex(args) -> None:
    """``esfis reindex``: every memory embedded again with the configured model."""
    from tqdm import tqdm

    from server.facade import reindex_store

    if not 1 <= args.batch_size <= 8192:
        raise InvalidInput("--batch-size must be from 1 to 8192", field="batch_size")
    with tqdm(unit=" memories", file=sys.stderr, disable=not sys.stderr.isatty(), dynamic_ncols=True) as bar:
        report = reindex_store(Settings.from_env(), batch=args.batch_size, progress=bar.update)
    if report.model_before == report.model_after:
        print(f"the store is already embedded with {report.model_after}: nothing to do")
        return
    print(
        f"reindexed {report.rows} memories in {report.partitions} partitions with {report.model_after} "
        f"(was {report.model_before}) in {report.seconds:.1f} s"
    )


def cmd_import(args) -> None:
    """``esfis import FILE|-``: a progress bar on a terminal, errors by line, then the summary."""
    from contextlib import nullcontext
    from pathlib import Path

    from tqdm import tqdm

    ai = args.ai or os.environ.get("ESFIS_AI") or "import"
    source = args.file
    fmt = args.format or ("parquet" if Path(source).suffix.lower() in (".parquet", ".pq") else "jsonl")
    if source == "-" and fmt == "parquet":
        raise InvalidInput("Parquet cannot be read from stdin: name the file", field="file")
    if source != "-" and not Path(source).is_file():
        raise InvalidInput(f"no file {source!r}", field="file")
    bar = tqdm(
        total=None, unit=" rows", file=sys.stderr, disable=not sys.stderr.isatty(), dynamic_ncols=True, smoothing=0.1
    )
    service = _service()
    try:
        with bar:
            if fmt == "parquet":

                def sized(total: int) -> None:
                    bar.total = total

                report = service.operator.import_parquet(
                    source, ai=ai, batch_size=args.batch_size, progress=bar.update, sized=sized
                )
            else:
                with open(source, "rb") if source != "-" else nullcontext(sys.stdin.buffer) as lines:
                    report = service.operator.import_jsonl(
                        lines, ai=ai, batch_size=args.batch_size, progress=bar.update
                    )
    finally:
        service.close()
    for line, reason in report.errors:
        print(f"line {line}: {reason}", file=sys.stderr)
    if report.failed > len(report.errors):
        print(f"... and {report.failed - len(report.errors)} more errors", file=sys.stderr)
    print(report.summary())
    if report.failed:
        raise BadImportLine(f"{report.failed} of {report.rows} rows failed (listed above); the rest were imported")


def cmd_token(args) -> None:
    """``esfis token create|list|revoke``: create prints the secret and nothing else."""
    service = _service()
    try:
        if args.token_command == "create":
            if args.runs_only and args.token_ai is None:
                raise InvalidInput("--runs-only applies to AI tokens (--ai NAME)", field="runs_only")
            _, secret = service.operator.create_token(
                ai=args.token_ai, space=args.token_space, operator=args.operator, runs_only=args.runs_only
            )
            print(secret)
        elif args.token_command == "list":
            tokens = service.operator.tokens()
            print(
                json.dumps({"tokens": [render.token_json(t) for t in tokens]}, indent=2)
                if args.json
                else render.tokens_table(tokens)
            )
        else:
            print(f"revoked {service.operator.revoke_token(args.token_id).id}")
    finally:
        service.close()


# -- backup, restore, export (one block: server.bulk.backup and server.bulk.export hold the logic) ------


def _bar(unit: str, total: int | None = None):
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, disable=not sys.stderr.isatty(), dynamic_ncols=True)


def cmd_backup(args) -> None:
    """``esfis backup DIR``: a consistent copy of the home while servers keep working."""
    from server.facade import backup_home

    with _bar(" memories") as bar:
        report = backup_home(args.dir, Settings.from_env(), progress=bar.update)
    print(
        f"backed up {report.memories} memories in {report.partitions} partitions to {report.path} "
        f"(as of {report.taken_at.isoformat()}) in {report.seconds:.1f} s ({report.rate:.0f} memories/s)"
    )


def cmd_restore(args) -> None:
    """``esfis restore DIR``: a backup into an empty ESFIS_HOME."""
    from server.facade import restore_home

    with _bar(" memories") as bar:
        report = restore_home(args.dir, Settings.from_env(), forgets_from=args.forgets_from, progress=bar.update)
    print(
        f"restored {report.memories} memories in {report.partitions} partitions into {report.home} "
        f"(backup of {report.taken_at.isoformat()}; {report.forgets_applied} later forgets applied) "
        f"in {report.seconds:.1f} s"
    )


def cmd_export(args) -> None:
    """``esfis export``: every current memory as JSON Lines, on stdout or into --output."""
    from contextlib import nullcontext

    from server.facade import export_home

    if args.output and os.path.exists(args.output):
        raise InvalidInput(f"{args.output} exists: an export goes into a new file", field="output")
    with open(args.output, "xb") if args.output else nullcontext(sys.stdout.buffer) as out, _bar(" memories") as bar:
        report = export_home(
            out, Settings.from_env(), spaces=args.export_space or None, vectors=args.vectors, progress=bar.update
        )
    print(
        f"exported {report.memories} memories from {report.partitions} partitions in {report.seconds:.1f} s",
        file=sys.stderr,
    )


def cmd_import_restore(args) -> None:
    """``esfis import --restore FILE``: an export's rows with their ids, labels and validity."""
    from contextlib import nullcontext

    from server.facade import open_service

    if args.file != "-" and not os.path.isfile(args.file):
        raise InvalidInput(f"no file {args.file!r}", field="file")
    service = open_service(Settings.from_env())
    try:
        with (
            open(args.file, "rb") if args.file != "-" else nullcontext(sys.stdin.buffer) as lines,
            _bar(" rows") as bar,
        ):
            report = service.operator.import_restore(lines, progress=bar.update)
    finally:
        service.close()
    for line, reason in report.errors:
        print(f"line {line}: {reason}", file=sys.stderr)
    print(report.summary())
    if report.failed:
        raise BadImportLine(f"{report.failed} of {report.rows} rows failed (listed above); the rest were restored")


def _import_or_restore(args) -> None:
    (cmd_import_restore if args.restore else cmd_import)(args)


def add_backup_commands(sub) -> None:
    p = sub.add_parser(
        "backup", help="a consistent copy of this home into an empty folder DIR, while servers keep working (operator)"
    )
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(run=cmd_backup)
    p = sub.add_parser("restore", help="restore the backup in DIR into this (empty) ESFIS_HOME (operator)")
    p.add_argument("dir", metavar="DIR")
    p.add_argument(
        "--forgets-from",
        metavar="HOME",
        help="the live home (or its postgresql:// catalog): forget again every memory it forgot since the backup",
    )
    p.set_defaults(run=cmd_restore)
    p = sub.add_parser("export", help="every current memory as JSON Lines, with its labels (operator)")
    p.add_argument(
        "--space",
        dest="export_space",
        action="append",
        metavar="S",
        help="only this space (repeatable; 'personal' for personal memories)",
    )
    p.add_argument("--vectors", action="store_true", help="with each memory's vector")
    p.add_argument("--output", "-o", metavar="FILE", help="write here (a new file) instead of stdout")
    p.set_defaults(run=cmd_export)
    p = sub.choices["import"]
    p.add_argument("--restore", action="store_true", help="FILE is an esfis export: keep its ids, labels and validity")
    p.set_defaults(run=_import_or_restore)


# -- parsing --------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr like every other error."""

    def error(self, message: str):
        raise InvalidInput(f"{message} (see {self.prog} --help)")


def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit must be an integer from 1 to {MAX_LIMIT}, got {value!r}") from None
    if not 1 <= number <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"--limit must be an integer from 1 to {MAX_LIMIT}, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="esfis",
        description="Scope-first memory for AI agents. Data lives in ESFIS_HOME (default ~/.esfis).",
    )
    parser.add_argument("--allow", nargs="+", metavar="AI [SPACE]", help="allow AI (or '*') in SPACE, or everywhere")
    parser.add_argument("--deny", nargs="+", metavar="AI [SPACE]", help="deny AI (or '*') in SPACE, or everywhere")
    parser.add_argument("--why", metavar="N", help="explain delivery N (operator)")
    parser.add_argument("--json", action="store_true", help="with --why: print JSON")
    caller = Parser(add_help=False)
    caller.add_argument("--ai", help="the acting AI (default: $ESFIS_AI, else 'cli')")
    caller.add_argument("--space", help="the caller's space (default: $ESFIS_SPACE, else the current folder's)")
    caller.add_argument(
        "--run", dest="run_name", help="join run ID (default: $ESFIS_RUN; none: this command is a run of its own)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    space = sub.add_parser("space", help="add, list and remove spaces").add_subparsers(
        dest="space_command", required=True
    )
    p = space.add_parser("add", help="register FOLDER to a space (created if new)")
    p.add_argument("folder")
    p.add_argument("--name", help="the space's name (default: the folder's base name, under its enclosing space)")
    p.set_defaults(run=cmd_space_add)
    p = space.add_parser("list", help="list spaces, their folders and memory counts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_space_list)
    p = space.add_parser("remove", help="remove a space (refuses while it holds memories)")
    p.add_argument("name")
    p.add_argument("--purge", action="store_true", help="forget the space's memories with it")
    p.set_defaults(run=cmd_space_remove)

    policy = sub.add_parser("policy", help="list and clear policy rules").add_subparsers(
        dest="policy_command", required=True
    )
    p = policy.add_parser("list", help="list the rules")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_policy_list)
    p = policy.add_parser("clear", help="remove the rule for AI in SPACE (or everywhere)")
    p.add_argument("ai_name", metavar="AI")
    p.add_argument("target", metavar="SPACE", nargs="?")
    p.set_defaults(run=cmd_policy_clear)

    p = sub.add_parser("remember", parents=[caller], help="store a memory in this space (or personal)")
    p.add_argument("text")
    p.add_argument("--personal", action="store_true", help="write a personal memory (reaches every space)")
    p.add_argument("--valid-until", help="ISO 8601 time or a duration (30m, 12h, 7d)")
    p.add_argument("--label", action="append", help="an origin mark, e.g. source:slack (repeatable)")
    p.set_defaults(run=cmd_remember)

    p = sub.add_parser(
        "recall", parents=[caller], help="the memories of this space and personal that best answer QUERY"
    )
    p.add_argument("query")
    p.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT, help=f"1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_recall)

    p = sub.add_parser("get", parents=[caller], help="print one memory")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_get)

    p = sub.add_parser("replace", parents=[caller], help="supersede memory ID with TEXT")
    p.add_argument("id")
    p.add_argument("text")
    p.add_argument("--new-space", help="the new memory's space (default: the old one's)")
    p.set_defaults(run=cmd_replace)

    p = sub.add_parser("forget", parents=[caller], help="remove a memory for good")
    p.add_argument("id")
    p.set_defaults(run=cmd_forget)

    p = sub.add_parser("share", parents=[caller], help="a context reference to memories (labels, never texts)")
    p.add_argument("ids", metavar="ID", nargs="+")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_share)

    p = sub.add_parser("open", parents=[caller], help="open a context reference (when this run may)")
    p.add_argument("ref", metavar="REF")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_open)

    p = sub.add_parser("runs", help="the runs, newest last; end one; prune the trail (operator)")
    p.add_argument("--last", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_runs, runs_command=None)
    runs = p.add_subparsers(dest="runs_command", metavar="{end,prune}")
    q = runs.add_parser("end", help="end run RUN: its run token stops; a standing run starts afresh")
    q.add_argument("run_id", metavar="RUN")
    q.add_argument("--json", action="store_true")
    q = runs.add_parser("prune", help="prune the runs that are over (default: older than $ESFIS_TRAIL_DAYS, 90)")
    q.add_argument("--days", type=int, default=None)

    p = sub.add_parser("trail", help="every step of one run (operator)")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_trail)

    grant = sub.add_parser("grant", help="let data of one space be written into another (operator)")
    grants = grant.add_subparsers(dest="grant_command", required=True)
    p = grants.add_parser("add", help="data of FROM's subtree may be written into TO (or --personal)")
    p.add_argument("source", metavar="FROM")
    p.add_argument("to", metavar="TO", nargs="?")
    p.add_argument("--personal", action="store_true", help="into personal memories instead of a space")
    p.add_argument("--ai", dest="grant_ai", help="only for this AI")
    p.add_argument("--until", help="ISO 8601 time or a duration (30m, 12h, 7d)")
    p.set_defaults(run=cmd_grant)
    p = grants.add_parser("list", help="the grants in force")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_grant)
    p = grants.add_parser("revoke", help="revoke a grant by its id")
    p.add_argument("grant_id", metavar="ID")
    p.set_defaults(run=cmd_grant)

    trust = sub.add_parser("trust", help="origin marks whose content is trusted (operator)")
    trusts = trust.add_subparsers(dest="trust_command", required=True)
    p = trusts.add_parser("add", help="trust an origin mark, e.g. source:github")
    p.add_argument("source", metavar="SOURCE")
    p.set_defaults(run=cmd_trust)
    p = trusts.add_parser("list", help="the trusted sources")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_trust)
    p = trusts.add_parser("remove", help="stop trusting an origin mark")
    p.add_argument("source", metavar="SOURCE")
    p.set_defaults(run=cmd_trust)

    p = sub.add_parser("deliveries", help="the delivery log (operator)")
    p.add_argument("--ai", dest="ai_filter")
    p.add_argument("--space", dest="space_filter")
    p.add_argument("--last", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_deliveries)

    p = sub.add_parser("serve", help="serve the HTTP API (and the operator's web page)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes on one socket (default 1; with more, /mcp is not served)",
    )
    p.add_argument(
        "--batch-window-ms",
        type=float,
        default=None,
        help="the most a query waits for others to embed with (default 2; 0: no batching)",
    )
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("mcp", help="serve MCP over stdio, in the space of the current folder")
    p.set_defaults(run=cmd_mcp)

    p = sub.add_parser("import", help="bulk import JSON Lines or Parquet (FILE, or - for stdin)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--ai", help="the AI recorded as writer (default: $ESFIS_AI, else 'import')")
    p.add_argument("--batch-size", type=int, default=4096, help="rows embedded and written at a time (at most 8192)")
    p.add_argument("--format", choices=["jsonl", "parquet"], help="default: from the file's extension")
    p.set_defaults(run=cmd_import)

    p = sub.add_parser(
        "reindex",
        help="embed every memory again with the configured model (ESFIS_MODEL), "
        "resumable; stop the servers first (operator)",
    )
    p.add_argument(
        "--batch-size", type=int, default=1024, help="memories embedded and written at a time (at most 8192)"
    )
    p.set_defaults(run=cmd_reindex)

    p = sub.add_parser(
        "sweep",
        help="purge from every partition the rows of writes killed before their catalog "
        "entry, on any machine (operator)",
    )
    p.add_argument(
        "--older-than",
        type=float,
        default=10.0,
        metavar="MINUTES",
        help="leave rows younger than this alone: a write in flight (default 10)",
    )
    p.set_defaults(run=cmd_sweep)

    token = sub.add_parser("token", help="create, list and revoke HTTP tokens").add_subparsers(
        dest="token_command", required=True
    )
    p = token.add_parser("create", help="print a new token (shown once)")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--ai", dest="token_ai", help="the AI this token acts as")
    who.add_argument("--operator", action="store_true", help="a token that administers")
    p.add_argument("--space", dest="token_space", help="with --ai: act only inside this space's subtree")
    p.add_argument(
        "--runs-only",
        action="store_true",
        help="with --ai: a harness's credential that opens run tokens (POST /v1/runs) and nothing else",
    )
    p.set_defaults(run=cmd_token)
    p = token.add_parser("list", help="list tokens (never their secrets)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_token)
    p = token.add_parser("revoke", help="revoke a token by its id")
    p.add_argument("token_id", metavar="ID")
    p.set_defaults(run=cmd_token)
    add_backup_commands(sub)
    return parser


def run(argv: Sequence[str]) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    chosen = [flag for flag in ("allow", "deny", "why") if getattr(args, flag)]
    if len(chosen) > 1 or (chosen and args.command):
        parser.error("use one of --allow, --deny, --why or a command")
    if args.allow:
        cmd_allow_deny("allow", args.allow)
    elif args.deny:
        cmd_allow_deny("deny", args.deny)
    elif args.why:
        cmd_why(args.why, args.json)
    elif args.command:
        args.run(args)
    else:
        parser.print_help()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        run(sys.argv[1:] if argv is None else argv)
    except EsfisError as exc:
        print(f"esfis: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
