"""The operator's commands over the data barrier: runs and their trails, grants that let data
cross from one space into another, and the origin marks whose content is trusted."""

from __future__ import annotations

from argparse import Namespace

from server import inputs, render
from server.cli.context import dumps, open_service, shapes
from server.cli.registry import arg, command, group
from server.errors import InvalidInput
from server.models import PERSONAL
from server.settings import TRAIL_DAYS


@command(
    "runs",
    "the runs, newest last; end one; prune the trail (operator)",
    arg("--last", type=int, default=20),
    arg("--json", action="store_true"),
)
def runs(args: Namespace) -> None:
    with open_service() as service:
        found = service.operator.run_list(last=args.last)
    print(dumps({"runs": [shapes().RunOut.of(r).dump() for r in found]}) if args.json else render.runs_table(found))


@command(
    "runs end",
    "end run RUN: its run token stops; a standing run starts afresh",
    arg("run_id", metavar="RUN"),
    arg("--json", action="store_true"),
)
def runs_end(args: Namespace) -> None:
    with open_service() as service:
        run = service.operator.end_run(args.run_id, by="cli")
    print(dumps(shapes().RunOut.of(run).dump()) if args.json else f"ended {run.id}")


@command(
    "runs prune",
    f"prune the runs that are over (default: older than $ESFIS_TRAIL_DAYS, {TRAIL_DAYS})",
    arg("--days", type=int, default=None),
)
def runs_prune(args: Namespace) -> None:
    with open_service() as service:
        pruned = service.operator.prune_trail(days=args.days)
    print(
        f"pruned {pruned.runs} runs, {pruned.steps} steps and {pruned.tokens} run tokens; "
        f"ended {pruned.ended} idle sessions; pruned {pruned.records} older records "
        "(deliveries, context references, decided held calls)"
    )


@command("trail", "every step of one run (operator)", arg("run_id", metavar="RUN"), arg("--json", action="store_true"))
def trail(args: Namespace) -> None:
    with open_service() as service:
        run, steps = service.operator.trail(args.run_id)
    print(dumps(shapes().TrailOut.of(run, steps).dump()) if args.json else render.trail_text(run, steps))


# -- grants -----------------------------------------------------------------------------------

group("grant", "let data of one space be written into another (operator)")


@command(
    "grant add",
    "data of FROM's subtree may be written into TO (or --personal)",
    arg("source", metavar="FROM"),
    arg("to", metavar="TO", nargs="?"),
    arg("--personal", action="store_true", help="into personal memories instead of a space"),
    arg("--ai", dest="grant_ai", help="only for this AI"),
    arg("--until", help=inputs.DURATION),
)
def grant_add(args: Namespace) -> None:
    if (args.to is None) == (not args.personal):
        raise InvalidInput("grant add takes TO or --personal (exactly one)", field="to")
    with open_service() as service:
        grant = service.operator.add_grant(
            args.source, PERSONAL if args.personal else args.to, ai=args.grant_ai, until=args.until
        )
    print(grant.id)


@command("grant list", "the grants in force", arg("--json", action="store_true"))
def grant_list(args: Namespace) -> None:
    with open_service() as service:
        grants = service.operator.grants()
    print(
        dumps({"grants": [shapes().GrantOut.of(g).dump() for g in grants]})
        if args.json
        else render.grants_table(grants)
    )


@command("grant revoke", "revoke a grant by its id", arg("grant_id", metavar="ID"))
def grant_revoke(args: Namespace) -> None:
    with open_service() as service:
        service.operator.revoke_grant(args.grant_id)
    print(f"revoked {args.grant_id}")


# -- trusted sources ----------------------------------------------------------------------------

group("trust", "origin marks whose content is trusted (operator)")


@command("trust add", "trust an origin mark, e.g. source:github", arg("source", metavar="SOURCE"))
def trust_add(args: Namespace) -> None:
    with open_service() as service:
        trusted = service.operator.trust(args.source)
    print(trusted.source)


@command("trust list", "the trusted sources", arg("--json", action="store_true"))
def trust_list(args: Namespace) -> None:
    with open_service() as service:
        sources = service.operator.trusted_sources()
    if args.json:
        print(dumps({"trusted_sources": [shapes().TrustedOut.of(t).dump() for t in sources]}))
    else:
        print("\n".join(t.source for t in sources) or "(no trusted sources: every origin mark is untrusted)")


@command("trust remove", "stop trusting an origin mark", arg("source", metavar="SOURCE"))
def trust_remove(args: Namespace) -> None:
    with open_service() as service:
        service.operator.distrust(args.source)
    print(f"{args.source} is untrusted again")


# -- held calls ---------------------------------------------------------------------------------


@command(
    "approvals",
    "calls held for a person's approval, each as the person must read it (operator)",
    arg("--all", action="store_true", dest="every", help="every status, not only the pending ones"),
    arg("--last", type=int, default=100),
    arg("--json", action="store_true"),
)
def approvals(args: Namespace) -> None:
    with open_service() as service:
        views = service.operator.approvals(status=None if args.every else "pending", last=args.last)
    if args.json:
        out = shapes().HeldCallOut
        print(
            dumps(
                {"approvals": [out.of_view(v.held, rendering=v.message, approvable=v.approvable).dump() for v in views]}
            )
        )
    else:
        print(render.approvals_text(views))


@command(
    "approvals approve",
    "apply held call ID now, as its run's step (or void it, saying why, if it no longer can be)",
    arg("approval_id", metavar="ID"),
    arg("--json", action="store_true"),
)
def approvals_approve(args: Namespace) -> None:
    _decide(args, approve=True)


@command(
    "approvals decline",
    "decline held call ID: nothing is applied, and its text leaves the catalog",
    arg("approval_id", metavar="ID"),
    arg("--json", action="store_true"),
)
def approvals_decline(args: Namespace) -> None:
    _decide(args, approve=False)


def _decide(args: Namespace, *, approve: bool) -> None:
    with open_service() as service:
        held = service.operator.decide_approval(args.approval_id, approve=approve, by="cli")
    if args.json:
        print(dumps(shapes().ApprovalOut.of(held).dump()))
    else:
        print(
            f"{held.id} {held.status}"
            + (f": {held.reason}" if held.status in ("void", "expired") else "")
            + (f" ({held.result})" if held.result else "")
        )
