"""`pulsar-admin topics`: lookup (`/lookup/v2/topic/...`) and the persistent-topic admin
paths: create, delete, list, stats, stats-internal, get-message-by-id, examine-message, and the
partitioned topics' create, update, get metadata, delete, list and stats."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from cli.client import V2, Response, path
from cli.context import admin
from cli.errors import AdminError, ClientCheckError, ParameterError
from cli.framework import Output, command, new_group, positional
from cli.output import JsonResult, LinesResult, TextResult
from javaformats import hash_set_order

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


def topic_path(topic: str) -> str:
    """`/admin/v2/persistent/{tenant}/{ns}/{topic}` (only persistent topics are stored)."""
    domain, tenant, namespace, local = topic_parts(topic)
    if domain != "persistent":
        raise ParameterError(f"Only persistent topics are supported: {topic}")
    return f"{V2}/persistent" + path(tenant, namespace, local)


@command(app, "create")
def create(ctx: typer.Context, topic: Topic, output: Output = None) -> None:
    """Create a non-partitioned topic."""
    admin(ctx).put(topic_path(topic))


@command(app, "delete")
def delete(
    ctx: typer.Context,
    topic: Topic,
    force: Annotated[bool, typer.Option("-f", "--force",
                                        help="Close all producers/consumers/replicators and "
                                             "delete topic forcefully")] = False,
    output: Output = None,
) -> TextResult | None:  # fmt: skip
    """Delete a topic (and its ledgers). The topic cannot be deleted if there's any active
    subscription or producers connected to it. A refusal is a line on stdout and status 0,
    as Pulsar 4.0's tool prints it."""
    try:
        admin(ctx).delete(topic_path(topic), params={"force": "true"} if force else None)
    except AdminError as exc:
        return TextResult(f"Failed to delete topic: {topic}. Exception: "
                          f"{JAVA_ADMIN_EXCEPTIONS.get(exc.status, ADMIN_EXCEPTION)}: {exc.reason}")
    return None


# PulsarAdminException subclasses by HTTP status, as their toString() names them
ADMIN_EXCEPTION = "org.apache.pulsar.client.admin.PulsarAdminException"
JAVA_ADMIN_EXCEPTIONS = {
    401: ADMIN_EXCEPTION + "$NotAuthorizedException",
    403: ADMIN_EXCEPTION + "$NotAuthorizedException",
    404: ADMIN_EXCEPTION + "$NotFoundException",
    405: ADMIN_EXCEPTION + "$NotAllowedException",
    409: ADMIN_EXCEPTION + "$ConflictException",
    412: ADMIN_EXCEPTION + "$PreconditionFailedException",
    500: ADMIN_EXCEPTION + "$ServerSideErrorException",
    503: ADMIN_EXCEPTION + "$ServerSideErrorException",
}


@command(app, "list")
def list_topics(
    ctx: typer.Context,
    namespace: Annotated[str, positional("tenant/namespace")],
    output: Output = None,
) -> LinesResult:
    """Get the list of topics under a namespace."""
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        raise ParameterError(f"Invalid namespace name: {namespace}")
    # as 4.0's TopicsImpl.getListAsync without a domain: both domains' lists, persistent
    # first, added to a HashSet in the order the server lists them, printed in its order
    # (names that share a bucket keep that order)
    client = admin(ctx)
    topics = [*(client.get_json(f"{V2}/persistent" + path(*parts)) or []),
              *(client.get_json(f"{V2}/non-persistent" + path(*parts)) or [])]
    return LinesResult(hash_set_order(topics))


# -- partitioned topics ---------------------------------------------------------------------

PARTITIONS_HELP = "Number of partitions for the topic"
# `PartitionedTopicMetadata.MEDIA_TYPE`: the body the Java client sends with properties
METADATA_MEDIA_TYPE = "application/vnd.partitioned-topic-metadata+json"


