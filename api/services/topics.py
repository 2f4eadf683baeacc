"""Persistent topics on the embedded storage engine: produce, create, delete, list, stats and
message reads, with Pulsar's REST shapes (`rest/TopicsBase`, `admin/v2/PersistentTopics`).

A topic is a managed ledger (`storage.managed_ledger`) named `tenant/ns/persistent/<encoded>`;
its ledgers are placed by the namespace's policy: E/Qw/Qa from the namespace's persistence
policy or the broker's `managedLedgerDefault*`, the bookie affinity group (strict included)
from its local policies, recorded on every ledger as Pulsar's EnsemblePlacementPolicyConfig.

Entries hold what a broker writes: Pulsar's message framing (magic, CRC32C, MessageMetadata,
payload; `storage.managed_ledger.message`), so the read endpoints answer the payload and the
metadata headers the Java admin client parses.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from api.errors import Conflict, InvalidInput, NotAllowed, NotFound, PayloadTooLarge
from api.services.namespaces import NamespaceService
from api.settings import Settings
from metastore.readers import read_namespace_placement
from metastore.store import MetadataStore
from placement import AffinityGroups, PlacementConfig
from storage.ledger import LedgerError, NoSuchEntry, NoSuchLedger
from storage.managed_ledger import (
    InvalidPosition,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactory,
    Position,
    RolloverPolicy,
    codec_decode,
    managed_ledger_name,
    managed_ledger_path,
)
from storage.managed_ledger.message import (
    MessageFormatError,
    MessageMetadata,
    decode_message,
    encode_message,
)

DEFAULT_PRODUCER_NAME = "RestProducer"
NON_PARTITIONED = -1
TOPIC_NOT_FOUND = "Topic not found"


@dataclass(frozen=True)
class ReadMessage:
    """A message read back: the payload and the headers of Pulsar's message endpoints."""

    payload: bytes
    headers: dict[str, str]


