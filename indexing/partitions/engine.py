"""The engines under the store, set up once per process: Lance's session and numpy's BLAS.

Both defaults cost a server dearly and say nothing of it: Lance's caches grow with every write,
and OpenBLAS spins a thread per core for a search that one thread serves as fast. The store opens
every dataset in ``lance_session`` and calls ``search_on_one_thread`` before its first search.
"""

from __future__ import annotations

from typing import Any

LANCE_CACHE_BYTES = 64 * 1024 * 1024  # each of Lance's index and metadata caches

_blas_limited = False


def lance_session() -> Any:
    """A Lance session (``lance`` itself, not ``lancedb``: its import costs a command line most
    of a second more) with bounded caches: with Lance's defaults the metadata cache grew with
    every write (a 2M-row import: +275 MiB RSS and climbing; bounded, flat at ~500 MiB)."""
    import lance

    return lance.Session(index_cache_size_bytes=LANCE_CACHE_BYTES, metadata_cache_size_bytes=LANCE_CACHE_BYTES)


def search_on_one_thread() -> None:
    """Run numpy's OpenBLAS on one thread in this process, once.

    OpenBLAS splits even a matrix-vector product over every core, and its waiting threads spin:
    on a busy two-core machine that turned a 5 ms search of a large partition into 100 ms at
    the 95th percentile. A search is bound by memory, not arithmetic, so one thread loses
    nothing. Only numpy's own OpenBLAS is limited (a torch embedder's library is not), and an
    image build runs in its own process, where k-means keeps every core.
    """
    global _blas_limited
    if _blas_limited:
        return
    _blas_limited = True
    try:
        from threadpoolctl import ThreadpoolController

        ThreadpoolController().select(internal_api="openblas").limit(limits=1)
    except Exception:  # a numpy on another BLAS: nothing to limit, nothing lost
        pass
