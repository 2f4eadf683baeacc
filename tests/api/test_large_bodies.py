"""Bodies far over the limits are answered with a 413 the client reads (not a reset while it
is still sending), on the admin paths and on the REST producer's."""

from __future__ import annotations

import httpx
import pytest

from tests.support import ServerProcess

MB = 1_000_000


@pytest.mark.parametrize("size", [10 * MB, 100 * MB])
@pytest.mark.parametrize("path", ["/admin/v2/bookies/racks-info",
                                  "/topics/persistent/big/ns/t"])
def test_a_body_over_the_limit_gets_a_413_the_client_reads(
        server: ServerProcess, path: str, size: int) -> None:
    if path.startswith("/topics") and size == 10 * MB:
        size = 11 * MB  # the producer's limit: 2 x maxMessageSize + 64 KiB
    body = b'{"messages": [{"payload": "' + b"x" * size + b'"}]}'
    with httpx.Client(base_url=server.url, timeout=120) as http:
        method = "PUT" if path.startswith("/admin") else "POST"
        answer = http.request(method, path, content=body,
                              headers={"Content-Type": "application/json"})
        assert answer.status_code == 413
        assert "exceeds httpMaxRequestSize" in answer.json()["reason"]
        assert answer.headers["connection"] == "close"
        # and the server is fine for the next request
        assert http.get("/admin/v2/clusters").status_code == 200
