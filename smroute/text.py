"""Input text shown in messages: escaped and bounded.

Whatever a user or a peer gave (a file's line, an option's value, a request's
string) reaches a terminal, a log or an error status only through these, so no
raw control byte (an escape sequence, a NUL, a lone carriage return) and no
megabyte of binary ever does:

* :func:`excerpt` quotes one value (``repr``-escaped, cut to ``limit``
  characters);
* :func:`printable` makes a whole message safe to print: control and other
  non-printable characters escaped (line breaks and tabs kept), at most
  ``limit`` characters with the full size named when cut.
"""

from __future__ import annotations

__all__ = ["MESSAGE_CHARS", "excerpt", "printable"]

#: Characters of a message :func:`printable` keeps at most.
MESSAGE_CHARS = 4000


def excerpt(text: str | bytes, limit: int = 60) -> str:
    """``text`` quoted for a message: cut to ``limit`` characters, every
    non-printable character escaped (``repr``), so no raw control bytes reach
    a terminal.  Bytes are decoded as UTF-8 (undecodable bytes escaped)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "backslashreplace")
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return repr(text)


def _escaped(c: str) -> str:
    return c if c.isprintable() or c in "\n\t" else repr(c)[1:-1]


def printable(message: str, limit: int = MESSAGE_CHARS) -> str:
    """``message`` with non-printable characters escaped like ``repr`` does
    (``"\\x1b"``, ``"\\x00"``, ``"\\udcff"``; ``"\\n"`` and ``"\\t"`` kept) and
    cut to ``limit`` characters, ``…(N characters)`` naming the full size when
    cut."""
    if not message.isprintable():
        message = "".join(_escaped(c) for c in message)
    if len(message) <= limit:
        return message
    tail = f"…({len(message)} characters)"
    return message[: max(0, limit - len(tail))] + tail