def key_value_map(items: list[str]) -> dict[str, str]:
    """`CliCommand.parseListKeyValueMap`: each `-m` item is one pair split at its first `=`
    (`-m a=1,b=2` is the key `a` with the value `1,b=2`, whatever the help says); an item
    without one is skipped."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if sep:
            found[key] = value
    return found


@command(app, "create-partitioned-topic")
def create_partitioned_topic(
    ctx: typer.Context,
    topic: Topic,
    partitions: Annotated[int, typer.Option("-p", "--partitions", help=PARTITIONS_HELP)],
    metadata: Annotated[list[str] | None, typer.Option(
        "-m", "--metadata", help="key value pair properties(a=a,b=b,c=c)")] = None,
    output: Output = None,
) -> None:  # fmt: skip
    """Create a partitioned topic. The partitioned topic has to be created before creating a
    producer on it."""
    if partitions <= 0:
        raise ClientCheckError("Number of partitions should be more than 0")
    url = topic_path(topic) + "/partitions"
    properties = key_value_map(metadata or [])
    if properties:
        admin(ctx).put(url, {"partitions": partitions, "deleted": False,
                             "properties": properties},
                       {"createLocalTopicOnly": "false"}, media_type=METADATA_MEDIA_TYPE)
    else:
        admin(ctx).put(url, partitions, {"createLocalTopicOnly": "false"})


@command(app, "update-partitioned-topic")
def update_partitioned_topic(
    ctx: typer.Context,
    topic: Topic,
    partitions: Annotated[int, typer.Option("-p", "--partitions", help=PARTITIONS_HELP)],
    local_only: Annotated[bool, typer.Option(
        "-ulo", "--update-local-only",
        help="Update partitions number for topic in local cluster only")] = False,
    force: Annotated[bool, typer.Option(
        "-f", "--force",
        help="Update forcefully without validating existing partitioned topic")] = False,
    output: Output = None,
) -> None:  # fmt: skip
    """Update existing partitioned topic. New updating number of partitions must be greater
    than existing number of partitions."""
    if partitions <= 0:
        raise ClientCheckError("Number of partitions must be more than 0")
    admin(ctx).post(topic_path(topic) + "/partitions", partitions, {
        "updateLocalTopicOnly": str(local_only).lower(), "force": str(force).lower()})


@command(app, "get-partitioned-topic-metadata")
def get_partitioned_topic_metadata(ctx: typer.Context, topic: Topic,
                                   output: Output = None) -> JsonResult:
    """Get the partitioned topic metadata. If the topic is not created or is a non-partitioned
    topic, it returns empty topic with 0 partitions."""
    return JsonResult(admin(ctx).get_json(topic_path(topic) + "/partitions"))


@command(app, "partitioned-stats-internal")
def partitioned_stats_internal(ctx: typer.Context, topic: Topic,
                               output: Output = None) -> JsonResult:
    """Get the internal stats of the partitioned topic and its internal stats of each
    partition."""
    return JsonResult(admin(ctx).get_json(topic_path(topic) + "/partitioned-internalStats"))


@command(app, "delete-partitioned-topic")
def delete_partitioned_topic(
    ctx: typer.Context,
    topic: Topic,
    force: Annotated[bool, typer.Option(
        "-f", "--force",
        help="Close all producer/consumer/replicator and delete topic forcefully")] = False,
    delete_schema: Annotated[bool, typer.Option(
        "-d", "--deleteSchema", hidden=True,
        help="Delete schema while deleting topic (always, in Pulsar 4.0)")] = False,
    output: Output = None,
) -> None:  # fmt: skip
    """Delete a partitioned topic. It will also delete all the partitions of the topic if it
    exists."""
    admin(ctx).delete(topic_path(topic) + "/partitions", {"force": str(force).lower()})


@command(app, "list-partitioned-topics")
def list_partitioned_topics(
    ctx: typer.Context,
    namespace: Annotated[str, positional("tenant/namespace")],
    include_system: Annotated[bool, typer.Option(
        "-ist", "--include-system-topic", help="Include system topic")] = False,
    output: Output = None,
) -> LinesResult:  # fmt: skip
    """Get the list of partitioned topics under a namespace."""
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        raise ParameterError(f"Invalid namespace name: {namespace}")
    # as 4.0's TopicsImpl.getPartitionedTopicListAsync: both domains' lists, in a HashSet
    client = admin(ctx)
    params = {"includeSystemTopic": str(include_system).lower()}
    topics = [*(client.get_json(f"{V2}/persistent" + path(*parts) + "/partitioned",
                                params) or []),
              *(client.get_json(f"{V2}/non-persistent" + path(*parts) + "/partitioned",
                                params) or [])]
    return LinesResult(hash_set_order(topics))


PRECISE_BACKLOG = "Set true to get precise backlog"
EARLIEST_TIME = "Set true to get earliest time in backlog"


def stats_params(precise_backlog: bool, earliest_time: bool) -> dict[str, str]:
    """The query 4.0's `TopicsImpl` sends with a stats request (`-sbs` is on by default and
    stays on when given, as in upstream's tool)."""
    return {"getPreciseBacklog": str(precise_backlog).lower(),
            "subscriptionBacklogSize": "true",
            "getEarliestTimeInBacklog": str(earliest_time).lower(),
            "excludePublishers": "false", "excludeConsumers": "false"}


