"""Partitions, stored and searched. ``store.py`` (``VectorStore``) is the one door: one LanceDB
table per partition, its writes, its search, whole partitions. What it is made of: where the
tables lie (``location.py``, a folder or an S3 prefix), what lies under the root
(``layout.py``), the model the store records (``manifest.py``), who touches a partition when
(``locks.py``, with ``coordination.py``: how processes sharing a store learn of each other's
writes), a partition in memory and its search (``partition.py``, with ``validity.py``: the cut
counts at a time), a large partition's persisted, mapped image (``image.py``: read;
``image_build.py``: built), this machine's mapped images (``image_cache.py``), compaction
(``compaction.py``), a purge's rows out of every file (``purging.py``), Lance's session and
numpy's BLAS (``engine.py``), and what a store touched, per partition (``stats.py``).

It may import ``relevance`` (a partition ranks its rows with it) and the vocabulary at the top
of ``indexing`` (``errors``, ``failpoints``, ``identity``, ``rows``); never ``embedding``: the
store takes vectors however they were made, so opening or reading one never loads a model.
"""