def iso_time(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def message_headers(position: Position, md: MessageMetadata, size: int) -> dict[str, str]:
    headers = {
        "X-Pulsar-Message-ID": f"{position.ledger_id}:{position.entry_id}",
        "X-Pulsar-publish-time": iso_time(md.publish_time),
        "X-Pulsar-producer-name": md.producer_name,
        "X-Pulsar-sequence-id": str(md.sequence_id),
        "X-Pulsar-uncompressed-size": str(md.uncompressed_size or size),
    }
    if md.event_time:
        headers["X-Pulsar-event-time"] = iso_time(md.event_time)
    if md.partition_key is not None:
        headers["X-Pulsar-partition-key"] = md.partition_key
    else:
        headers["X-Pulsar-null-partition-key"] = "true"
    for key, value in md.properties.items():
        headers[f"X-Pulsar-PROPERTY-{key}"] = value
    return headers


class TopicService:
    def __init__(
        self,
        store: MetadataStore,
        settings: Settings,
        placement: PlacementConfig,
        factory: ManagedLedgerFactory,
    ) -> None:
        self.store = store
        self.settings = settings
        self.placement = placement
        self.factory = factory
        self.namespaces = NamespaceService(store, settings)

    # -- configuration ------------------------------------------------------------------------

    async def config_for(self, tenant: str, namespace: str) -> ManagedLedgerConfig:
        """The namespace's E/Qw/Qa and isolation groups; NotFound when it does not exist."""
        await self.namespaces.policies(tenant, namespace)  # 404 in Pulsar's words
        inputs = await read_namespace_placement(self.store, tenant, namespace, self.placement)
        request, affinity = inputs.request, inputs.affinity
        recorded = affinity
        if recorded is None and self.placement.strict_bookie_affinity_enabled:
            recorded = AffinityGroups(())  # Pulsar records "" for both group lists
        return ManagedLedgerConfig(
            ensemble_size=request.ensemble_size,
            write_quorum=request.write_quorum,
            ack_quorum=request.ack_quorum,
            affinity=affinity,
            recorded_affinity=recorded,
            rollover=RolloverPolicy.from_broker_conf(self.settings.runtime_configuration()),
        )

    async def _exists(self, name: str) -> bool:
        return await self.store.exists(managed_ledger_path(name))

    async def _open(self, tenant: str, namespace: str, topic: str,
                    create: bool) -> ManagedLedger:
        config = await self.config_for(tenant, namespace)
        name = managed_ledger_name(tenant, namespace, topic)
        if (not create and self.factory.get_if_open(name) is None
                and not await self._exists(name)):
            raise NotFound(TOPIC_NOT_FOUND)
        return await self.factory.open(name, config)

    def _auto_create_allowed(self, policies: dict[str, Any]) -> bool:
        override = policies.get("autoTopicCreationOverride")
        if isinstance(override, dict) and "allowAutoTopicCreation" in override:
            return bool(override["allowAutoTopicCreation"])
        return self.settings.allowAutoTopicCreation

    # -- admin --------------------------------------------------------------------------------

    async def create(self, tenant: str, namespace: str, topic: str) -> None:
        await self.namespaces.policies(tenant, namespace)
        if await self._exists(managed_ledger_name(tenant, namespace, topic)):
            raise Conflict("This topic already exists")
        await self._open(tenant, namespace, topic, create=True)

    async def delete(self, tenant: str, namespace: str, topic: str) -> None:
        await self.namespaces.policies(tenant, namespace)
        name = managed_ledger_name(tenant, namespace, topic)
        if self.factory.get_if_open(name) is None and not await self._exists(name):
            raise NotFound(TOPIC_NOT_FOUND)
        await self.factory.delete(name)

    async def list(self, tenant: str, namespace: str) -> list[str]:
        await self.namespaces.policies(tenant, namespace)
        names = await self.store.children(f"/managed-ledgers/{tenant}/{namespace}/persistent")
        return [f"persistent://{tenant}/{namespace}/{codec_decode(n)}" for n in names]

    async def internal_stats(self, tenant: str, namespace: str, topic: str,
                             metadata: bool) -> dict[str, Any]:
        ledger = await self._open(tenant, namespace, topic, create=False)
        stats = ledger.internal_stats()
        if metadata:
            registered = set(await self.store.children("/ledgers/available"))
            registered |= set(await self.store.children("/ledgers/available/readonly"))
            for info in stats["ledgers"]:
                try:
                    md = await ledger.client.read_metadata(info["ledgerId"])
                except NoSuchLedger:
                    continue
                info["metadata"] = _metadata_text(md)
                bookies = {b for ensemble in md.ensembles.values() for b in ensemble}
                info["underReplicated"] = not bookies <= registered
        return stats

    # -- messages -----------------------------------------------------------------------------

    async def produce(self, tenant: str, namespace: str, topic: str,
                      request: dict[str, Any]) -> dict[str, Any]:
        policies = (await self.namespaces.policies(tenant, namespace)).dump()
        messages = request.get("messages") or []
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise InvalidInput("messages must be a list of ProducerMessage objects")
        producer = request.get("producerName") or DEFAULT_PRODUCER_NAME
        limit = self.settings.maxMessageSize
        encoded: list[bytes] = []
        now = int(time.time() * 1000)
        for index, message in enumerate(messages):
            payload = str(message.get("payload") or "").encode()
            if len(payload) > limit:
                raise PayloadTooLarge(
                    f"Message {index} of {len(payload)} bytes exceeds the maximum allowed "
                    f"message size of {limit} bytes (maxMessageSize)")
            properties = {str(k): str(v) for k, v in (message.get("properties") or {}).items()}
            event_time = message.get("eventTime")
            md = MessageMetadata(
                producer_name=producer,
                sequence_id=int(message.get("sequenceId") or 0),
                publish_time=now,
                properties=properties,
                partition_key=message.get("key"),
                event_time=int(event_time) if event_time not in (None, "") else 0,
                uncompressed_size=len(payload),
            )
            encoded.append(encode_message(md, payload))
        name = managed_ledger_name(tenant, namespace, topic)
        create = self._auto_create_allowed(policies)
        if not create and self.factory.get_if_open(name) is None and not await self._exists(
                name):
            raise NotFound("Topic not exist")
        ledger = await self._open(tenant, namespace, topic, create=True)
        # all adds of the request in flight at once; the managed ledger keeps call order
        outcomes = await asyncio.gather(*(ledger.add_entry(entry) for entry in encoded),
                                        return_exceptions=True)
        results = []
        for outcome in outcomes:
            if isinstance(outcome, LedgerError | ManagedLedgerError):
                results.append({"messageId": str(NON_PARTITIONED), "errorCode": 2,
                                "errorMsg": str(outcome), "schemaVersion": 0})
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                results.append({
                    "messageId": f"{outcome.ledger_id}:{outcome.entry_id}:{NON_PARTITIONED}",
                    "errorCode": 0,
                    "schemaVersion": 0,
                })
        return {"messagePublishResults": results, "schemaVersion": 0}

    async def _read(self, ledger: ManagedLedger, position: Position) -> ReadMessage:
        try:
            entry = await ledger.read_entry(position)
        except (NoSuchEntry, InvalidPosition) as exc:
            raise NotFound(f"Message id {position} not found: {exc}") from exc
        try:
            message = decode_message(entry)
        except MessageFormatError:
            return ReadMessage(entry, {
                "X-Pulsar-Message-ID": f"{position.ledger_id}:{position.entry_id}"})
        return ReadMessage(message.payload,
                           message_headers(position, message.metadata, len(message.payload)))

    async def message_by_id(self, tenant: str, namespace: str, topic: str, ledger_id: int,
                            entry_id: int) -> ReadMessage:
        ledger = await self._open(tenant, namespace, topic, create=False)
        return await self._read(ledger, Position(ledger_id, entry_id))

    async def examine(self, tenant: str, namespace: str, topic: str, initial_position: str,
                      message_position: int) -> ReadMessage:
        if initial_position not in ("latest", "earliest"):
            raise InvalidInput(
                "Invalid initial position: must be 'latest' or 'earliest'")
        if message_position < 1:
            raise NotAllowed("Invalid message position, it must be >= 1")
        ledger = await self._open(tenant, namespace, topic, create=False)
        try:
            position = ledger.nth_position(message_position, initial_position == "latest")
        except NoSuchEntry as exc:
            raise NotFound(
                f"Could not examine messages due to the total message count is "
                f"{ledger.number_of_entries}") from exc
        return await self._read(ledger, position)


def _metadata_text(md: Any) -> str:
    """LedgerMetadata as the broker's `LedgerMetadata.toString()` roughly prints it."""
    ensembles = {first: list(b) for first, b in md.ensembles.items()}
    return (f"LedgerMetadata{{formatVersion=3, ensembleSize={md.ensemble_size}, "
            f"writeQuorumSize={md.write_quorum_size}, ackQuorumSize={md.ack_quorum_size}, "
            f"state={md.state.name}, digestType=CRC32C, password=base64:, "
            f"ensembles={ensembles}, customMetadata={{...}}}}")
