"""Vectors and partitions, nothing else.

This package knows partitions by key, the embedder that turns text into vectors, and how a
partition is searched. It has never heard of an AI, a policy or a delivery: those live in
``server``. Dependencies point one way: ``server`` imports ``indexing``, never the reverse.
"""
