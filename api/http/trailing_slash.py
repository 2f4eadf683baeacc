"""A trailing slash names the same resource, as Pulsar's Jersey matches it.

Jersey matches `GET /admin/v2/clusters/` and `GET /admin/v2/clusters/test/` to the resources
without the slash and answers them; Starlette would answer 307 with a `Location` without it,
which a client that does not follow redirects (or one that must not repeat a body) takes
for the answer. Under Pulsar's REST roots (`/admin/`, `/lookup/`, `/topics/`) one trailing
slash is dropped from the routed path before routing; the access line keeps the path as
sent, and a doubled slash (`/clusters//`) still matches nothing, as upstream."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

JERSEY_ROOTS = ("/admin/", "/lookup/", "/topics/")


def without_trailing_slash(path: str) -> str:
    """`path` as Jersey matches it: one trailing slash dropped under Pulsar's REST roots."""
    if path.endswith("/") and not path.endswith("//") and path.startswith(JERSEY_ROOTS):
        return path[:-1]
    return path


class TrailingSlashes:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            routed = without_trailing_slash(path)
            if routed is not path:
                scope = {**scope, "path": routed}
        await self.app(scope, receive, send)
