"""The one authorisation check. Every request passes through `authorize`: the routes through
the app-wide dependency `authorize_request` (api/deps.py), the rack-write fast path
(api/hot_path.py) by calling it directly, so a rule added here holds for both.

Empty for now: every request is allowed. The security work fills it in (Pulsar's
`authenticationEnabled`, `authorizationEnabled`, `superUserRoles`), raising
`api.errors.NotAuthorized` (401) or `api.errors.Forbidden` (403).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Access:
    """What a request asks to do: its method and path, and its headers (credentials)."""

    method: str
    path: str
    headers: Mapping[str, str]


async def authorize(access: Access) -> None:
    """Raise when `access` is not allowed; allow everything until security is configured."""
    del access  # no rule yet
