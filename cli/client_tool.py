"""`pulsar-client produce`: Pulsar's client tool's produce command over the REST producer.

    pulsar-client [--url http://host:8080] produce <topic> -m msg[,msg...] [-n N] [-s ,]
                  [-k key] [-p key=value ...]

Each of the `-m` messages (split on `-s`, default `,`) is sent `-n` times, as the Java tool
does; messages go to `POST /topics/persistent/{tenant}/{ns}/{topic}` in batches of 100. A
progress bar goes to stderr when there are at least 1,000 messages. On success it prints
`N messages successfully produced`; any failure prints the reason to stderr and exits 1.
The URL defaults to webServiceUrl from client.conf (as pulsar-admin reads it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.client import AdminClient, path
from cli.commands.topics import topic_parts
from cli.config import GlobalFlags, load
from cli.errors import ParameterError, report

PROG = "pulsar-client"
BATCH = 100
PROGRESS_FROM = 1000

app = typer.Typer(name=PROG, help="Pulsar client tool: produce messages over REST.",
                  context_settings={"help_option_names": ["-h", "--help"]},
                  rich_markup_mode=None, pretty_exceptions_enable=False,
                  add_completion=False, no_args_is_help=True)


@app.callback()
def root(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option(
        "--url", show_default=False,
        help="Web service URL of the broker, e.g. http://localhost:8080. "
             "Default: webServiceUrl from client.conf.")] = None,
) -> None:  # fmt: skip
    ctx.obj = url


def messages_to_send(messages: str, separator: str, times: int) -> Iterator[str]:
    parts = messages.split(separator) if separator else [messages]
    for _ in range(times):
        yield from parts


def batches(items: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@app.command("produce")
def produce(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(metavar="topic", help="persistent://t/ns/topic")],
    messages: Annotated[str, typer.Option(
        "-m", "--messages", help="Messages to send, split by the separator.")],
    num_produce: Annotated[int, typer.Option(
        "-n", "--num-produce", help="Number of times to send message(s).")] = 1,
    separator: Annotated[str, typer.Option(
        "-s", "--separator", help="Character to split messages string on, default is comma")
    ] = ",",
    key: Annotated[str | None, typer.Option("-k", "--key", help="Message key")] = None,
    properties: Annotated[list[str] | None, typer.Option(
        "-p", "--properties", help="Properties to add, key=value (repeatable)")] = None,
) -> None:  # fmt: skip
    """Produce messages to a topic."""
    if num_produce < 1:
        raise ParameterError("-n/--num-produce must be at least 1")
    domain, tenant, namespace, local = topic_parts(topic)
    if domain != "persistent":
        raise ParameterError(f"Only persistent topics are supported: {topic}")
    props: dict[str, str] = {}
    for item in properties or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise ParameterError(f"Invalid property {item!r}: expected key=value")
        props[name] = value
    total = len(messages.split(separator) if separator else [messages]) * num_produce
    config = load(GlobalFlags(admin_url=ctx.obj), os.environ, Path.cwd())
    client = AdminClient(config)
    url = "/topics/persistent" + path(tenant, namespace, local)

    def message(payload: str) -> dict[str, Any]:
        body: dict[str, Any] = {"payload": payload}
        if key is not None:
            body["key"] = key
        if props:
            body["properties"] = props
        return body

    sent = 0
    show = total >= PROGRESS_FROM
    try:
        with typer.progressbar(length=total, label="Producing", file=sys.stderr,
                               hidden=not show) as bar:  # fmt: skip
            items = (message(m) for m in messages_to_send(messages, separator, num_produce))
            for batch in batches(items, BATCH):
                response = client.request("POST", url, json_body={"messages": batch})
                for ack in response.json().get("messagePublishResults", []):
                    if ack.get("errorCode", 0) != 0:
                        raise ParameterError(f"Error while producing messages: "
                                             f"{ack.get('errorMsg', 'unknown error')}")
                sent += len(batch)
                bar.update(len(batch))
    finally:
        client.close()
    typer.echo(f"{sent} messages successfully produced")


def main(args: Sequence[str] | None = None) -> int:
    command = typer.main.get_command(app)
    try:
        command.main(args=list(sys.argv[1:] if args is None else args), prog_name=PROG,
                     standalone_mode=False)
    except typer.Abort:
        return 1
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except Exception as exc:
        return report(exc, sys.stderr)
    return 0


def run() -> None:
    """Console script entry point."""
    sys.exit(main())
