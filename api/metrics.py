"""`GET /metrics`: the service's metrics in the Prometheus text format (0.0.4), as a Pulsar
broker serves them at `/metrics` on its web port. Every sample carries `cluster="<clusterName>"`,
as the broker's do.

Who may read it (Pulsar's `authenticateMetricsEndpoint`, default false): with authentication
off, anybody; with it on, anybody too unless `authenticateMetricsEndpoint=true`, and then any
authenticated role (a valid token; no authorisation rule, as the broker's servlet only
authenticates), else 401 `Need to authenticate to perform the request`. The route is mounted
outside the admin routes' authorisation dependency for that reason. No label ever holds a
header, a query value or a token: the labels are the cluster, and for the HTTP counts the
method, the route's template (`/admin/v2/tenants/{tenant}`, never the concrete path) and the
status.

Auto-recovery, under the names BookKeeper's stats give them (`replication_` scope, then
`auditor_` / `replication_worker_`), from this process's auditor candidate and worker:

- `replication_auditor_NUM_UNDER_REPLICATED_LEDGERS`: the marks in etcd now (every process
  reports it, read at scrape time);
- `replication_auditor_NUM_LEDGERS_NOT_ADHERING_TO_PLACEMENT_POLICY` (the last placement
  check), `replication_auditor_NUM_LEDGERS_CHECKED` (all-ledgers check, counter),
  `replication_auditor_CHECK_ALL_LEDGERS_TIME` and `..._REPLICAS_CHECK_TIME` (summaries, ms:
  runs and time spent), `replication_auditor_NUM_LEDGERS_HAVING_NO_REPLICA_OF_AN_ENTRY`,
  `..._LESS_THAN_AQ_REPLICAS_OF_AN_ENTRY`, `..._LESS_THAN_WQ_REPLICAS_OF_AN_ENTRY` (the last
  replicas check);
- `replication_replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED`,
  `..._NUM_ENTRIES_WRITTEN`, `..._NUM_BYTES_WRITTEN` (counters: repair progress);

and ours (no upstream name): `replication_auditor_is_leader` (1 while this process is the
auditor), `replication_auditor_bookie_audits_total`, `replication_auditor_placement_checks_total`,
`replication_auditor_ledgers_marked_total`, per periodic check (`check="checkAllLedgers"` or
`"replicasCheck"`) `replication_auditor_check_running`,
`replication_auditor_check_ledgers_checked` (in the running or last run),
`replication_auditor_check_last_run_timestamp_seconds`,
`replication_auditor_check_last_duration_seconds`, `replication_auditor_check_found_ledgers`,
`replication_auditor_replicas_check_unavailable_ledgers` (ledgers with a bookie that did not
answer the last replicas check: counted in none of the three upstream classes),
`replication_replication_worker_stuck_ledgers` (ledgers waiting with a reason),
`metadata_document_reads_total{document,source}` (single-document reads of each metadata document
kind through its repository, `source="store"` or `"cache"` for the watch-fed caches) and
`http_requests_total{method,route,status}`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fastapi import FastAPI
from prometheus_client.core import Metric
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth.authentication import AuthenticationFailed
from api.auth.authorization import NEED_AUTHENTICATION
from api.errors import NotAuthorized
from api.state import AppState
from metastore.repositories import READS
from storage import render_metrics
from storage.autorecovery import CheckProgress, UnderReplication

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PATHS = ("/metrics", "/metrics/")
UNMATCHED = "unmatched"  # the route label of a request no route took (no path in labels)
METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"})

RequestKey = tuple[str, str, str]  # method, route template, status


class RequestCounts:
    """ASGI middleware counting answered requests by method, route template and status."""

    def __init__(self, app: ASGIApp, counts: dict[RequestKey, int]) -> None:
        self.app = app
        self.counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            method = scope["method"] if scope["method"] in METHODS else "other"
            key = (method, route, str(status))
            self.counts[key] = self.counts.get(key, 0) + 1


class Family:
    """One metric family whose samples all carry the cluster label."""

    def __init__(self, name: str, doc: str, kind: str, cluster: str) -> None:
        self.metric = Metric(name, doc, kind)
        self.cluster = cluster

    def add(self, value: float, suffix: str = "", **labels: str) -> Family:
        self.metric.add_sample(self.metric.name + suffix, {"cluster": self.cluster, **labels},
                               value)
        return self


async def collect(state: AppState, counts: dict[RequestKey, int]) -> list[Metric]:
    cluster = state.settings.clusterName
    found: list[Metric] = []

    def family(name: str, doc: str, kind: str = "gauge") -> Family:
        made = Family(name, doc, kind, cluster)
        found.append(made.metric)
        return made

    marks = await UnderReplication(state.versioned_keys).marks()
    family("replication_auditor_NUM_UNDER_REPLICATED_LEDGERS",
           "ledgers marked under-replicated").add(len(marks))
    recovery = state.autorecovery
    if recovery is not None:
        auditor, worker = recovery.auditor, recovery.worker
        stats = auditor.stats
        family("replication_auditor_is_leader", "1 while this process is the auditor").add(
            1 if auditor.is_leader else 0)
        family("replication_auditor_NUM_LEDGERS_NOT_ADHERING_TO_PLACEMENT_POLICY",
               "ledgers failing the last placement check").add(len(stats.not_adhering))
        family("replication_auditor_bookie_audits_total", "bookie audits run",
               "counter").add(stats.bookie_audits)
        family("replication_auditor_placement_checks_total", "placement checks run",
               "counter").add(stats.placement_checks)
        family("replication_auditor_ledgers_marked_total", "ledgers marked by bookie audits",
               "counter").add(stats.ledgers_marked)
        periodic = auditor.periodic
        if periodic is not None:
            _periodic(family, periodic.all_ledgers, periodic.replicas)
            report = periodic.replicas_report
            for name, ledgers in (
                ("NUM_LEDGERS_HAVING_NO_REPLICA_OF_AN_ENTRY", report.no_replica),
                ("NUM_LEDGERS_HAVING_LESS_THAN_AQ_REPLICAS_OF_AN_ENTRY",
                 report.below_ack_quorum),
                ("NUM_LEDGERS_HAVING_LESS_THAN_WQ_REPLICAS_OF_AN_ENTRY",
                 report.below_write_quorum),
            ):
                family(f"replication_auditor_{name}", "found by the last replicas check").add(
                    len(ledgers))
            family("replication_auditor_replicas_check_unavailable_ledgers",
                   "ledgers with a bookie that did not answer the last replicas check").add(
                len(report.unavailable))
        family("replication_replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED",
               "ledgers repaired", "counter").add(worker.replicated_ledgers)
        family("replication_replication_worker_NUM_ENTRIES_WRITTEN",
               "entries copied to new bookies", "counter").add(worker.copied_entries)
        family("replication_replication_worker_NUM_BYTES_WRITTEN",
               "bytes copied to new bookies", "counter").add(worker.copied_bytes)
        family("replication_replication_worker_stuck_ledgers",
               "marked ledgers waiting, with a reason").add(len(worker.stuck))
    reads = family("metadata_document_reads_total",
                   "single-document reads of a metadata document kind, from the store or a cache",
                   "counter")
    for source, counted in (("store", READS.store), ("cache", READS.cache)):
        for kind, count in sorted(counted.items()):
            reads.add(count, document=kind, source=source)
    requests = family("http_requests_total", "HTTP requests answered", "counter")
    for (method, route, status), count in sorted(counts.items()):
        requests.add(count, method=method, route=route, status=status)
    return found


def _periodic(family: Callable[..., Family], all_ledgers: CheckProgress,
              replicas: CheckProgress) -> None:
    family("replication_auditor_NUM_LEDGERS_CHECKED", "ledgers checked by the all-ledgers "
           "check", "counter").add(all_ledgers.total_ledgers_checked)
    for name, progress in (("CHECK_ALL_LEDGERS_TIME", all_ledgers),
                           ("REPLICAS_CHECK_TIME", replicas)):
        family(f"replication_auditor_{name}", "runs and time spent (ms)", "summary") \
            .add(progress.runs, "_count").add(progress.total_duration * 1000, "_sum")
    checks: Iterable[CheckProgress] = (all_ledgers, replicas)
    for name, doc, value in (
        ("running", "1 while the check runs", lambda p: 1 if p.running else 0),
        ("ledgers_checked", "ledgers checked in the running or last run",
         lambda p: p.ledgers_checked),
        ("last_run_timestamp_seconds", "start of the last run (Unix time)",
         lambda p: p.last_started or 0),
        ("last_duration_seconds", "duration of the last finished run",
         lambda p: p.last_duration or 0),
        ("found_ledgers", "ledgers the last run marked or reported",
         lambda p: len(p.found)),
    ):
        made = family(f"replication_auditor_check_{name}", doc)
        for progress in checks:
            made.add(value(progress), check=progress.name)


async def metrics(request: Request) -> Response:
    """The metrics, after the `authenticateMetricsEndpoint` check."""
    state: AppState = request.app.state.pulsar
    guard = state.guard
    if state.settings.authenticateMetricsEndpoint and guard.authenticator is not None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            guard.authenticator.authenticate(headers)
        except AuthenticationFailed:
            raise NotAuthorized(NEED_AUTHENTICATION) from None
    counts: dict[RequestKey, int] = request.app.state.request_counts
    body = render_metrics(await collect(state, counts))
    return Response(body, media_type=CONTENT_TYPE)


def install_metrics(app: FastAPI) -> None:
    """Mount `/metrics` (outside the schema and the admin authorisation) and the request
    counter (innermost, so it sees the matched route)."""
    counts: dict[RequestKey, int] = {}
    app.state.request_counts = counts
    app.add_middleware(RequestCounts, counts=counts)
    for path in PATHS:
        app.add_route(path, metrics, methods=["GET"], include_in_schema=False)