@command(app, "stats")
def stats(
    ctx: typer.Context,
    topic: Topic,
    precise_backlog: Annotated[bool, typer.Option(
        "-gpb", "--get-precise-backlog", help=PRECISE_BACKLOG)] = False,
    subscription_backlog_size: Annotated[bool, typer.Option(
        "-sbs", "--get-subscription-backlog-size",
        help="Set true to get backlog size for each subscription, locking required. If set to "
             "false, the attribute 'backlogSize' in the response will be -1")] = True,
    earliest_time: Annotated[bool, typer.Option(
        "-etb", "--get-earliest-time-in-backlog", help=EARLIEST_TIME)] = False,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Get the stats for the topic and its connected producers and consumers. All the rates
    are computed over a 1 minute window and are relative the last completed 1 minute
    period."""
    return JsonResult(admin(ctx).get_json(topic_path(topic) + "/stats",
                                          stats_params(precise_backlog, earliest_time)))


@command(app, "partitioned-stats")
def partitioned_stats(
    ctx: typer.Context,
    topic: Topic,
    per_partition: Annotated[bool, typer.Option(
        "--per-partition", help="Get per partition stats")] = False,
    precise_backlog: Annotated[bool, typer.Option(
        "-gpb", "--get-precise-backlog", help=PRECISE_BACKLOG)] = False,
    subscription_backlog_size: Annotated[bool, typer.Option(
        "-sbs", "--get-subscription-backlog-size",
        help="Set true to get backlog size for each subscription, locking required.")] = True,
    earliest_time: Annotated[bool, typer.Option(
        "-etb", "--get-earliest-time-in-backlog", help=EARLIEST_TIME)] = False,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Get the stats for the partitioned topic and its connected producers and consumers.
    All the rates are computed over a 1 minute window and are relative the last completed 1
    minute period."""
    params = {"perPartition": str(per_partition).lower(),
              **stats_params(precise_backlog, earliest_time)}
    return JsonResult(admin(ctx).get_json(topic_path(topic) + "/partitioned-stats", params))


@command(app, "stats-internal")
def stats_internal(
    ctx: typer.Context,
    topic: Topic,
    metadata: Annotated[bool, typer.Option("-m", "--metadata",
                                           help="Flag to include ledger metadata")] = False,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Get the internal stats for the topic."""
    params = {"metadata": "true"} if metadata else None
    return JsonResult(admin(ctx).get_json(topic_path(topic) + "/internalStats", params))


def hex_dump(data: bytes) -> str:
    """Netty's `ByteBufUtil.prettyHexDump` (empty for no bytes)."""
    if not data:
        return ""
    lines = ["         +-------------------------------------------------+",
             "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |",
             "+--------+-------------------------------------------------+----------------+"]
    for offset in range(0, len(data), 16):
        row = data[offset:offset + 16]
        hexes = " ".join(f"{b:02x}" for b in row).ljust(47)
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row).ljust(16)
        lines.append(f"|{offset:08x}| {hexes} |{text}|")
    lines.append(lines[2])
    return "\n".join(lines)


_ISO_TIME = re.compile(
    r"(\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?"
    r"(Z|[+-]\d\d:\d\d(?::\d\d)?)")


def parse_date(text: str) -> int:
    """Pulsar's `DateFormatter.parse`: an ISO-8601 time with its offset, in ms (0 when it
    does not parse)."""
    found = _ISO_TIME.fullmatch(text.strip())
    if found is None:
        return 0
    year, month, day, hour, minute, second, fraction, offset = found.groups()
    try:
        when = datetime(int(year), int(month), int(day), int(hour), int(minute),
                        int(second or 0), tzinfo=UTC)
    except ValueError:
        return 0
    if offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        parts = [int(p) for p in offset[1:].split(":")] + [0]
        when -= sign * timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2])
    millis = int((fraction or "0").ljust(9, "0")[:3])
    return int(when.timestamp()) * 1000 + millis


