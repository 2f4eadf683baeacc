"""How the tests beside the upstream broker compare its answers with ours."""

from __future__ import annotations

import json
from typing import Any

import httpx


def in_order(response: httpx.Response) -> Any:
    """A JSON body with each object as its list of (key, value) pairs, in order."""
    return json.loads(response.content, object_pairs_hook=list) if response.content else None


def refusal(response: httpx.Response) -> str:
    """What a refusal says: its JSON reason, or the first line of Jackson's text."""
    try:
        return str(response.json()["reason"])
    except (ValueError, KeyError, TypeError):
        return response.text.split("\n at [Source", 1)[0]
