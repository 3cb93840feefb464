"""The façade: the one object every interface holds (``Esfis``), its operator (``Operator``),
the parts both are made of (``Parts``), and the edge that builds them from settings."""

from server.catalog.access import one_request  # an interface's request: one look at what decides access
from server.facade.curation import Filter as MemoryFilter  # what the operator's memory verbs select
from server.facade.opening import (
    backup_home,
    export_home,
    open_and_check,
    open_service,
    reindex_store,
    restore_home,
)
from server.facade.operator import Operator
from server.facade.parts import Parts
from server.facade.service import Esfis
from server.models import (  # the places that are not a space
    EVERYWHERE,
    PERSONAL,
    Token,  # what the operator's token verbs answer, for the interfaces' annotations
)
from server.spaces import validate_space_name  # the naming rule, for an interface that reads names in bulk
from server.spaces.rates import RateCount, RateKey  # what the HTTP rate limits count through Esfis.rates

__all__ = [
    "EVERYWHERE",
    "PERSONAL",
    "Esfis",
    "MemoryFilter",
    "Operator",
    "Parts",
    "RateCount",
    "RateKey",
    "Token",
    "backup_home",
    "export_home",
    "one_request",
    "open_and_check",
    "open_service",
    "reindex_store",
    "restore_home",
    "validate_space_name",
]
