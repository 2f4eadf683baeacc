"""The service's error family and its single mapping to Pulsar's `{"reason": ...}` responses.

    ServiceError                    a request that cannot be done, with Pulsar's reason text
    ├── InvalidInput                400
    ├── NotAuthorized               401
    ├── Forbidden                   403
    ├── NotFound                    404
    ├── NotAllowed                  405
    ├── Conflict                    409
    ├── PreconditionFailed          412
    ├── PayloadTooLarge             413
    ├── UnsupportedMediaType        415
    └── ServiceUnavailable          503

Errors of the layers below are mapped here too (one table, `STATUS_BY_ERROR`): the metadata
store being unreachable is 503, a lost compare-and-swap after all retries is 409, a placement
that cannot be satisfied is 412 and a malformed placement
request (E < Qw, Qw < Qa, sizes <= 0) is 400. Of the storage engine's: an unknown ledger,
entry or position is 404, a lost metadata race 409, a closed ledger client (the service
stopping) 503, any other ledger failure 500.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from metastore import errors as store_errors
from placement import errors as placement_errors
from storage import ledger as ledger_errors
from storage import managed_ledger as managed_ledger_errors

log = logging.getLogger(__name__)

# What a `%2F` inside a path segment becomes while routing (api.http.encoded_slash), so it
# stays apart from `/`; refused by every name rule (api.naming), and shown as `/` in
# a reason.
ENCODED_SLASH = "\x00"


class ServiceError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidInput(ServiceError):
    pass


class NotAuthorized(ServiceError):
    pass


class Forbidden(ServiceError):
    pass


class NotFound(ServiceError):
    pass


class NotAllowed(ServiceError):
    pass


class NotAcceptable(ServiceError):
    """406: Pulsar's answer to a partition count out of bounds on create."""


class Conflict(ServiceError):
    pass


class PreconditionFailed(ServiceError):
    pass


class UnprocessableEntity(ServiceError):
    """422: Pulsar's answer to a partition count it cannot grow to."""


class PayloadTooLarge(ServiceError):
    """413: a body over httpMaxRequestSize, or a message over maxMessageSize; nothing stored."""


class UnsupportedMediaType(ServiceError):
    pass


class ServiceUnavailable(ServiceError):
    pass


STATUS_BY_ERROR: dict[type[Exception], int] = {
    InvalidInput: 400,
    NotAuthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    NotAllowed: 405,
    NotAcceptable: 406,
    Conflict: 409,
    PreconditionFailed: 412,
    PayloadTooLarge: 413,
    UnprocessableEntity: 422,
    UnsupportedMediaType: 415,
    ServiceUnavailable: 503,
    ServiceError: 500,
    store_errors.OutcomeUnknown: 503,  # the reason says the write may have been applied
    store_errors.Unanswered: 503,  # settled by the store before it reaches a caller
    store_errors.Unavailable: 503,
    store_errors.BadVersion: 409,
    store_errors.AlreadyExists: 409,
    store_errors.NotFound: 404,
    store_errors.ContentDeserializationError: 500,
    store_errors.MetadataFormatError: 500,
    store_errors.InvalidValue: 400,
    store_errors.ValueTooLarge: 413,
    store_errors.Compacted: 500,  # the watch stream answers it with `event: resync`
    store_errors.MetastoreError: 500,
    placement_errors.NotEnoughBookies: 412,
    placement_errors.InvalidPlacementRequest: 400,
    placement_errors.PlacementError: 500,
    ledger_errors.NoSuchLedger: 404,
    ledger_errors.NoSuchEntry: 404,
    ledger_errors.LedgerClosed: 500,
    ledger_errors.LedgerFenced: 500,
    ledger_errors.AddFailed: 500,
    ledger_errors.EnsembleChangeFailed: 500,
    ledger_errors.RecoveryFailed: 500,
    ledger_errors.ReadFailed: 500,
    ledger_errors.MetadataConflict: 409,
    ledger_errors.ClientClosed: 503,  # the service is stopping: a retry reaches a running one
    ledger_errors.EntryTooLarge: 413,
    ledger_errors.LedgerError: 500,
    managed_ledger_errors.ManagedLedgerNotFound: 404,
    managed_ledger_errors.ManagedLedgerClosed: 500,
    managed_ledger_errors.InvalidPosition: 404,
    managed_ledger_errors.ManagedLedgerFenced: 404,  # the topic was deleted meanwhile
    managed_ledger_errors.NamespaceNotWritable: 409,  # being deleted (or gone)
    managed_ledger_errors.ManagedLedgerError: 500,
}

