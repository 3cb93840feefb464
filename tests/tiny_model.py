"""A tiny sentence-transformers model, built at test time, offline, in a second or two.

A random BERT (2 layers, 32 wide) with a WordPiece tokenizer made from a vocabulary this file
writes, then the pooling asked for, a Dense layer to a width no real model has (48), and
Normalize; saved with sentence-transformers' own ``save``, prompts included. Its vectors mean
nothing, but they are a model's: the tests compare runtimes, prompts and dimensions with it.
"""

from __future__ import annotations

from pathlib import Path

WORDS = [
    "acme",
    "authentication",
    "uses",
    "auth0",
    "globex",
    "clerk",
    "login",
    "how",
    "does",
    "work",
    "the",
    "a",
    "note",
    "memory",
    "invoices",
    "are",
    "paid",
    "monthly",
    "deploys",
    "on",
    "fridays",
    "mondays",
    "query",
    "passage",
    "search",
    "result",
    "text",
    "title",
    "none",
    "task",
    "what",
    "did",
    "i",
    "buy",
    "personal",
    "preference",
    "staging",
    "database",
    "password",
    "vault",
    "secret",
    "x",
]
WIDTH = 32
DIMENSION = 48  # after the Dense layer: neither the transformer's width nor 384
PROMPTS = {"query": "query: ", "document": "passage: "}


def build_tiny_model(
    folder: Path,
    *,
    pooling: str = "mean",
    prompts: dict[str, str] | None = None,
    dense: bool = True,
    include_prompt: bool = True,
    seed: int = 0,
) -> Path:
    """Write the model into ``folder`` (created) and return it."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    hf = folder.with_name(folder.name + ".hf")
    hf.mkdir(parents=True, exist_ok=True)
    vocab = hf / "vocab.txt"
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = {c for w in WORDS for c in w} | {f"##{c}" for w in WORDS for c in w} | set("?:.,|")
    vocab.write_text("\n".join(specials + sorted(set(WORDS) | pieces)) + "\n")
    word_pieces = BertWordPieceTokenizer(str(vocab), lowercase=True)
    tokenizer = BertTokenizerFast(
        tokenizer_object=word_pieces._tokenizer,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=WIDTH,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).eval().save_pretrained(str(hf))
    tokenizer.save_pretrained(str(hf))
    modules = [
        Transformer(str(hf), max_seq_length=64),
        Pooling(WIDTH, pooling_mode=pooling, include_prompt=include_prompt),
    ]
    if dense:
        modules += [Dense(WIDTH, DIMENSION, activation_function=torch.nn.Tanh()), Normalize()]
    model = SentenceTransformer(modules=modules, device="cpu", prompts=PROMPTS if prompts is None else prompts)
    model.save(str(folder))
    return folder
