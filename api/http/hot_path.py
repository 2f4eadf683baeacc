"""`set-bookie-rack` without FastAPI's per-request machinery.

`POST /admin/v2/bookies/racks-info/{bookie}` is the write that rack automation repeats for
every bookie of a cluster. FastAPI spends ~1.5 ms of CPU on each request before and after
the route runs (matching across every router, solving dependencies, validating parameters
with pydantic, exception middleware): ten times what uvicorn costs, and more than the write
itself once group commit shares one etcd transaction among concurrent writers.

This ASGI wrapper, outside the whole FastAPI app, serves the well-formed request itself: a
bookie id in one path segment (no encoded slash) and a body sent as `application/json`,
parsed by the route's own function (`racks.parse_rack_write`). It authorises through the
same `api.auth.authorization.authorize` and calls the same `RackService.set_bookie` as the route,
within the same request deadline, and maps errors through the same table
(`api.errors.error_status_and_reason`), so the answer is the route's answer. Any other
request (no or other content type, a body the parse refuses, a path with a root prefix) goes
on, body replayed, to the FastAPI app, whose route stays the reference (it also decides which
of several errors a bad request reports first) and is what `openapi.yaml` documents.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from api.auth.authorization import Access, authorize
from api.auth.client_certificates import client_certificate
from api.change_history import change_context
from api.errors import KNOWN_ERRORS, InvalidInput, error_status_and_reason
from api.http.deadline import send_response, send_timed_out
from api.http.encoded_slash import has_encoded_slash
from api.http.request_rules import read_body, replay
from api.services.racks import RackService, parse_rack_write
from metastore import layer_times
from metastore.change_history import recording
from metastore.codec import dump_json

RACK_PATH_PREFIX = "/admin/v2/bookies/racks-info/"
UPDATE_OPERATION = "updateBookieRackInfo"  # the route's operation id, for `authorize`
JSON_CONTENT_TYPE = b"application/json"


class RackWriteHotPath:
    def __init__(self, app: FastAPI, deadline_seconds: float) -> None:
        self.app = app
        self.deadline_seconds = deadline_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = layer_times.cpu_start()
        bookie = _bookie_of_rack_write(scope)
        layer_times.cpu_stop("hot path", started)
        if bookie is None:
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)  # bounded by RequestRules in front
        if body is None:  # the client went away
            return
        started = layer_times.cpu_start()
        if not body or _content_type(scope) != JSON_CONTENT_TYPE:
            await self.app(scope, replay(body, receive), send)
            return
        state = self.app.state.pulsar
        racks: RackService = state.services.racks
        try:
            async with asyncio.timeout(self.deadline_seconds):
                access = Access(
                    UPDATE_OPERATION,
                    {"bookie": bookie},
                    _headers(scope),
                    client_cert=client_certificate(scope),
                )
                layer_times.cpu_stop("hot path", started)
                started = layer_times.cpu_start()
                role = await authorize(access, state.guard)
                layer_times.cpu_stop("authorisation", started)
                started = layer_times.cpu_start()
                try:
                    info = parse_rack_write(body)
                except InvalidInput:
                    await self.app(scope, replay(body, receive), send)
                    return
                context = change_context(scope, role, state.settings)
                group = _group(scope)
                layer_times.cpu_stop("hot path", started)
                with recording(context):
                    await racks.set_bookie(bookie, group, info)
        except TimeoutError:
            await send_timed_out(send, self.deadline_seconds)
            return
        except KNOWN_ERRORS as exc:
            status, reason = error_status_and_reason(exc)
            await send_response(send, status, dump_json({"reason": reason}))
            return
        await send_response(send, 204)


def _bookie_of_rack_write(scope: Scope) -> str | None:
    """The `{bookie}` of a `POST .../racks-info/{bookie}`, or None for any other request."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
        return None
    if has_encoded_slash(scope):  # EncodedSlashes' job, in the app
        return None
    path: str = scope["path"]
    if not path.startswith(RACK_PATH_PREFIX):
        return None
    bookie = path[len(RACK_PATH_PREFIX) :]
    return bookie if bookie and "/" not in bookie else None


def _group(scope: Scope) -> str | None:
    """The `group` query parameter as Starlette parses it: blank values kept, the last of
    repeated keys wins."""
    query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
    return query.get("group")


def _headers(scope: Scope) -> dict[str, str]:
    return {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
    }


def _content_type(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bytes(value.split(b";", 1)[0].strip().lower())
    return None
