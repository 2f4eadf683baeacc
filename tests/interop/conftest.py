"""Fixtures for the interop suite: upstream's programs, one JVM each, shared by the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop.upstream import UpstreamJvm, resolve, resolve_broker
from tests.pipeline.conftest import spark  # noqa: F401 - the Spark audit of the broker test


@pytest.fixture(scope="session")
def upstream_classpath() -> str:
    return resolve()


@pytest.fixture(scope="session")
def upstream_admin(upstream_classpath: str, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[UpstreamJvm]:
    """Upstream `pulsar-admin` (PulsarAdminTool of pulsar-client-tools)."""
    jvm = UpstreamJvm(upstream_classpath, tmp_path_factory.mktemp("pulsar-admin") / "jvm.log")
    yield jvm
    jvm.stop()


@pytest.fixture(scope="session")
def upstream_bookkeeper(upstream_classpath: str, tmp_path_factory: pytest.TempPathFactory
                        ) -> Iterator[UpstreamJvm]:
    """Upstream BookKeeper: its client API and BookieShell, with Pulsar's metadata driver."""
    jvm = UpstreamJvm(upstream_classpath, tmp_path_factory.mktemp("bookkeeper") / "jvm.log")
    yield jvm
    jvm.stop()


@pytest.fixture(scope="session")
def upstream_documents(upstream_classpath: str, tmp_path_factory: pytest.TempPathFactory
                       ) -> Iterator[UpstreamJvm]:
    """Pulsar's document classes and its metadata cache's JSON serde (`pulsar-json`), in a JVM
    of their own: once `pulsar-admin` has run in a JVM, the shared `ObjectMapperFactory` mapper
    writes `ClusterDataImpl`'s properties in another order (alphabetical), which is not what a
    metadata store on its own writes."""
    jvm = UpstreamJvm(upstream_classpath, tmp_path_factory.mktemp("pulsar-json") / "jvm.log")
    yield jvm
    jvm.stop()


@pytest.fixture(scope="session")
def upstream_broker_classpath() -> str:
    return resolve_broker()
