"""BookKeeper's HTTP admin answers (`/api/v1/...`), as a real bookie's HTTP server gives
them (shared/reference/storage-pipeline-anchors.md 1.4; BookKeeper's `GetLedgerMetaService`,
`ListLedgerService`, `ListBookiesService`):

- bodies are Jackson's default pretty printer (`"key" : value`, two-space indent);
- a ledger is the `LedgerMetadataImpl` bean: `ledgerId, metadataFormatVersion, ensembleSize,
  writeQuorumSize, ackQuorumSize, state, length, lastEntryId, ctime, digestType, password,
  customMetadata, allEnsembles, closed, ctoken` (Jackson's order: properties backed by a
  field in field order, then getter-only ones); bytes are base64, bookies `{"id": ...}`
  objects, a missing ctime the store's creation time (0 on etcd; -1 for a V1 value);
- `ledger/list` without `print_metadata=true` maps ids to null; with it, to the serialized
  metadata as a (garbled) string, or with `decode_meta=true` to the bean; `page` (100 a page,
  1-based) only counts with `print_metadata=true`, and page 1 holds 99 ledgers (upstream's
  index arithmetic, kept);
- maps built as Java `HashMap`s come out in `HashMap` iteration order;
- any other method than GET is 404 `Not found method. Should be GET method`, as is a missing
  `ledger_id`; a failure while answering (unknown ledger, bad number, store down) is the
  HTTP server's bare 500.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from javaformats import hash_map_order, jackson_pretty, parse_java_int, parse_java_long
from metastore.bookie_service_info import BOOKIE_RPC, decode_bookie_service_info
from metastore.errors import NotFound
from metastore.ledger_metadata import LedgerMetadata, encode_ledger_metadata
from metastore.ledgers import LedgerMetadataStore
from metastore.repositories import BookieRegistrations, ForceGc
from metastore.versioned_keys import VersionedKeys
from storage import encode_force_request
from storage.autorecovery import UnderReplication

log = logging.getLogger(__name__)

NOT_GET = "Not found method. Should be GET method"
INTERNAL_ERROR = "Internal Server Error"
LIST_LEDGER_BATCH_SIZE = 100


@dataclass(frozen=True)
class AdminAnswer:
    """What the bookie's HTTP server sends: a status and a text body, no Content-Type."""

    status: int
    body: str


NOT_GET_ANSWER = AdminAnswer(404, NOT_GET)
NOT_PUT_ANSWER = AdminAnswer(404, "Not found method. Should be PUT method")
NOT_GC_METHOD = "Not found method. Should be PUT to trigger GC, Or GET to get Force GC state."
NO_UNDER_REPLICATED = "No under replicated ledgers found"
NO_AUDITOR = "No auditor elected"


