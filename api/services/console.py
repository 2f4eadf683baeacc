"""What the placement console at `/console/` shows, computed from the stored data by the
placement engine.

- `overview`: the bookies (id, hostname, group, rack, region, state in words, disk use,
  ledger count), every namespace (groups, strict, E/Qw/Qa, anti-affinity group, the bookies
  it may use now, as `placement` computes them) and the placement violations: every ledger
  whose ensemble breaks its namespace's *current* policy, with the reasons of
  `placement.check_fragment` (a ledger's namespace is its managed ledger's, from the ledger's
  `pulsar/managed-ledger` custom metadata; a ledger without one is judged under the broker's
  defaults).
- `namespace_ledgers`: a namespace's topics and their ledgers, each ensemble bookie by bookie.
- `preview`: the consequences of a change not yet made (a bookie moved to another rack or
  group, a namespace's groups or strict mode changed): the ledgers that would violate, the
  ones that would stop violating, and the namespaces left with fewer usable bookies than
  their ensemble size. Nothing is written.

Bookie states: `writable` and `read-only` by the bookie's registration; `registered but
unplaced` when it is registered but absent from the rack map (`/bookies`); `not running` when
the rack map (or this service's supervisor) knows it but it is not registered.

The topology is the watch-fed `TopologySnapshot` every placement reads; the ledgers, their
verdicts and each namespace's usable bookies are kept between requests by
`api.services.console_ledgers.ConsoleLedgers`.

The ledgers are read in the background from the service's start. Until that read is done the
overview answers at once with everything that needs no ledgers (bookies, namespaces, their
usable bookies) and `ledgerStatus` `{"state": "reading", "read": n, "total": N}`, with
`violations` and every ledger and topic count null; `namespace_ledgers` answers the same status
and no topics. Either fills in once the read is done; then, while the first judgement of every
ledger lasts, `ledgerStatus.state` is `judging` (counts given, `violations` null), and `ready`
after it.

A caller who is not a super-user (authorization on) sees only the namespaces of the tenants it
administers, their ledgers and violations, and no bookies. The watch being super-user only, such
a caller follows the overview by conditional GET: `validator` is the document's entity tag,
computed from one revision read, and an unchanged one answers 304 without building anything.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.auth.authorization import NEED_SUPER_USER, Guard
from api.errors import InvalidInput, NotAuthorized, NotFound, ServiceUnavailable
from api.services.console_ledgers import (
    ConsoleLedgers,
    LedgerRecord,
    NamespacePolicy,
    UsableBookies,
    Verdict,
)
from api.services.namespaces import NamespaceService
from api.services.storage_bookies import StorageBookieService
from api.services.tenants import TenantService
from metastore.documents import Registrations
from metastore.errors import MetastoreError
from metastore.readers import read_all_local_policies, read_policies
from metastore.store import MetadataStore
from metastore.topology import ClusterView, TopologySnapshot
from placement import (
    AffinityGroups,
    PlacementConfig,
    Topology,
    default_request,
    effective_groups,
)
from placement.topology import region_of

WRITABLE = "writable"
READ_ONLY = "read-only"
UNPLACED = "registered but unplaced"
NOT_RUNNING = "not running"


@dataclass
class Scope:
    """What the caller may see: everything, or the namespaces of some tenants."""

    tenants: frozenset[str] | None = None  # None: every tenant, and the bookies

    def sees(self, namespace: str) -> bool:
        if self.tenants is None:
            return True
        return namespace.split("/", 1)[0] in self.tenants

    @property
    def sees_bookies(self) -> bool:
        return self.tenants is None


@dataclass(frozen=True)
class BookieChange:
    bookie: str
    group: str
    rack: str | None
    hostname: str | None


@dataclass(frozen=True)
class NamespaceChange:
    namespace: str
    affinity: AffinityGroups | None  # None: the namespace's own groups removed


# how long a request waits for a read of the ledgers under way before answering without them
LEDGER_WAIT = 0.5
# and for the first judgement of every ledger before answering without the violations
JUDGEMENT_WAIT = 2.0


@dataclass
class Inputs:
    """One read of everything the console judges: topology, namespace policies, ledgers."""

    view: ClusterView
    namespaces: dict[str, NamespacePolicy]
    ledgers: Mapping[int, LedgerRecord]
    revision: int


def bookie_state(bookie: str, registrations: Registrations, placed: bool) -> str:
    if bookie in registrations.writable:
        return WRITABLE if placed else UNPLACED
    if bookie in registrations.read_only:
        return READ_ONLY if placed else UNPLACED
    return NOT_RUNNING


def visible(verdicts: Mapping[int, Verdict], scope: Scope) -> list[Verdict]:
    """The violations `scope` may see, by ledger id."""
    found = (verdicts[i] for i in sorted(verdicts))
    return [v for v in found
            if (scope.sees(v["namespace"]) if v["namespace"] else scope.sees_bookies)]


def short_namespaces(
    topology: Topology, namespaces: Mapping[str, NamespacePolicy], config: PlacementConfig,
    scope: Scope, usable_bookies: UsableBookies,
) -> list[dict[str, Any]]:
    """Namespaces whose usable bookies are fewer than their ensemble size."""
    out = []
    for name, policy in sorted(namespaces.items()):
        if not scope.sees(name):
            continue
        usable = len(usable_bookies.of(topology, policy, config))
        if usable < policy.request.ensemble_size:
            out.append({"namespace": name, "usableBookies": usable,
                        "ensembleSize": policy.request.ensemble_size})
    return out


def moved(rack_map: Mapping[str, Mapping[str, Any]], change: BookieChange) -> dict[str, Any]:
    """The rack map with `change.bookie` taken out of every group and put in `change.group`
    (as `updateBookieRackInfo` does); its old rack and hostname kept unless given."""
    old: dict[str, Any] = {}
    out: dict[str, dict[str, Any]] = {}
    for group, members in rack_map.items():
        kept = {}
        for bookie, info in members.items():
            if bookie == change.bookie:
                old = dict(info) if isinstance(info, Mapping) else {}
            else:
                kept[bookie] = info
        if kept:
            out[group] = kept
    info = dict(old)
    if change.rack is not None:
        info["rack"] = change.rack
    if change.hostname is not None:
        info["hostname"] = change.hostname
    out.setdefault(change.group, {})[change.bookie] = info
    return out


class ConsoleService:
    def __init__(
        self,
        store: MetadataStore,
        ledgers: ConsoleLedgers,
        snapshot: TopologySnapshot,
        config: PlacementConfig,
        tenants: TenantService,
        namespaces: NamespaceService,
        storage: StorageBookieService,
        guard: Guard,
        audits_root: Path,
        cluster: str,
    ) -> None:
        self.store = store
        self.ledgers = ledgers
        self.usable = ledgers.usable
        self.snapshot = snapshot
        self.config = config
        self.tenants = tenants
        self.namespaces = namespaces
        self.storage = storage
        self.guard = guard
        self.audits_root = audits_root
        self.cluster = cluster

    async def scope(self, role: str | None) -> Scope:
        guard = self.guard
        if not guard.enabled or not guard.authorization_enabled or role in guard.super_users:
            return Scope()
        tenants = await self._tenants()
        mine = [t for t in tenants if role in (await guard.tenant_admins(t) or frozenset())]
        return Scope(frozenset(mine))

    async def _tenants(self) -> list[str]:
        return await self.tenants.list()

    async def read(self) -> Inputs:
        revision = await self.store.revision()
        ledgers = await self.ledgers.current()
        view = await self.snapshot.current()
        namespaces = await self._namespace_policies()
        return Inputs(view, namespaces, ledgers, revision)

    async def _namespace_policies(self) -> dict[str, NamespacePolicy]:
        local = await read_all_local_policies(self.store)
        out: dict[str, NamespacePolicy] = {}
        for tenant in await self._tenants():
            for name in await self.namespaces.namespaces_of(tenant):
                if name.count("/") != 1:  # a v1 name (tenant/cluster/ns): no placement of its own
                    continue
                namespace = name.split("/", 1)[1]
                try:
                    policies = await read_policies(self.store, tenant, namespace)
                except MetastoreError:
                    continue
                own = local.get(name)
                out[name] = NamespacePolicy(
                    name, default_request(policies.persistence_request, self.config),
                    own.bookie_affinity if own else None,
                    own.anti_affinity_group if own else None,
                )
        return out

    async def validator(self, role: str | None) -> str | None:
        """The overview's entity tag for a caller who sees no bookies (a tenant admin): the
        same tag, the same document, so its conditional GET answers 304 after one revision
        read. It covers everything the document is made of: the role, the store's revision
        (namespaces, tenants and their admins are read at it), the topology and ledgers its
        watches delivered, and how far the ledgers are read and judged. None for a caller
        who sees bookies (their disk use and the audit report change without a write)."""
        guard = self.guard
        if not guard.enabled or not guard.authorization_enabled or role in guard.super_users:
            return None
        progress = self.ledgers.progress()
        token = (f"{role}\0{await self.store.revision()}\0{self.snapshot.generation}\0"
                 f"{self.ledgers.generation}\0{self.ledgers.judgements}\0"
                 f"{progress['state']}\0{progress['read']}")
        return '"' + hashlib.sha256(token.encode()).hexdigest()[:32] + '"'

    async def overview(self, role: str | None) -> dict[str, Any]:
        scope = await self.scope(role)
        # `ready` is decided once: the read may finish while the inputs below are gathered,
        # and inputs gathered without the ledgers must not be answered as the finished read.
        ready = await self.ledgers.wait_loaded(LEDGER_WAIT)
        status = self.ledgers.progress()  # no await since `ready`: the same state
        if ready:
            inputs = await self.read()
        else:
            inputs = Inputs(await self.snapshot.current(), await self._namespace_policies(), {},
                            await self.store.revision())
        topology = inputs.view.topology
        namespaces = {n: p for n, p in inputs.namespaces.items() if scope.sees(n)}
        violations: list[Verdict] | None = None
        counts: Mapping[str, int] | None = None
        topics: Mapping[str, int] | None = None
        ledger_counts: Mapping[str, int] | None = None
        if ready:
            status = {"state": "ready", "read": len(inputs.ledgers), "total": len(inputs.ledgers)}
            verdicts = await self.ledgers.verdicts(topology, inputs.namespaces, self.config,
                                                   wait=JUDGEMENT_WAIT)
            if verdicts is None:
                status["state"] = "judging"
            else:
                violations = visible(verdicts, scope)
            counts, topics, ledger_counts = self.ledgers.counts()
        return {
            "cluster": self.cluster,
            "mode": self.config.mode.value,
            "revision": inputs.revision,
            "superUser": scope.sees_bookies,
            "tenants": None if scope.tenants is None else sorted(scope.tenants),
            "ledgerStatus": status,
            "bookies": await self._bookies(inputs, counts) if scope.sees_bookies else None,
            "namespaces": [
                self._namespace(policy, topology,
                                None if topics is None else topics.get(name, 0),
                                None if ledger_counts is None else ledger_counts.get(name, 0))
                for name, policy in sorted(namespaces.items())
            ],
            "violations": violations,
            "shortNamespaces": short_namespaces(topology, namespaces, self.config, scope,
                                                self.usable),
            "auditReport": self.latest_audit_report() if scope.sees_bookies else None,
        }

    def _namespace(
        self, policy: NamespacePolicy, topology: Topology, topics: int | None,
        ledgers: int | None,
    ) -> dict[str, Any]:
        own = policy.affinity
        groups = effective_groups(own, self.config)
        return {
            "name": policy.name,
            "primary": list(groups.primary) if groups else [],
            "secondary": list(groups.secondary) if groups else [],
            "strict": bool(groups and groups.strict),
            "ownGroups": own is not None,
            "ensembleSize": policy.request.ensemble_size,
            "writeQuorum": policy.request.write_quorum,
            "ackQuorum": policy.request.ack_quorum,
            "antiAffinityGroup": policy.anti_affinity_group,
            "usableBookies": sorted(self.usable.of(topology, policy, self.config)),
            "topics": topics,
            "ledgers": ledgers,
        }

    async def _bookies(
        self, inputs: Inputs, counts: Mapping[str, int] | None
    ) -> list[dict[str, Any]]:
        view = inputs.view
        placed: dict[str, tuple[str | None, dict[str, Any]]] = {}
        for group, members in sorted(view.rack_map.items()):
            for bookie, info in members.items():
                # type(...) is dict: the decoded JSON; an ABC check per bookie costs more
                placed.setdefault(bookie, (group, info if type(info) is dict else {}))
        supervised = set(self.storage.local.bookie_ids) if self.storage.local else set()
        ids = sorted(set(placed) | view.registrations.all | supervised)
        disks = {b: await self.storage.disk(b) for b in sorted(supervised)}
        out = []
        for bookie in ids:
            used, capacity = disks.get(bookie, (None, None))
            group_of, info = placed.get(bookie, (None, {}))
            rack = view.topology.location.get(bookie)
            host = info.get("hostname")
            out.append({
                "id": bookie,
                "hostname": host if type(host) is str else bookie.rsplit(":", 1)[0],
                "group": group_of,
                "rack": rack if rack is not None else view.topology.default_location,
                "region": region_of(rack) if rack and rack.count("/") >= 2 else None,
                "state": bookie_state(bookie, view.registrations, bookie in placed),
                "diskUsed": used,
                "diskCapacity": capacity,
                "ledgers": None if counts is None else counts.get(bookie, 0),
            })  # fmt: skip
        return out

    def latest_audit_report(self) -> str | None:
        """The path of the newest finished Spark audit's HTML report, if any."""
        reports = []
        with contextlib.suppress(OSError):
            for report in (self.audits_root / "audits").glob("*/audit/report.html"):
                reports.append((report.stat().st_mtime, report.parent.parent.name))
        if not reports:
            return None
        return f"/admin/v2/storage/audit/{max(reports)[1]}/report"

    async def namespace_ledgers(self, tenant: str, namespace: str) -> dict[str, Any]:
        """The namespace's topics, each with its ledgers and their ensembles (none while the
        ledgers are being read: `ledgerStatus` says how far)."""
        name = f"{tenant}/{namespace}"
        await self.namespaces.policies(tenant, namespace)  # 404 in Pulsar's words
        if not await self.ledgers.wait_loaded(LEDGER_WAIT):
            return {"namespace": name, "ledgerStatus": self.ledgers.progress(), "topics": []}
        records = await self.ledgers.current()
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for record in records.values():
            if record.namespace != name:
                continue
            md = record.metadata
            by_topic.setdefault(record.topic, []).append({
                "ledgerId": md.ledger_id,
                "state": md.state.name,
                "ensembleSize": md.ensemble_size,
                "writeQuorum": md.write_quorum_size,
                "ackQuorum": md.ack_quorum_size,
                "ensembles": [{"firstEntry": first, "bookies": list(bookies)}
                              for first, bookies in sorted(md.ensembles.items())],
            })  # fmt: skip
        return {
            "namespace": name,
            "ledgerStatus": {"state": "ready", "read": len(records), "total": len(records)},
            "topics": [{"name": t, "ledgers": sorted(ls, key=lambda x: x["ledgerId"])}
                       for t, ls in sorted(by_topic.items())],
        }

    async def preview(
        self, role: str | None, change: BookieChange | NamespaceChange
    ) -> dict[str, Any]:
        """What would follow from `change`, judged by the placement engine (503 while the
        ledgers are being read)."""
        scope = await self.scope(role)
        if not await self.ledgers.wait_loaded(LEDGER_WAIT):
            p = self.ledgers.progress()
            raise ServiceUnavailable(
                f"The ledgers are still being read ({p['read']} of "
                f"{'?' if p['total'] is None else p['total']}); try again shortly")
        inputs = await self.read()
        before = inputs.view.topology
        after = before
        namespaces = dict(inputs.namespaces)
        if isinstance(change, BookieChange):
            if not scope.sees_bookies:
                raise NotAuthorized(NEED_SUPER_USER)
            rack_map = moved(inputs.view.rack_map, change)
            after = ClusterView.build(rack_map, inputs.view.registrations, self.config).topology
        else:
            policy = namespaces.get(change.namespace)
            if policy is None or not scope.sees(change.namespace):
                raise NotFound("Namespace does not exist")
            namespaces[change.namespace] = NamespacePolicy(
                policy.name, policy.request, change.affinity, policy.anti_affinity_group)
        kept = await self.ledgers.verdicts(before, inputs.namespaces, self.config)
        assert kept is not None  # no `wait`: judged to the end
        was = visible(kept, scope)
        will = visible(await self.ledgers.what_if(after, namespaces, self.config), scope)
        was_ids = {v["ledgerId"] for v in was}
        will_ids = {v["ledgerId"] for v in will}
        short_before = {s["namespace"] for s in short_namespaces(
            before, inputs.namespaces, self.config, scope, self.usable)}
        short_after = short_namespaces(after, namespaces, self.config, scope, self.usable)
        return {
            "violationsBefore": len(was),
            "violationsAfter": len(will),
            "newViolations": [v for v in will if v["ledgerId"] not in was_ids],
            "resolvedViolations": sorted(was_ids - will_ids),
            "shortNamespaces": short_after,
            "newShortNamespaces": [s for s in short_after if s["namespace"] not in short_before],
        }


