"""Vectors and partitions, nothing else.

This package knows partitions by key, the embedder that turns text into vectors, and how a
partition is searched. It has never heard of an AI, a policy or a delivery: those live in
``server``. Dependencies point one way: ``server`` imports ``indexing``, never the reverse.

Inside, three rooms, each a subpackage whose ``__init__`` says what it may import:

    embedding/     text into vectors: the embedder, its model's files, ONNX and torch, batching
    relevance/     how rows rank for a query: cosine (exact and IVF), BM25, their fusion, feedback
    partitions/    partitions stored and searched: the VectorStore and what it is made of

``partitions`` imports ``relevance``; neither imports ``embedding``, and ``embedding`` imports
neither (``tests/test_architecture.py``). The modules at this level are the vocabulary all
three share, and import none of them: ``errors`` (the error tree), ``identity`` (what a
store's vectors were made with), ``rows`` (what goes into a partition and comes out of a
search) and ``failpoints`` (the named steps where a test kills a write).
"""
