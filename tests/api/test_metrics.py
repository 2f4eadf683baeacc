"""The service's `/metrics` over HTTP, on real servers: Prometheus text with the cluster label,
under-replicated ledgers read from etcd, request counts by route template (never a path or a
query value), auto-recovery leadership and periodic-check progress, and who may read it
(Pulsar's `authenticateMetricsEndpoint`)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from api.auth.authorization import NEED_AUTHENTICATION
from metastore import paths
from metastore.embedded import EmbeddedEtcd
from tests.support import RawEtcd, ServerProcess, TokenServers, token, wait_until


def value(text: str, name: str, **labels: str) -> float | None:
    """The sample `name` whose labels include `labels`, as written."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, number = line.rpartition(" ")
            found = dict(re.findall(r'(\w+)="([^"]*)"', head))
            if head.split("{")[0] == name and all(found.get(k) == v for k, v in labels.items()):
                return float(number)
    return None


def test_metrics_count_marks_and_requests_by_route_template(
    server: ServerProcess, clean_store: RawEtcd
) -> None:
    clean_store.put(paths.underreplicated_ledger(77), 'replica: "127.0.0.1:1"\nctime: 1\n')
    clean_store.put(paths.underreplicated_ledger(78), 'replica: "127.0.0.1:1"\nctime: 1\n')
    labels = {"cluster": "test", "method": "GET", "route": "/admin/v2/tenants/{tenant}",
              "status": "404"}
    with httpx.Client(base_url=server.url, timeout=10) as http:
        # The server is shared with other tests: count this request as a difference.
        before = value(http.get("/metrics").text, "http_requests_total", **labels) or 0.0
        assert http.get("/admin/v2/tenants/secret-tenant",
                        params={"token": "s3cr3t-value"}).status_code == 404
        response = http.get("/metrics")
        assert http.get("/metrics/").status_code == 200
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = response.text
    assert list(text_string_to_metric_families(text))  # parses as the Prometheus format
    assert value(text, "replication_auditor_NUM_UNDER_REPLICATED_LEDGERS", cluster="test") == 2
    assert value(text, "http_requests_total", **labels) == before + 1
    assert "secret-tenant" not in text and "s3cr3t-value" not in text
    assert "replication_auditor_is_leader" not in text  # auto-recovery is off here


@pytest.fixture(scope="module")
def own_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEtcd]:
    etcd = EmbeddedEtcd(tmp_path_factory.mktemp("metrics-etcd"))
    etcd.start()
    yield etcd
    etcd.stop()


def test_authenticated_metrics_and_auto_recovery_progress(
    own_etcd: EmbeddedEtcd, token_server: TokenServers
) -> None:
    process = token_server("admin-role", metadata_store_url=own_etcd.url,
                           authenticateMetricsEndpoint="true", autoRecoveryDaemonEnabled="true",
                           auditorPeriodicCheckInterval="1", auditorReplicasCheckInterval="1",
                           metadataStoreSessionTimeoutMillis="2000")
    try:
        with httpx.Client(base_url=process.url, timeout=10) as http:
            for headers in ({}, {"Authorization": "Bearer not-a-jwt"}):
                refused = http.get("/metrics", headers=headers)
                assert refused.status_code == 401
                assert refused.json() == {"reason": NEED_AUTHENTICATION}
            # any authenticated role may read it: no super-user needed
            someone = {"Authorization": f"Bearer {token('just-a-reader')}"}

            def audited() -> str | None:
                response = http.get("/metrics", headers=someone)
                assert response.status_code == 200
                text = response.text
                runs = value(text, "replication_auditor_CHECK_ALL_LEDGERS_TIME_count")
                replicas = value(text, "replication_auditor_REPLICAS_CHECK_TIME_count")
                leader = value(text, "replication_auditor_is_leader") == 1
                return text if leader and runs and replicas else None

            text = wait_until(audited, timeout=30, interval=0.2)
        assert value(text, "replication_auditor_check_last_run_timestamp_seconds",
                     check="checkAllLedgers", cluster="test") > time.time() - 60  # type: ignore[operator]
        assert value(text, "replication_auditor_check_found_ledgers",
                     check="replicasCheck") == 0
        assert value(text, "replication_auditor_replicas_check_unavailable_ledgers") == 0
        assert value(text, "replication_replication_worker_NUM_BYTES_WRITTEN") == 0
        assert value(text, "replication_auditor_NUM_UNDER_REPLICATED_LEDGERS") == 0
        assert token("just-a-reader") not in text
    finally:
        process.stop()
