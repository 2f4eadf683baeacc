"""Keep an encoded slash (`%2F`) inside its path segment, as Pulsar's Jersey does.

Starlette routes on the decoded path, so `PUT /admin/v2/clusters/a%2Fb` would become the two
segments `a/b` and miss the route (404). Upstream matches `{cluster}` = `a/b` and answers 412
`Cluster name is not valid`. Here the encoded slash becomes `ENCODED_SLASH` in the routed
path, a character that no Pulsar name accepts, so the same validation rejects it."""

from __future__ import annotations

import re
from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import ENCODED_SLASH

_ENCODED = re.compile(rb"%2f", re.IGNORECASE)


def has_encoded_slash(scope: Scope) -> bool:
    raw = scope.get("raw_path")
    return bool(raw and _ENCODED.search(raw))


class EncodedSlashes:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and has_encoded_slash(scope):
            segments = scope["raw_path"].split(b"?", 1)[0].split(b"/")
            path = "/".join(unquote(s.decode("latin-1")).replace("/", ENCODED_SLASH)
                            for s in segments)  # fmt: skip
            scope = {**scope, "path": path}
        await self.app(scope, receive, send)
