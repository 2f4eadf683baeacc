"""Error reasons a client can read: no internal placeholder, UTF-8 named as UTF-8."""

from __future__ import annotations

import httpx

from tests.support import ServerProcess


def test_an_encoded_slash_comes_back_as_a_slash(server: ServerProcess) -> None:
    answer = httpx.post(f"{server.url}/admin/v2/bookies/racks-info/a%2Fb:3181",
                        params={"group": "g"}, json={"rack": "/r1"})
    assert answer.status_code == 412, answer.text
    reason = answer.json()["reason"]
    assert "\x00" not in reason and "\\u0000" not in answer.text


def test_a_body_that_is_not_utf8_is_named_so(server: ServerProcess) -> None:
    answer = httpx.post(f"{server.url}/admin/v2/bookies/racks-info/b1:3181",
                        params={"group": "g"}, content=b'{"rack": "\xff\xfe"}',
                        headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    reason = answer.json()["reason"]
    assert reason.startswith("Invalid JSON body: Invalid UTF-8 start byte 0xff"), reason
    assert "surrogate" not in reason