def parse_change(body: Mapping[str, Any]) -> BookieChange | NamespaceChange:
    """A proposed change from the preview's JSON body; 400 when it is neither kind."""
    bookie = body.get("bookie")
    namespace = body.get("namespace")
    if isinstance(bookie, Mapping) and namespace is None:
        bookie_id, group = bookie.get("id"), bookie.get("group")
        rack, host = bookie.get("rack"), bookie.get("hostname")
        if not isinstance(bookie_id, str) or not bookie_id or not isinstance(group, str) \
                or not group:
            raise InvalidInput("A bookie change needs 'id' and 'group'")
        if not (rack is None or isinstance(rack, str)) or not (
                host is None or isinstance(host, str)):
            raise InvalidInput("'rack' and 'hostname' must be strings")
        return BookieChange(bookie_id, group, rack, host)
    if isinstance(namespace, Mapping) and bookie is None:
        name = namespace.get("name")
        if not isinstance(name, str) or name.count("/") != 1:
            raise InvalidInput("A namespace change needs 'name' as tenant/namespace")
        primary = _groups(namespace.get("primary"), "primary")
        secondary = _groups(namespace.get("secondary"), "secondary")
        strict = namespace.get("strict", False)
        if not isinstance(strict, bool):
            raise InvalidInput("'strict' must be true or false")
        if not primary and not secondary:
            return NamespaceChange(name, None)
        return NamespaceChange(name, AffinityGroups(primary, secondary, strict))
    raise InvalidInput("Expected one of 'bookie' or 'namespace'")


def _groups(value: object, label: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str) or not all(
            isinstance(g, str) for g in value):
        raise InvalidInput(f"'{label}' must be a list of group names")
    return tuple(g.strip() for g in value if g.strip())