def message_properties(headers: Mapping[str, str]) -> dict[str, str]:
    """`TopicsImpl`: the properties of the `X-Pulsar-PROPERTY` JSON header, in a TreeMap
    (sorted by UTF-16 code units); with the batch size when the broker sent one."""
    properties: dict[str, str] = {}
    raw = headers.get("x-pulsar-property")
    if raw is not None:
        with contextlib.suppress(ValueError):
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                properties.update({str(k): v if isinstance(v, str) else json.dumps(v)
                                   for k, v in parsed.items()})
    if "x-pulsar-batch-size" in headers:
        properties["X-Pulsar-batch-size"] = headers["x-pulsar-batch-size"]
    return dict(sorted(properties.items(), key=lambda kv: kv[0].encode("utf-16-be")))


def describe_message(response: Response, *, by_id: bool = False) -> TextResult:
    """What the Java tool prints for a message (Pulsar 4.0 `CmdTopics`): its id, times,
    properties, then a hex dump of the payload. Header names are matched without regard to
    case."""
    headers = {name.lower(): value for name, value in response.headers.items()}
    out = [f"Message ID: {headers.get('x-pulsar-message-id', '')}",
           f"Publish time: {parse_date(headers.get('x-pulsar-publish-time', ''))}",
           f"Event time: {parse_date(headers.get('x-pulsar-event-time', ''))}"]
    if by_id:
        out.append("Redelivery count: 0")
    deliver_at = parse_date(headers.get("x-pulsar-deliver-at-time", ""))
    if deliver_at:
        out.append(f"Deliver at time: {deliver_at}")
    properties = message_properties(headers)
    if properties:
        out.append("Properties:")
        out.extend(f"{k}    {v}" for k, v in properties.items())
    out.append(hex_dump(response.content))
    return TextResult("\n".join(out))


@command(app, "get-message-by-id")
def get_message_by_id(
    ctx: typer.Context,
    topic: Topic,
    ledger_id: Annotated[int, typer.Option("-l", "--ledgerId", help="ledger id pointing to "
                                           "the desired ledger")],
    entry_id: Annotated[int, typer.Option("-e", "--entryId", help="entry id pointing to the "
                                          "desired entry")],
    output: Output = None,
) -> TextResult:  # fmt: skip
    """Get message by its ledgerId and entryId."""
    url = topic_path(topic) + path("ledger", str(ledger_id), "entry", str(entry_id))
    return describe_message(admin(ctx).request("GET", url), by_id=True)


@command(app, "examine-message")  # Pulsar 3.x's name
@command(app, "examine-messages")
def examine_message(
    ctx: typer.Context,
    topic: Topic,
    initial_position: Annotated[str, typer.Option(
        "-i", "--initialPosition",
        help="Relative start position to examine message. It can be 'latest' or 'earliest', "
             "default is latest")] = "latest",
    message_position: Annotated[int, typer.Option(
        "-m", "--messagePosition",
        help="The position of messages (default 1)")] = 1,
    output: Output = None,
) -> TextResult:  # fmt: skip
    """Examine a specific message on a topic by position relative to the earliest or the
    latest message."""
    return describe_message(admin(ctx).request(
        "GET", topic_path(topic) + "/examinemessage",
        params={"initialPosition": initial_position, "messagePosition": str(message_position)}))
