"""The CLI's exceptions, and the one place that turns them into stderr text and exit 1.

    CliError
     +-- AdminError        the service answered with an error status (carries status, reason)
     +-- ConnectError      no answer: refused, unreachable, TLS failure, timeout
     +-- ParameterError    bad arguments found before any request is sent (usage follows)
     +-- ConfigError       no admin URL, unreadable client.conf or token file, unknown plugin
     +-- ClientCheckError  an argument the Java admin client itself refuses before any request

What `pulsar-admin` prints for each (upstream `CommanderFactory` / `CmdBase`):

    AdminError      <reason>, blank line, `Reason: <reason>`
    ConnectError    <message>, blank line, `Error connecting to Pulsar`
    ParameterError  <message>, then the command's usage (picocli's parameter handler)
    ClientCheckError  `null`, blank line, `Reason: java.lang.IllegalArgumentException: <message>`
                    (the PulsarAdminException wrapping the client's `checkArgument`, whose
                    own message is null)

and every failure exits with status 1 (the Java tool maps any non-zero result to 1).
"""

from __future__ import annotations

from typing import TextIO

FAILURE = 1


class CliError(Exception):
    """Root of the CLI's own errors."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AdminError(CliError):
    """An error response: `reason` is the server's `{"reason": ...}`, or `HTTP <code> <text>`."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class ConnectError(CliError):
    """The request got no response."""


class ParameterError(CliError):
    """Invalid arguments, found client-side; `usage` is the offending command's help."""

    def __init__(self, message: str, usage: str | None = None) -> None:
        super().__init__(message)
        self.usage = usage


class ClientCheckError(CliError):
    """An argument the Java admin client refuses itself (`Preconditions.checkArgument`)."""


class ConfigError(CliError):
    """The client cannot be set up (admin URL, client.conf, authentication)."""


def report(exc: BaseException, err: TextIO) -> int:
    """Write what pulsar-admin writes for `exc` to `err`; return the exit status (1)."""
    if isinstance(exc, AdminError):
        err.write(f"{exc.reason}\n\nReason: {exc.reason}\n")
    elif isinstance(exc, ConnectError):
        err.write(f"{exc.message}\n\nError connecting to Pulsar\n")
    elif isinstance(exc, ClientCheckError):
        err.write(f"null\n\nReason: java.lang.IllegalArgumentException: {exc.message}\n")
    elif isinstance(exc, ParameterError):
        err.write(f"{exc.message}\n")
        if exc.usage:
            err.write(exc.usage if exc.usage.endswith("\n") else exc.usage + "\n")
    elif isinstance(exc, CliError):
        err.write(f"{exc.message}\n")
    elif not _click_error(exc, err):  # upstream prints the stack trace of anything unexpected
        import traceback

        err.write("".join(traceback.format_exception(exc)))
    return FAILURE


def _click_error(exc: BaseException, err: TextIO) -> bool:
    """Click's own errors (usage, bad parameters): imported only when one is possible, as
    a command that never reaches Typer has none."""
    from cli.clickcompat import ClickException, UsageError

    if isinstance(exc, UsageError):
        err.write(f"{exc.format_message()}\n")
        if exc.ctx is not None:
            err.write(exc.ctx.get_help() + "\n")
        return True
    if isinstance(exc, ClickException):
        err.write(f"{exc.format_message()}\n")
        return True
    return False


__all__ = [
    "FAILURE",
    "AdminError",
    "CliError",
    "ClientCheckError",
    "ConfigError",
    "ConnectError",
    "ParameterError",
    "report",
]
