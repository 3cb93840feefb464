"""Paraphrases made without a model, LoCoMo-style (how a person says a thing again in a later
session): a lead-in ("As I said, …"), contractions swapped, common words traded for synonyms,
the last sentence moved first, the closing punctuation dropped. Deterministic for a seed, so a
benchmark's copies are the same on every run.

And their opposite, ``value_changed``: the same sentence with one value changed (a number, a name,
a day, a colour), the update that ``similar`` is for and that must never count as a copy.
"""

from __future__ import annotations

import random
import re

LEAD_INS = ("As I said, ", "Just to repeat: ", "Like I mentioned before, ", "Reminder: ", "Again, ")
CONTRACTIONS = {
    "I am": "I'm",
    "I have": "I've",
    "I will": "I'll",
    "do not": "don't",
    "does not": "doesn't",
    "it is": "it's",
    "can not": "can't",
    "cannot": "can't",
    "would like": "'d like",
    "that is": "that's",
}
SYNONYMS = {
    "want": "would like",
    "need": "require",
    "help": "assist",
    "think": "believe",
    "big": "large",
    "buy": "purchase",
    "start": "begin",
    "maybe": "perhaps",
    "really": "truly",
    "also": "as well",
    "get": "obtain",
    "recently": "lately",
    "currently": "right now",
    "trying": "attempting",
    "looking for": "searching for",
    "suggest": "recommend",
    "tips": "advice",
    "ideas": "suggestions",
}
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "purple")
NAMES = ("Okta", "Berlin", "Sarah", "Toyota", "Python", "Netflix", "Madrid", "Emily")
_SENTENCES = re.compile(r"(?<=[.!?])\s+")


def _sub_words(text: str, table: dict[str, str], rng: random.Random, share: float) -> str:
    for old, new in table.items():
        pattern = re.compile(rf"\b{re.escape(old)}\b", re.IGNORECASE)
        if pattern.search(text) and rng.random() < share:
            text = pattern.sub(new, text)
    return text


def paraphrase(text: str, seed: int = 0) -> str:
    """``text`` said again: the same fact in other words."""
    rng = random.Random(seed)
    out = _sub_words(text, CONTRACTIONS, rng, 0.8)
    out = _sub_words(out, SYNONYMS, rng, 0.7)
    sentences = _SENTENCES.split(out.strip())
    if len(sentences) >= 3 and rng.random() < 0.5:
        sentences = [sentences[-1], *sentences[:-1]]
    out = " ".join(sentences).rstrip(".!")
    if rng.random() < 0.7:
        lead = rng.choice(LEAD_INS)
        first = out[:1]
        # A first word that is a name keeps its capital; a plain one is lowered after the lead-in.
        plain = first.isupper() and out.split(" ", 1)[0].lower() in {"i'm", "the", "my", "we", "it", "what", "how"}
        out = lead + (first.lower() + out[1:] if plain else out)
    return out if out != text else text + " (again)"


def value_changed(text: str, seed: int = 0) -> str | None:
    """``text`` with one value changed (a number, a day, a colour, a name), or None when it holds
    none to change."""
    rng = random.Random(seed)
    numbers = list(re.finditer(r"\b\d+\b", text))
    if numbers:
        m = rng.choice(numbers)
        return text[: m.start()] + str(int(m.group()) + rng.randint(1, 9)) + text[m.end() :]
    for pool in (DAYS, COLOURS):
        for word in pool:
            m = re.search(rf"\b{word}\b", text, re.IGNORECASE)
            if m:
                other = rng.choice([w for w in pool if w != word])
                return text[: m.start()] + other + text[m.end() :]
    names = [m for m in re.finditer(r"(?<=[a-z,] )[A-Z][a-z]+\b", text)]
    if names:
        m = rng.choice(names)
        other = rng.choice([n for n in NAMES if n != m.group()])
        return text[: m.start()] + other + text[m.end() :]
    return None
