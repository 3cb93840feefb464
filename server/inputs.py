"""What an agent may send: each input's limit and description, defined once for every interface.

The core enforces the limits (``server.memories.input``, ``server.facade``, ``server.barrier``,
``server.spaces.tokens``); HTTP fields, MCP parameters and CLI help take their descriptions and
their schema bounds from here, so a limit changed here changes every interface's text with it.
The descriptions are written for a model reading a tool's schema as much as for a person reading
the OpenAPI document: what the input is, its form, and its bound.

Names are the core's: origin marks are ``labels`` everywhere (docs/design.md §7).
"""

from __future__ import annotations

from datetime import timedelta

from server.labels import MAX_ORIGINS
from server.models import DEFAULT_LIMIT, MAX_LIMIT

# Defined here, not in the core module that checks them, so that an interface can state them
# without importing that module (docs/layout.md: interfaces import only the doors). The recall
# limit (``server.models``) and the origin marks' cap (``server.labels``) were already
# within an interface's reach and stay where they are checked.
MAX_TEXT_BYTES = 32 * 1024  # a memory's text, in UTF-8 bytes
MAX_QUERY_BYTES = 4 * 1024  # a recall's query, in UTF-8 bytes
MAX_SHARED = 100  # memories one context reference names
MAX_PATH_CHARS = 4096  # a cwd or a folder on the server's machine (Linux's PATH_MAX)
MAX_BATCH = 8192  # rows an import embeds and writes at a time
ERRORS_KEPT = 1000  # an import's report keeps the first this many errors; it counts them all
DEFAULT_BATCH = 4096
MAX_DATA_BYTES = 4 * 1024  # a memory's data (metadata), as compact JSON in UTF-8 bytes
MAX_DATA_DEPTH = 4  # objects and arrays nested in a memory's data, the data itself counted as 1
MAX_DATA_KEYS = 64  # keys at the top of a memory's data
MAX_DATA_KEY_CHARS = 64  # a key's name, anywhere in the data
MAX_FILTER_BYTES = 4 * 1024  # a recall's filter, as compact JSON
MAX_FILTER_FIELDS = 32  # fields one filter tests
MAX_FILTER_VALUES = 256  # values one $in lists
RUN_TTL = timedelta(hours=12)  # a run token's life unless asked
MAX_RUN_TTL = timedelta(days=7)


def size(n: int) -> str:
    """A byte count as the messages say it: ``32 KiB``, ``1024 MiB``."""
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def _hours(life: timedelta) -> str:
    hours = int(life.total_seconds()) // 3600
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"


DURATION = "an ISO 8601 time, or a duration such as 30m, 12h, 7d"

TEXT = f"the memory: one self-contained fact, at most {size(MAX_TEXT_BYTES)} of UTF-8"
NEW_TEXT = f"the corrected or updated memory, at most {size(MAX_TEXT_BYTES)} of UTF-8"
QUERY = f"what to recall, in plain words, at most {size(MAX_QUERY_BYTES)} of UTF-8"
LIMIT = f"how many memories at most, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})"
PERSONAL = "true: a personal memory (no space), which reaches every space, instead of one in the caller's space"
LABELS = (
    "origin marks, when the content comes from outside (slack, email, a webhook, a web page): "
    f"source:NAME, a bare NAME taken as source:NAME; at most {MAX_ORIGINS}; untrusted unless an "
    "operator trusts that source"
)
DATA = (
    "metadata of your own on the memory, for recall's filter to select by (a kind, a project, a date, "
    "a score): a JSON object, keys 1 to "
    f"{MAX_DATA_KEY_CHARS} characters not starting with $, at most {MAX_DATA_KEYS} keys at the top, "
    f"nested at most {MAX_DATA_DEPTH} deep, {size(MAX_DATA_BYTES)} as compact JSON; default none"
)
REPLACE_DATA = DATA.replace("default none", "default none: the new version keeps none of the old one's data")
FILTER = (
    "select by the memories' data before ranking: a JSON object of field: condition, all of which "
    'must hold. {"kind": "decision"} is equality; a condition may be {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|'
    '"$lte": value}, {"$in": [values]} or {"$exists": true|false}. A field is a key of data, "a.b" a key '
    "inside one; ranges compare numbers, or ISO 8601 times with a timezone as instants. With no query: "
    f"the newest matching memories. At most {MAX_FILTER_FIELDS} fields, {size(MAX_FILTER_BYTES)}"
)
VALID_UNTIL = f"when the memory stops being current: {DURATION}; default: never"
DEDUPE = (
    "true (default): when the target space already holds this fact as a current memory, store nothing "
    "and answer that memory with duplicate_of set; false: store it regardless"
)
AS_OF = (
    "recall the memories valid at this ISO 8601 time (not after now) instead of those current now: "
    "memories superseded since are included, forgotten ones never"
)
SPACE = "the caller's space (give this or cwd; neither: no space, personal only)"
CWD = (
    "the caller's working directory; its registered folder decides the space (docs/design.md §2); "
    f"an absolute path, at most {MAX_PATH_CHARS} characters"
)
NEW_SPACE = "the new memory's space (in the caller's reach); default: the old memory's"
MEMORY_IDS = f"1 to {MAX_SHARED} ids of memories the caller sees"
TTL = (
    f"how long the run token lasts: seconds, or a duration such as 30m, 12h, 7d "
    f"(default {_hours(RUN_TTL)}, at most {_hours(MAX_RUN_TTL)})"
)
