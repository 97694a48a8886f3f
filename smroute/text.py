"""Input text shown in messages: escaped and bounded.

Whatever a user or a peer gave (a file's line, an option's value, a request's
string) reaches a terminal, a log or an error status only through these, so no
raw control byte (an escape sequence, a NUL, a lone carriage return) and no
megabyte of binary ever does:

* :func:`excerpt` quotes one value (``repr``-escaped, cut to ``limit``
  characters, ``…(N bytes)`` naming the full size when cut);
* :func:`printable` makes a whole message safe to print: control and other
  non-printable characters escaped (line breaks and tabs kept), at most
  ``limit`` characters with the full size named when cut;
* :func:`bounded_bytes` does the same with a bound in UTF-8 bytes (what a
  gRPC status trailer is limited by).
"""

from __future__ import annotations

__all__ = ["MESSAGE_CHARS", "bounded_bytes", "excerpt", "printable", "utf8_size"]

#: Characters of a message :func:`printable` keeps at most.
MESSAGE_CHARS = 4000


def utf8_size(value: str | bytes) -> int:
    """Size of ``value`` in bytes (``str`` as UTF-8, lone surrogates allowed)."""
    return len(value) if isinstance(value, bytes | bytearray) else len(
        value.encode("utf-8", errors="surrogatepass"))


def excerpt(text: str | bytes, limit: int = 60) -> str:
    """``text`` quoted for a message: ``repr``-escaped (no raw control or
    undecodable bytes), cut to ``limit`` characters with ``…(N bytes)`` naming
    the full size.  Bytes are decoded as UTF-8 (undecodable bytes escaped).
    ``excerpt("a\\x00b")`` is ``'a\\x00b'``."""
    size = utf8_size(text)
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "backslashreplace")
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + f"…({size} bytes)"


def _escaped(message: str) -> str:
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in message)


def printable(message: str, limit: int = MESSAGE_CHARS) -> str:
    """``message`` with non-printable characters escaped like ``repr`` does
    (``"\\x1b"``, ``"\\x00"``, ``"\\udcff"``; ``"\\n"`` and ``"\\t"`` kept) and
    cut to ``limit`` characters, ``…(N characters)`` naming the full size when
    cut."""
    message = _escaped(message)
    if len(message) <= limit:
        return message
    tail = f"…({len(message)} characters)"
    return message[: max(0, limit - len(tail))] + tail


def bounded_bytes(message: str, max_bytes: int) -> str:
    """``message`` escaped as :func:`printable` does, line breaks included
    (``\\n`` -> ``\\\\n``), cut to at most ``max_bytes`` UTF-8 bytes,
    ``…(N bytes)`` naming the full size when cut."""
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message) \
        if not message.isprintable() else message
    size = utf8_size(message)
    if size <= max_bytes:
        return message
    tail = f"…({size} bytes)"
    keep = message.encode("utf-8", errors="surrogatepass")[:max(0, max_bytes - utf8_size(tail))]
    return keep.decode("utf-8", errors="ignore") + tail
