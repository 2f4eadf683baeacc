"""The Typer pieces shared by every group: how a command's result reaches stdout.

`PulsarCommand` takes each command's `-o/--output` (the `Output` parameter every command
declares), runs the command function, and hands the value it returns to `cli.output`; a
`ParameterError` raised by the function gets the command's help attached, as picocli prints
usage after a parameter error. `new_group` builds a group that prints its help when called
without a sub-command (exit 1, as upstream). A command's help is its docstring.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from cli.clickcompat import Context, UsageError
from cli.context import AdminContext
from cli.errors import ParameterError
from cli.output import OutputFormat, Result, write

F = TypeVar("F", bound=Callable[..., Result])

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
OUTPUT_HELP = (
    "Output format: pulsar (the Java tool's format, default), json, yaml or table. "
    "Overrides the global -o."
)
# Every command declares `output: Output = None`; PulsarCommand takes it before the call.
Output = Annotated[OutputFormat | None, typer.Option("-o", "--output", help=OUTPUT_HELP,
                                                     show_default=False)]  # fmt: skip


class NoSubcommand(UsageError):
    """A group called without a sub-command: its help goes to stdout and the exit code is 1."""


class PulsarGroup(TyperGroup):
    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:  # completion parses partial input
            raise NoSubcommand(ctx.get_help(), ctx=ctx)
        return super().parse_args(ctx, args)


class PulsarCommand(TyperCommand):
    def invoke(self, ctx: Context) -> Any:
        chosen: OutputFormat | None = ctx.params.pop("output", None)
        try:
            result = super().invoke(ctx)
        except ParameterError as exc:
            if exc.usage is None:
                exc.usage = ctx.get_help()
            raise
        state = ctx.find_object(AdminContext)
        fmt = chosen or (state.output if state else OutputFormat.pulsar)
        write(result, fmt, sys.stdout)
        return None


def positional(name: str, help: str | None = None) -> Any:
    """A required positional argument shown as `name` (upstream's parameter labels)."""
    return typer.Argument(help=help or name, metavar=name, show_default=False)


def new_group(name: str, help: str) -> typer.Typer:
    return typer.Typer(
        name=name,
        help=help,
        cls=PulsarGroup,
        context_settings=HELP_OPTIONS,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        add_completion=False,
    )


def command(app: typer.Typer, name: str) -> Callable[[F], F]:
    """Register a function returning a `Result` as sub-command `name` of `app`; its
    docstring is the help text."""
    return app.command(name, cls=PulsarCommand, context_settings=HELP_OPTIONS)


__all__ = [
    "HELP_OPTIONS",
    "NoSubcommand",
    "Output",
    "PulsarCommand",
    "PulsarGroup",
    "command",
    "new_group",
    "positional",
]