REASON_BY_STORE_ERROR: dict[type[Exception], str] = {
    store_errors.BadVersion: "Concurrent modification",
    store_errors.AlreadyExists: "Concurrent modification",
    store_errors.NotFound: "Not found",
}


def status_for(exc: Exception) -> int:
    for kind in type(exc).__mro__:
        if kind in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[kind]
    return 500


def reason_for(exc: Exception) -> str:
    if isinstance(exc, ServiceError):
        return exc.reason
    for kind in type(exc).__mro__:
        if kind in REASON_BY_STORE_ERROR:
            return REASON_BY_STORE_ERROR[kind]
    return str(exc)


# What the single handler maps: everything else is a bug, answered 500 by the server.
KNOWN_ERRORS: tuple[type[Exception], ...] = (
    ServiceError,
    store_errors.MetastoreError,
    placement_errors.PlacementError,
    ledger_errors.LedgerError,
    managed_ledger_errors.ManagedLedgerError,
)


def error_status_and_reason(exc: Exception) -> tuple[int, str]:
    """The status and reason of a known error (server-side ones are logged)."""
    status = status_for(exc)
    if status >= 500:
        log.warning("request failed with %d: %s", status, exc)
    return status, public_reason(reason_for(exc))


def public_reason(reason: str) -> str:
    """A reason as the client wrote its names: an encoded slash kept inside a path segment
    (`api.http.encoded_slash`) is a `/` again, as Jersey decodes it."""
    return reason.replace(ENCODED_SLASH, "/")


def error_response(status: int, reason: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"reason": public_reason(reason)})


async def _handle_known(_: Request, exc: Exception) -> JSONResponse:
    return error_response(*error_status_and_reason(exc))


async def _handle_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    response = error_response(exc.status_code, str(exc.detail))
    if exc.status_code == 405:  # Jersey lists every method of the path, not one route's
        response.headers["Allow"] = ", ".join(allowed_methods(request))
    elif exc.headers:
        response.headers.update(exc.headers)
    return response


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route answers on the request's path (asked of the router itself,
    so included routers and mounts count too)."""
    routes = request.app.router.routes
    return [
        method
        for method in HTTP_METHODS
        if any(r.matches({**request.scope, "method": method})[0] == Match.FULL for r in routes)
    ]


async def _handle_unexpected(_: Request, exc: Exception) -> JSONResponse:
    """A bug still answers in Pulsar's shape; the log names the error type, never a body."""
    log.error("unexpected %s while serving a request", type(exc).__name__)
    return error_response(500, f"Internal server error: {type(exc).__name__}")


def validation_reason(errors: Sequence[Any]) -> str:
    """The 400 reason for pydantic validation errors: the first error's location and message
    (one wording for FastAPI's parameter checks and the bodies parsed by hand)."""
    first = errors[0] if errors else {}
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    message = first.get("msg", "invalid request")
    return f"Invalid request: {where}: {message}" if where else str(message)


async def _handle_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(400, validation_reason(exc.errors()))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _handle_unexpected)
    for kind in KNOWN_ERRORS:
        app.add_exception_handler(kind, _handle_known)
    app.add_exception_handler(StarletteHTTPException, _handle_http)
    app.add_exception_handler(RequestValidationError, _handle_validation)
