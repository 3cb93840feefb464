"""Memory texts as a person sees them: every character that could move, hide or restyle what
is shown is written as an escape, so a text can never pass for anything but itself.

A memory's text is the model's (and so an attacker's) choice. Printed raw, ``\\r`` rewinds the
line, ANSI sequences erase or recolour it, bidirectional overrides reorder it, and a blank line
followed by "Approve this one call?" imitates the prompt it sits in. Escaped here: the C0 and
C1 controls and DEL (category Cc), format characters such as U+202E and zero-width joiners
(Cf), and the line and paragraph separators (Zl, Zp). A backslash is doubled, so the text
``\\x1b`` and the character ESC never look alike.

``one_line`` is for listings (``esfis recall``, ``esfis open``): a newline is ``\\n`` too.
``quoted`` is for an approval: each line of the text behind ``│ ``, so none of its lines can
start where the request's own lines start.
"""

from __future__ import annotations

import unicodedata

QUOTE = "│ "
_NAMED = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\"}
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    if unicodedata.category(char) not in _ESCAPED_CATEGORIES:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def one_line(text: str) -> str:
    """``text`` on one line, every control and invisible character escaped."""
    if text.isprintable() and "\\" not in text:  # the common case, without a per-character loop
        return text
    return "".join(_escape(c) for c in text)


def quoted(text: str) -> str:
    """``text`` as a quoted block: one ``│ `` line per line of the text (a newline starts the
    next; every other control character is escaped on its line)."""
    return "\n".join(QUOTE + one_line(line) for line in text.split("\n"))
