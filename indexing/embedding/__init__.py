"""Text into vectors: the ``Embedder`` protocol and ``load_embedder`` (``embedder.py``), a
model's folder read without loading it (``model_files.py``: name, dimension, prompts), the whole
sentence-transformers pipeline exported to ONNX and run there (``onnx_export.py``,
``onnx_graph.py``, ``onnx_embedder.py``) or on torch (``torch_embedder.py``), concurrent single
texts embedded together (``batching.py``), and a deterministic embedder for tests
(``testing.py``).

It may import the vocabulary at the top of ``indexing`` (``errors``, ``identity``) and nothing
else of it: an embedder knows texts and models, never a partition or a score.
"""
