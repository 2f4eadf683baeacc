"""The click that Typer runs on. Typer 0.2x ships its own copy (`typer._click`), whose
contexts and exceptions are not `click`'s; older Typer uses click itself. This is the only
module that knows which one is in use."""

from __future__ import annotations

try:
    from typer._click.core import Context
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # Typer before it vendored click
    from click.core import Context  # type: ignore[assignment]
    from click.exceptions import (  # type: ignore[assignment]
        ClickException,
        NoArgsIsHelpError,
        UsageError,
    )

__all__ = ["ClickException", "Context", "NoArgsIsHelpError", "UsageError"]
