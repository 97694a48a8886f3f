"""The daemon's expected request failures, without gRPC.

The core (:mod:`smroute.service.core`) and the fabric sources raise
:class:`ServiceError` with a :class:`Status`; the gRPC servicer maps the
status to the RPC's status code in one place
(:func:`smroute.service.rpc.servicer.status_code`).

Request text echoed into a message goes through :func:`echo` (quoted,
escaped like ``repr``, at most :data:`ECHO_CHARS` characters, with the full
size named when cut); every message that leaves the daemon goes through
:func:`bounded` (control characters escaped, at most :data:`MAX_MESSAGE_BYTES`
UTF-8 bytes), so an error can never outgrow gRPC's 8 KiB metadata limit
(which would turn it into RESOURCE_EXHAUSTED) nor carry raw bytes.
"""

from __future__ import annotations

from enum import Enum

from smroute.text import bounded_bytes, excerpt

__all__ = ["ECHO_CHARS", "MAX_MESSAGE_BYTES", "ServiceError", "Status", "bounded", "echo",
           "shown"]

#: Characters of a request value an error message shows at most.
ECHO_CHARS = 200
#: UTF-8 bytes of an error message at most (gRPC percent-encodes non-ASCII
#: bytes in the status trailer, 3 characters each: 2,000 bytes stay under 8 KiB).
MAX_MESSAGE_BYTES = 2000


def echo(value: str | bytes, limit: int = ECHO_CHARS) -> str:
    """``value`` as an error message shows it (:func:`smroute.text.excerpt`
    with :data:`ECHO_CHARS`)."""
    return excerpt(value, limit)


def shown(value: str) -> str:
    """A name or path from a request as a message shows it: itself when short
    and printable, else :func:`echo` of it."""
    return value if len(value) <= ECHO_CHARS and value.isprintable() else echo(value)


def bounded(message: str, max_bytes: int = MAX_MESSAGE_BYTES) -> str:
    """``message`` escaped and cut to at most ``max_bytes`` UTF-8 bytes
    (:func:`smroute.text.bounded_bytes`)."""
    return bounded_bytes(message, max_bytes)


class Status(Enum):
    """Why a request failed (named as gRPC's status codes, which they map to)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    NOT_FOUND = "NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAVAILABLE = "UNAVAILABLE"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    INTERNAL = "INTERNAL"


class ServiceError(Exception):
    """An expected request failure: ``status`` and a precise ``message``
    (always :func:`bounded`)."""

    def __init__(self, status: Status, message: str) -> None:
        message = bounded(message)
        super().__init__(message)
        self.status = status
        self.message = message
