"""The daemon's expected request failures, without gRPC.

The core (:mod:`smroute.service.core`) and the fabric sources raise
:class:`ServiceError` with a :class:`Status`; the gRPC servicer maps the
status to the RPC's status code in one place
(:func:`smroute.service.servicer.status_code`).
"""

from __future__ import annotations

from enum import Enum

__all__ = ["ServiceError", "Status"]


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
    """An expected request failure: ``status`` and a precise ``message``."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
