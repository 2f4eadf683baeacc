"""`pulsar-admin topics`: topic lookup (`/lookup/v2/topic/...`)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.client import path
from cli.context import admin
from cli.errors import ParameterError
from cli.framework import Output, command, new_group, positional
from cli.output import TextResult

app = new_group("topics", "Operations about topics")

DOMAINS = ("persistent", "non-persistent")
DEFAULT_NAMESPACE = ("public", "default")

Topic = Annotated[str, positional("persistent://tenant/namespace/topic",
                                  "persistent://tenant/namespace/topic")]  # fmt: skip


def topic_parts(topic: str) -> tuple[str, str, str, str]:
    """TopicName's rules: `my-topic` is `persistent://public/default/my-topic`,
    `t/ns/topic` is `persistent://t/ns/topic`."""
    domain, sep, rest = topic.partition("://")
    if not sep:
        domain, rest = "persistent", topic
    parts = rest.split("/")
    if len(parts) == 1 and parts[0]:
        parts = [*DEFAULT_NAMESPACE, parts[0]]
    if domain not in DOMAINS or len(parts) != 3 or not all(parts):
        raise ParameterError(f"Invalid topic name: {topic}")
    return domain, parts[0], parts[1], parts[2]


@command(app, "lookup")
def lookup(ctx: typer.Context, topic: Topic, output: Output = None) -> TextResult:
    """Lookup a topic from the current serving broker: prints the owner's broker service URL
    (the TLS one when the admin URL is https)."""
    client = admin(ctx)
    data = client.get_json("/lookup/v2/topic" + path(*topic_parts(topic))) or {}
    tls = client.base_url.startswith("https:")
    return TextResult(data.get("brokerUrlTls") if tls else data.get("brokerUrl"))