class BookKeeperAdminService:
    def __init__(self, keys: VersionedKeys, default_recovery_delay: int = 0) -> None:
        self.keys = keys
        self.ledgers = LedgerMetadataStore(keys)
        self.underreplication = UnderReplication(keys)
        self.registrations = BookieRegistrations(keys.store)
        self.force_gc = ForceGc(keys.store)
        self.default_recovery_delay = default_recovery_delay

    async def list_under_replicated(self, params: Mapping[str, str]) -> AdminAnswer:
        """`GET /api/v1/autorecovery/list_under_replicated_ledger/?missingreplica=
        &excludingmissingreplica=&printmissingreplica` (`ListUnderReplicatedLedgerService`):
        an array of ledger ids, or with `printmissingreplica` (present is enough) a map id ->
        missing bookies; none: 404 `No under replicated ledgers found`."""
        including = (params.get("missingreplica") or "").strip()
        excluding = (params.get("excludingmissingreplica") or "").strip()
        try:
            marks = await self.underreplication.marks()
        except Exception as exc:
            log.exception("under-replicated ledgers")
            return AdminAnswer(404, f"Exception when get.{exc}")
        chosen = [m for m in marks
                  if (not including or including in m.replicas)
                  and (not excluding or excluding not in m.replicas)]
        if not chosen:
            return AdminAnswer(404, NO_UNDER_REPLICATED)
        if "printmissingreplica" in params:
            return AdminAnswer(200, bookkeeper_json(
                {str(m.ledger_id): list(m.replicas) for m in chosen}))
        return AdminAnswer(200, bookkeeper_json([m.ledger_id for m in chosen]))

    async def trigger_audit(self) -> AdminAnswer:
        """`PUT /api/v1/autorecovery/trigger_audit` (`TriggerAuditService`): rewrite
        lostBookieRecoveryDelay as it is, which the auditor answers with an audit."""
        try:
            await self.underreplication.trigger_audit(self.default_recovery_delay)
        except Exception as exc:
            log.exception("trigger audit")
            return AdminAnswer(404, f"Exception when do operation.{exc}")
        return AdminAnswer(200, "Success trigger audit.")

    async def who_is_auditor(self) -> AdminAnswer:
        """`GET /api/v1/autorecovery/who_is_auditor` (`WhoIsAuditorService`): plain text."""
        try:
            auditor = await self.underreplication.auditor()
        except Exception:
            log.exception("who is auditor")
            return AdminAnswer(500, INTERNAL_ERROR)
        if auditor is None:
            return AdminAnswer(404, NO_AUDITOR)
        return AdminAnswer(200, f"Auditor: {auditor}")

    async def ledger_metadata(self, params: Mapping[str, str]) -> AdminAnswer:
        """`GET /api/v1/ledger/metadata?ledger_id=N`: `{"N": <ledger bean>}`."""
        if "ledger_id" not in params:
            return NOT_GET_ANSWER
        # A bad or unknown id is the caller's mistake: one line in the log, not a traceback
        # (anyone can send them); upstream answers both with its bare 500.
        try:
            ledger_id = parse_java_long(params["ledger_id"])
        except ValueError as exc:
            log.warning("ledger metadata: %s", exc)
            return AdminAnswer(500, INTERNAL_ERROR)
        try:
            found = await self.ledgers.read(ledger_id)
        except NotFound:
            log.warning("ledger metadata: no ledger %d", ledger_id)
            return AdminAnswer(500, INTERNAL_ERROR)
        except Exception:
            log.exception("ledger metadata of ledger %d", ledger_id)
            return AdminAnswer(500, INTERNAL_ERROR)
        return AdminAnswer(200, bookkeeper_json({str(ledger_id): ledger_bean(found.metadata)}))

    async def list_ledgers(self, params: Mapping[str, str]) -> AdminAnswer:
        """`GET /api/v1/ledger/list?print_metadata=&decode_meta=&page=`."""
        print_metadata = params.get("print_metadata") == "true"
        decode = params.get("decode_meta", "false") == "true"
        try:
            page = -1
            if print_metadata and "page" in params:
                page = parse_java_int(params["page"])
            output: dict[str, Any] = {}
            if not print_metadata:
                async for ledger_id in self.ledgers.ledger_ids():
                    output[str(ledger_id)] = None
            else:
                start = (page - 1) * LIST_LEDGER_BATCH_SIZE if page > 0 else 0
                end = start + LIST_LEDGER_BATCH_SIZE - 1 if page > 0 else 0
                index = 0
                async for stored in self.ledgers.ledgers():
                    index += 1
                    if end == 0 or start <= index <= end:
                        metadata = stored.metadata
                        output[str(metadata.ledger_id)] = (
                            ledger_bean(metadata)
                            if decode
                            else encode_ledger_metadata(metadata).decode(errors="replace")
                        )
        except Exception:
            log.exception("ledger list")
            return AdminAnswer(500, INTERNAL_ERROR)
        return AdminAnswer(200, bookkeeper_json(output))

    async def list_bookies(self, params: Mapping[str, str]) -> AdminAnswer:
        """`GET /api/v1/bookie/list_bookies?type=rw|ro&print_hostnames=true`: bookie id to
        hostname (null unless `print_hostnames=true`)."""
        read_only = params.get("type") == "ro"
        print_hostnames = params.get("print_hostnames") == "true"
        try:
            bookies = await self.registrations.names(readonly=read_only)
            output: dict[str, str | None] = {}
            for bookie in bookies:
                host = await self._hostname(bookie, readonly=read_only)
                output.setdefault(bookie, host if print_hostnames else None)
        except Exception:
            log.exception("bookie list")
            return AdminAnswer(500, INTERNAL_ERROR)
        return AdminAnswer(200, bookkeeper_json(hash_map_order(output.items())))

    async def trigger_gc(self, body: bytes) -> AdminAnswer:
        """`PUT /api/v1/bookie/gc` (`TriggerGCService`) for the cluster: one request at
        `ForceGc.REQUEST` that every bookie watches (`storage.bookie.gc`). No body: a
        plain forced run; a body must be a JSON object with booleans `forceMajor` and
        `forceMinor` (upstream unboxes both: either missing, or a body that is not JSON, is
        its server's bare 500). 200: the JSON string `Triggered GC on BookieServer: ...`
        naming the registered bookies."""
        try:
            request = self._gc_request(body)
            await self.force_gc.request(request)
            bookies = await self._registered_bookies()
        except Exception:
            log.exception("trigger gc")
            return AdminAnswer(500, INTERNAL_ERROR)
        servers = ", ".join(f"Bookie Server listening on {b} with id {b}" for b in bookies)
        return AdminAnswer(200, bookkeeper_json(f"Triggered GC on BookieServer: {servers}"))

    @staticmethod
    def _gc_request(body: bytes) -> bytes:
        if not body.strip():
            return encode_force_request(None, None)
        config = json.loads(body)
        major, minor = config.get("forceMajor"), config.get("forceMinor")
        if not isinstance(major, bool) or not isinstance(minor, bool):
            raise ValueError("forceMajor and forceMinor must both be booleans")
        return encode_force_request(major, minor)

    async def gc_state(self) -> AdminAnswer:
        """`GET /api/v1/bookie/gc`: `{"is_in_force_gc" : "true"}` while any registered bookie
        runs (or has pending) a forced GC, else `"false"`."""
        try:
            running = False
            for bookie in await self._registered_bookies():
                found = await self.force_gc.state(bookie)
                if found is not None and json.loads(found).get("is_in_force_gc") == "true":
                    running = True
        except Exception:
            log.exception("gc state")
            return AdminAnswer(500, INTERNAL_ERROR)
        return AdminAnswer(200, bookkeeper_json({"is_in_force_gc": "true" if running else "false"}))

    async def _registered_bookies(self) -> list[str]:
        writable = await self.registrations.names(readonly=False)
        return sorted({*writable, *await self.registrations.names(readonly=True)})

    async def _hostname(self, bookie_id: str, *, readonly: bool) -> str:
        """The host of the bookie's `bookie-rpc` endpoint (BookKeeper's address resolver),
        else the host part of its id."""
        found = await self.registrations.get(bookie_id, readonly=readonly)
        info = decode_bookie_service_info(bookie_id, found or b"")
        endpoint = next((e for e in info.endpoints if e.protocol == BOOKIE_RPC), None)
        if endpoint is not None:
            return endpoint.host
        host, sep, port = bookie_id.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bookie id {bookie_id!r} is not host:port")
        return host


