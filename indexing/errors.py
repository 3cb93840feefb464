"""Errors raised by the indexing layer.

    IndexingError
    ├── StoreMismatch       the store was built with another model or dimension
    ├── StoreBusy           a reindex holds the store
    ├── EmbedderUnavailable the model could not be found or loaded
    ├── BadVector           a supplied vector has the wrong shape or values
    └── ImageBuildFailed    a large partition's image could not be built (the old one serves)

The service façade turns these into the product's error tree (``server.errors``).
"""

from __future__ import annotations


class IndexingError(Exception):
    """Base class of every error the indexing layer raises."""


class StoreMismatch(IndexingError):
    """The vector store records another model or dimension than the embedder in use."""


class StoreBusy(IndexingError):
    """A reindex holds the store: no other process may open it until the reindex is done."""


class EmbedderUnavailable(IndexingError):
    """The embedding model could not be located or loaded."""


class BadVector(IndexingError):
    """A precomputed vector has the wrong dimension or holds non-finite values."""


class ImageBuildFailed(IndexingError):
    """Building a partition's persisted image failed or was killed; the previous version (if
    any) still serves, and the next compaction or forget builds it again."""


class PartitionCorrupt(IndexingError):
    """A partition's file holds bytes no write of esfis left (a frame of its tail fails its
    checksum with frames after it: a kill cuts only the end). Nothing is dropped: the file is
    left as it is, for an operator to restore the partition from a backup."""
