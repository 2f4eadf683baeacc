"""`pulsar-admin`: the root app. It only assembles the groups and turns the global options
(given before the group, as with the Java tool) into one `AdminContext`; `run()` is the
console script and the single place where exceptions become stderr text and exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

import typer

from cli.commands import GROUPS, storage, topics
from cli.config import GlobalFlags, load
from cli.context import AdminContext
from cli.errors import FAILURE, report
from cli.framework import HELP_OPTIONS, NoSubcommand, PulsarGroup
from cli.output import OutputFormat, TextResult, write

PROG = "pulsar-admin"

app = typer.Typer(
    name=PROG,
    help="Pulsar admin tool: bookie racks, clusters, failure domains, tenants, namespaces and "
    "namespace isolation policies, over Pulsar's admin REST API. Global options go before the "
    "command group: pulsar-admin [global options] <group> <command> [command options].",
    cls=PulsarGroup,
    context_settings=HELP_OPTIONS,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=True,
)
for group in (*GROUPS, topics.app, storage.app):
    app.add_typer(group)


def package_version() -> str:
    try:
        return version("pulsar-isolation")
    except PackageNotFoundError:
        return "unknown"


def show_version(value: bool) -> None:
    if value:
        write(TextResult(f"Current version of pulsar admin client is: {package_version()}"),
              OutputFormat.pulsar, sys.stdout)  # fmt: skip
        raise typer.Exit(0)


@app.callback()
def root(
    ctx: typer.Context,
    admin_url: Annotated[str | None, typer.Option(
        "--admin-url", show_default=False,
        help="Admin Service URL to which to connect, e.g. http://localhost:8080/. "
             "Default: webServiceUrl from client.conf.")] = None,
    auth_plugin: Annotated[str | None, typer.Option(
        "--auth-plugin", show_default=False,
        help="Authentication plugin class name, e.g. "
             "org.apache.pulsar.client.impl.auth.AuthenticationToken. "
             "Default: authPlugin from client.conf.")] = None,
    auth_params: Annotated[str | None, typer.Option(
        "--auth-params", show_default=False,
        help="Authentication parameters, whose format is determined by the plugin: "
             "token:<jwt> or file:///path/to/token for token auth, "
             "{\"userId\":..,\"password\":..} for basic auth. "
             "Default: authParams from client.conf.")] = None,
    tls_allow_insecure: Annotated[bool | None, typer.Option(
        "--tls-allow-insecure",
        help="Allow TLS insecure connection (accept any server certificate). "
             "Default: tlsAllowInsecureConnection from client.conf, else off.")] = None,
    tls_trust_cert_path: Annotated[str | None, typer.Option(
        "--tls-trust-cert-path", show_default=False,
        help="TLS trust cert file path (PEM CA bundle). "
             "Default: tlsTrustCertsFilePath from client.conf.")] = None,
    tls_enable_hostname_verification: Annotated[bool | None, typer.Option(
        "--tls-enable-hostname-verification",
        help="Enable TLS common name verification. "
             "Default: tlsEnableHostnameVerification from client.conf, else off.")] = None,
    tls_provider: Annotated[str | None, typer.Option(
        "--tls-provider", show_default=False,
        help="TLS provider for the web service (accepted for compatibility; Python's ssl is "
             "always used). Default: webserviceTlsProvider from client.conf.")] = None,
    request_timeout: Annotated[int | None, typer.Option(
        "--request-timeout", show_default=False,
        help="Request time out in seconds for the pulsar admin client for any request. "
             "Default: 300.")] = None,
    output: Annotated[OutputFormat, typer.Option(
        "-o", "--output",
        help="Output format for every command: pulsar (the Java tool's format), json, yaml "
             "or table.")] = OutputFormat.pulsar,
    _version: Annotated[bool, typer.Option(
        "-v", "--version", is_eager=True, callback=show_version,
        help="Get version of pulsar admin client.")] = False,
) -> None:  # fmt: skip
    """Build the AdminContext the commands receive (client.conf < flags)."""
    flags = GlobalFlags(
        admin_url=admin_url,
        auth_plugin=auth_plugin,
        auth_params=auth_params,
        tls_allow_insecure=tls_allow_insecure,
        tls_trust_cert_path=tls_trust_cert_path,
        tls_enable_hostname_verification=tls_enable_hostname_verification,
        tls_provider=tls_provider,
        request_timeout=request_timeout,
    )
    state = AdminContext(load(flags, os.environ, Path.cwd()), output)
    ctx.obj = state
    ctx.call_on_close(state.close)


def main(args: Sequence[str] | None = None) -> int:
    """Run pulsar-admin with `args`; return the exit status (0, or 1 on any failure)."""
    command = typer.main.get_command(app)
    try:
        result = command.main(
            args=list(sys.argv[1:] if args is None else args),
            prog_name=PROG,
            standalone_mode=False,
        )
    except NoSubcommand as exc:
        if exc.ctx is not None:
            write(TextResult(exc.ctx.get_help()), OutputFormat.pulsar, sys.stdout)
        return FAILURE
    except typer.Abort:
        return FAILURE
    except Exception as exc:
        return report(exc, sys.stderr)
    return result if isinstance(result, int) and result != 0 else 0


def run() -> None:
    """Console script entry point."""
    sys.exit(main())


__all__ = ["app", "main", "run"]