def bookkeeper_json(value: Any) -> str:
    """BookKeeper's `JsonUtil.toJson`: Jackson's pretty printer, null fields kept."""
    return jackson_pretty(value, omit_null=False)


def ledger_bean(metadata: LedgerMetadata) -> dict[str, Any]:
    """`LedgerMetadataImpl` as Jackson writes it, in Jackson's property order."""
    ctime = metadata.ctime
    if ctime is None:  # the store's creation time: 0 on etcd; V1 values never had one
        ctime = -1 if metadata.format_version == 1 else 0
    return {
        "ledgerId": metadata.ledger_id,
        "metadataFormatVersion": metadata.format_version,
        "ensembleSize": metadata.ensemble_size,
        "writeQuorumSize": metadata.write_quorum_size,
        "ackQuorumSize": metadata.ack_quorum_size,
        "state": metadata.state.name,
        "length": metadata.length,
        "lastEntryId": metadata.last_entry_id,
        "ctime": ctime,
        "digestType": None if metadata.digest_type is None else metadata.digest_type.name,
        "password": _base64(metadata.password or b""),
        "customMetadata": hash_map_order(  # read into a HashMap, then copied as it iterates
            (k, _base64(v)) for k, v in metadata.custom_metadata.items()
        ),
        "allEnsembles": {
            str(first): [{"id": bookie} for bookie in bookies]
            for first, bookies in metadata.ensembles.items()
        },
        "closed": metadata.is_closed,
        "ctoken": metadata.ctoken,
    }


def _base64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


