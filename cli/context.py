"""The one object every command receives: settings in effect, output format, the client."""

from __future__ import annotations

from dataclasses import dataclass, field

from cli.clickcompat import Context
from cli.client import AdminClient
from cli.config import ClientConfig
from cli.output import OutputFormat


@dataclass
class AdminContext:
    config: ClientConfig
    output: OutputFormat = OutputFormat.pulsar
    _client: AdminClient | None = field(default=None, repr=False)

    @property
    def client(self) -> AdminClient:
        """Built on first use, so `--help` and usage errors need no admin URL."""
        if self._client is None:
            self._client = AdminClient(self.config)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def admin(ctx: Context) -> AdminClient:
    """The client of the current invocation (the root callback puts AdminContext in place)."""
    state = ctx.find_object(AdminContext)
    if state is None:
        raise RuntimeError("pulsar-admin commands run under the root app, which sets AdminContext")
    return state.client


__all__ = ["AdminContext", "admin"]
