"""The operator's commands that move memories in bulk (``server.bulk`` holds the logic): import,
export, backup and restore, reindex, the sweep of orphan rows, and the check of a whole home.

Each draws a progress bar on stderr at a terminal and ends with one summary line; the bulk
stack (tqdm, the importer) is imported only when such a command runs.
"""

from __future__ import annotations

import math
import os
import sys
from argparse import Namespace
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from server.cli.context import acting_ai, dumps, open_service, progress, settings
from server.cli.registry import arg, command, one_of
from server.clock import iso
from server.errors import BadImportLine, InvalidInput
from server.home import private_file
from server.inputs import MAX_BATCH
from server.render import counted

# ``sweep --older-than``'s bound, in minutes (about 190 years): any row that old predates every
# store, and the clock's arithmetic stays in range. The least age is the core's (it says so).
MOST_MINUTES = 10**8


class _Report(Protocol):
    @property
    def rows(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def errors(self) -> list[tuple[int, str]]: ...
    def summary(self) -> str: ...


def _summarise(report: _Report, kept: str) -> None:
    """The failed rows by line (the first the report kept) on stderr, then the summary."""
    for line, reason in report.errors:
        print(f"line {line}: {reason}", file=sys.stderr)
    if report.failed > len(report.errors):
        print(f"... and {report.failed - len(report.errors)} more errors", file=sys.stderr)
    print(report.summary())
    if report.failed:
        raise BadImportLine(f"{report.failed} of {report.rows} rows failed (listed above); the rest were {kept}")


@command(
    "import",
    "bulk import JSON Lines or Parquet (FILE, or - for stdin)",
    arg("file", metavar="FILE"),
    arg("--ai", help="the AI recorded as writer (default: $ESFIS_AI, else 'import')"),
    arg(
        "--batch-size",
        type=int,
        default=None,  # the importer's
        help=f"rows embedded and written at a time (at most {MAX_BATCH})",
        field="batch_size",
    ),
    arg("--format", choices=["jsonl", "parquet"], help="default: from the file's extension"),
    arg("--restore", action="store_true", help="FILE is an esfis export: keep its ids, labels and validity"),
    arg(
        "--create-spaces",
        action="store_true",
        help="create the spaces rows name that do not exist yet (each is listed); without it such a row fails",
    ),
)
def import_(args: Namespace) -> None:
    """A progress bar on a terminal, errors by line, then the summary."""
    if args.restore:
        if args.create_spaces:  # said, not ignored: every row would fail on its missing space
            raise InvalidInput(
                "--create-spaces does not apply to --restore: a restore never creates spaces; "
                "create them first (esfis space add --from FILE)",
                field="create_spaces",
            )
        _import_restore(args)
        return
    ai = acting_ai(args, default="import")
    source = args.file
    fmt = args.format or ("parquet" if Path(source).suffix.lower() in (".parquet", ".pq") else "jsonl")
    if source == "-" and fmt == "parquet":
        raise InvalidInput("Parquet cannot be read from stdin: name the file", field="file")
    if source != "-" and not Path(source).is_file():
        raise InvalidInput(f"no file {source!r}", field="file")
    with open_service() as service, progress(" rows", total=None, smoothing=0.1) as bar:
        if fmt == "parquet":

            def sized(total: int) -> None:
                bar.total = total

            report = service.operator.import_parquet(
                source,
                ai=ai,
                batch_size=args.batch_size,
                progress=bar.update,
                sized=sized,
                create_spaces=args.create_spaces,
            )
        else:
            with open(source, "rb") if source != "-" else nullcontext(sys.stdin.buffer) as lines:
                report = service.operator.import_jsonl(
                    lines, ai=ai, batch_size=args.batch_size, progress=bar.update, create_spaces=args.create_spaces
                )
    for name in report.created_spaces:  # no space is created silently
        print(f"created space {name}", file=sys.stderr)
    _summarise(report, "imported")


def _import_restore(args: Namespace) -> None:
    """``esfis import --restore FILE``: an export's rows with their ids, labels and validity."""
    if args.file != "-" and not os.path.isfile(args.file):
        raise InvalidInput(f"no file {args.file!r}", field="file")
    with (
        open_service() as service,
        open(args.file, "rb") if args.file != "-" else nullcontext(sys.stdin.buffer) as lines,
        progress(" rows") as bar,
    ):
        report = service.operator.import_restore(lines, progress=bar.update)
    _summarise(report, "restored")


@command(
    "reindex",
    "embed every memory again with the configured model (ESFIS_MODEL), resumable; stop the servers first (operator)",
    arg(
        "--batch-size",
        type=int,
        default=None,  # the reindex's
        help=f"memories embedded and written at a time (at most {MAX_BATCH})",
        field="batch_size",
    ),
)
def reindex(args: Namespace) -> None:
    """Every memory embedded again with the configured model."""
    from server.facade import reindex_store

    with progress(" memories") as bar:
        report = reindex_store(settings(), batch=args.batch_size, progress=bar.update)
    if report.model_before == report.model_after:
        print(f"the store is already embedded with {report.model_after}: nothing to do")
        return
    print(
        f"reindexed {counted(report.rows, 'memory')} in {counted(report.partitions, 'partition')} with {report.model_after} "
        f"(was {report.model_before}) in {report.seconds:.1f} s"
    )


@command(
    "sweep",
    "purge from every partition the rows of writes killed before their catalog entry, on any machine (operator)",
    arg(
        "--older-than",
        type=float,
        default=10.0,
        metavar="MINUTES",
        help="leave rows younger than this alone: a write in flight (default 10)",
        field="older_than",
    ),
)
def sweep(args: Namespace) -> None:
    """Purge rows no catalog entry names, from every partition."""
    if not math.isfinite(args.older_than) or abs(args.older_than) > MOST_MINUTES:
        raise InvalidInput(f"--older-than must be a number of minutes, at most {MOST_MINUTES}", field="older_than")
    with open_service() as service:
        purged, partitions = service.operator.sweep_orphans(timedelta(minutes=args.older_than))
    print(f"purged {counted(purged, 'orphan row')} from {counted(partitions, 'partition')}")


@command(
    "check",
    "whether the home is whole: catalog and partitions agree, nothing a killed write left (operator)",
    arg(
        "--repair", action="store_true", help="mend what can be mended (safe beside running servers); say what is left"
    ),
    arg("--json", action="store_true", help="print the report as JSON"),
)
def check(args: Namespace) -> None:
    """One line per finding and a summary; exit status 1 while something is wrong and left."""
    from server.errors import EsfisError
    from server.facade import open_and_check

    report = open_and_check(settings(), repair=args.repair)
    if args.json:
        print(dumps(report.as_dict()))
    else:
        print("\n".join(report.summary()))
    if not report.whole:
        left = len(report.left)
        raise EsfisError(
            f"the home is not whole: {counted(left, 'finding')} "
            + ("left after the repair" if report.repaired else "(esfis check --repair mends what it can)")
        )


@command(
    "dedupe",
    "fold a space's copies (memories of the same fact) into their earliest memory (operator)",
    arg("--space", metavar="SPACE", help="the space to clean up (never another: copies are folded within it)"),
    arg("--personal", action="store_true", help="clean up personal memories instead of a space"),
    arg("--dry-run", action="store_true", help="count the copies, change nothing", field="dry_run"),
)
def dedupe(args: Namespace) -> None:
    """Supersede every later copy by its earliest memory; a rerun after a kill finishes the job."""
    from server.models import PERSONAL

    if (args.space is None) == (not args.personal):
        raise InvalidInput("name one place: --space SPACE or --personal", field="space")
    with open_service() as service:
        report = service.operator.dedupe(PERSONAL if args.personal else args.space, dry_run=args.dry_run)
    print(report.summary())


# -- backup, restore, export ----------------------------------------------------------------------


@command(
    "backup",
    "a consistent copy of this home into an empty folder DIR, while servers keep working (operator)",
    arg("dir", metavar="DIR"),
    arg(
        "--key-file",
        metavar="FILE",
        help="key the manifest with this key (64 hex characters; default: $ESFIS_BACKUP_KEY, else the home's backup.key)",
        field="key_file",
    ),
)
def backup(args: Namespace) -> None:
    from server.facade import backup_home

    with progress(" memories") as bar:
        report = backup_home(args.dir, settings(), key_file=args.key_file, progress=bar.update)
    print(
        f"backed up {counted(report.memories, 'memory')} in {counted(report.partitions, 'partition')} to {report.path} "
        f"(as of {iso(report.taken_at)}) in {report.seconds:.1f} s ({report.rate:.0f} memories/s); "
        f"keyed with key {report.key.id} from {report.key.origin}: a restore needs it"
    )


@command(
    "restore",
    "restore the backup in DIR into this (empty) ESFIS_HOME (operator)",
    arg("dir", metavar="DIR"),
    arg(
        "--forgets-from",
        metavar="HOME",
        help="the live home (or its postgresql:// catalog): forget again every memory it forgot since the backup",
    ),
    one_of(
        arg(
            "--key-file",
            metavar="FILE",
            help="the key the backup was made with (default: $ESFIS_BACKUP_KEY, else the --forgets-from home's backup.key)",
            field="key_file",
        ),
        arg(
            "--no-key",
            action="store_true",
            help="restore without the key: the manifest goes unverified, so the backup is only as safe as its folder",
            field="no_key",
        ),
    ),
)
def restore(args: Namespace) -> None:
    from server.facade import restore_home

    with progress(" memories") as bar:
        report = restore_home(
            args.dir,
            settings(),
            forgets_from=args.forgets_from,
            key_file=args.key_file,
            no_key=args.no_key,
            progress=bar.update,
        )
    print(
        f"restored {counted(report.memories, 'memory')} in {counted(report.partitions, 'partition')} into {report.home} "
        f"(backup of {iso(report.taken_at)}; {report.forgets_applied} later forgets applied) "
        f"in {report.seconds:.1f} s"
    )


@command(
    "export",
    "every current memory as JSON Lines, with its labels (operator)",
    arg(
        "--space",
        dest="export_space",
        action="append",
        metavar="S",
        help="only this space (repeatable; 'personal' for personal memories)",
    ),
    arg("--vectors", action="store_true", help="with each memory's vector"),
    arg("--output", "-o", metavar="FILE", help="write here (a new file) instead of stdout"),
)
def export(args: Namespace) -> None:
    """Every current memory as JSON Lines, on stdout or into --output; the summary on stderr."""
    from server.facade import export_home

    if args.output and os.path.lexists(args.output):
        raise InvalidInput(f"{args.output} exists: an export goes into a new file", field="output")
    with (
        private_file(args.output) if args.output else nullcontext(sys.stdout.buffer) as out,  # 0600: it holds texts
        progress(" memories") as bar,
    ):
        report = export_home(
            out, settings(), spaces=args.export_space or None, vectors=args.vectors, progress=bar.update
        )
    print(
        f"exported {counted(report.memories, 'memory')} from {counted(report.partitions, 'partition')} in {report.seconds:.1f} s",
        file=sys.stderr,
    )
