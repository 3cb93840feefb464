"""How rows rank for a query, over arrays and texts handed in: the cosine, exact or over IVF
lists (``ann.py``); BM25 of a partition's texts (``lexical.py``: the postings; ``words.py``: a
text's terms; ``vocabulary.py``: their ids); the two fused (``fusion.py``); pseudo-relevance
feedback over a recall's candidates (``feedback.py``); and the k best of a long array of scores
(``top.py``).

It may import the vocabulary at the top of ``indexing`` (``rows``: a partition's result, which
feedback scores again) and nothing else of it: it knows neither where rows are stored
(``partitions`` calls it) nor how vectors are made (``embedding``).
"""
