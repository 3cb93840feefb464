"""A long-lived server's upkeep, and recovery at open.

In the background, until the service closes: held calls past their time are settled (their
texts leave the catalog), OAuth requests, refresh tokens and rate counters past their window
are pruned, and recent delivery items left below a batch move into the table indexed by memory
(``server.memories.delivery_moves``), every ``SETTLE_EVERY_S``; the trail is pruned every ``UPKEEP_EVERY_S`` (ages are
counted in days), first soon after start so that a server restarted often still prunes; in the
same round, the index over data is mended after the writes of an older release's server still
running over the home (``server.memories.data_mending``: memories it did not index, rows it wrote
without their memory's time), and at every round after one that found some. A round that fails
is logged and tried again; no request ever sees it.

At open, ``recover`` finishes what killed processes left: the orphan rows of their writes
purged, their forgets finished.
"""

from __future__ import annotations

import logging
import threading
import time

from server.bulk.journal import sweep
from server.catalog import Catalog
from server.facade.connections import Connections, RateCounters
from server.facade.operator import Operator
from server.facade.parts import Parts
from server.faults import said
from server.memories.data_mending import date_undated, index_unindexed
from server.memories.deliveries import DeliveryLog
from server.memories.journal import JOURNALS
from server.metrics import count_upkeep

_log = logging.getLogger("esfis")
UPKEEP_EVERY_S = 6 * 3600  # the trail's pruning: ages are counted in days
UPKEEP_FIRST_S = 60  # after start: a server restarted often still prunes
SETTLE_EVERY_S = 60  # held calls past their time are cleared this often (and at every read)


def keep_up(
    closing: threading.Event,
    operator: Operator,
    connections: Connections,
    rates: RateCounters,
    deliveries: DeliveryLog,
    catalog: Catalog,
) -> None:
    """The upkeep's rounds, until ``closing`` is set (run in a thread of its own)."""
    last_prune = time.monotonic() - UPKEEP_EVERY_S + UPKEEP_FIRST_S  # soon after start, then every few hours
    mending = False  # an older release's server is writing: mend at every round until one finds nothing
    while not closing.wait(SETTLE_EVERY_S):
        try:  # held calls that expired or lost their run: their texts leave the catalog
            operator.settle_approvals()
            count_upkeep("settle")
            connections.prune()  # OAuth requests and refresh tokens past their time
            rates.prune()  # rate counters past their window
        except Exception as exc:
            said(_log, "settling held calls did not finish", exc)
        try:
            deliveries.moves.move_all()  # a quiet server's last few recalls' items
        except Exception as exc:
            said(_log, "moving recent delivery items did not finish", exc)
        pruning = time.monotonic() - last_prune >= UPKEEP_EVERY_S
        if pruning:
            last_prune = time.monotonic()
            try:
                operator.prune_trail()
                count_upkeep("prune_trail")
            except Exception as exc:  # the next round tries again; a request never sees it
                said(_log, "pruning the trail did not finish", exc)
        if pruning or mending:
            mending = _mend_index(catalog, mending)


def _mend_index(catalog: Catalog, was_mending: bool) -> bool:
    """What an older release's server, still running over this home, left out of the index over
    data (``server.memories.data_mending``): whether there was any, so the next round looks again
    (a scan of the table each: every minute only while such a server writes)."""
    try:
        indexed, dated = index_unindexed(catalog), date_undated(catalog)
    except Exception as exc:
        said(_log, "mending the index over data did not finish", exc)
        return was_mending
    count_upkeep("mend_index")
    if indexed or dated:
        _log.info(
            "esfis: the index over data mended after an older release's writes: %d memories indexed, %d rows dated",
            indexed,
            dated,
        )
    return bool(indexed or dated)


def recover(parts: Parts) -> None:
    """Finish what killed processes left: orphan rows of their writes purged, their forgets
    finished. A step that fails is logged and left for the next open."""
    for step in (lambda: sweep(parts.home / JOURNALS, parts.catalog, parts.store), parts.memories.finish_forgets):
        try:
            step()
        except Exception:
            _log.warning("recovery at open did not finish; the next open tries again", exc_info=True)
