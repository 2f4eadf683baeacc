"""Upstream Apache Pulsar and BookKeeper programs, from the jars that `pom.xml` pins, each in one
long-lived JVM (`java/InteropRunner.java`) that runs many command lines in-process."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.support import reap

HERE = Path(__file__).resolve().parent
TARGET = HERE / "target"
CLASSPATH_FILE = TARGET / "classpath.txt"
CLASSES = TARGET / "classes"
SOURCES = sorted((HERE / "java").glob("*.java"))

# BookKeeper finds Pulsar's metadata-store driver (scheme `metadata-store:`) by these properties,
# as Pulsar's own scripts set them.
DRIVER_PROPERTIES = [
    "-Dbookkeeper.metadata.client.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
    "-Dbookkeeper.metadata.bookie.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
]


def bookkeeper_service_uri(metadata_store_url: str) -> str:
    """BookKeeper's `metadataServiceUri` for one of our stores: Pulsar's `metadata-store:`
    driver on etcd, BookKeeper's own hierarchical driver on ZooKeeper
    (`zk+hierarchical://host:port/chroot/ledgers`), as a BookKeeper-only cluster names it."""
    if metadata_store_url.startswith("zk:"):
        return f"zk+hierarchical://{metadata_store_url.removeprefix('zk:')}/ledgers"
    return f"metadata-store:{metadata_store_url}"


class UpstreamUnavailable(RuntimeError):
    """An upstream artifact could not be resolved or the runner could not be built."""


def mvn_command(*goals: str) -> list[str]:
    return ["mvn", "-q", "-B", "-s", str(HERE / "settings.xml"), "-f", str(HERE / "pom.xml"),
            *goals]


def resolve() -> str:
    """The runtime classpath of the pinned artifacts (resolved into ~/.m2 when missing) with the
    compiled runner first. Fails with Maven's own message, which names any coordinates that
    could not be resolved."""
    for tool in ("mvn", "javac", "java"):
        if shutil.which(tool) is None:
            raise UpstreamUnavailable(f"{tool} not found on PATH (make system-deps installs it)")
    pom = HERE / "pom.xml"
    if not CLASSPATH_FILE.exists() or CLASSPATH_FILE.stat().st_mtime < pom.stat().st_mtime:
        done = subprocess.run(
            mvn_command("dependency:build-classpath", f"-Dmdep.outputFile={CLASSPATH_FILE}"),
            capture_output=True, text=True, timeout=1800,
        )
        if done.returncode != 0:
            raise UpstreamUnavailable("Maven could not resolve the upstream artifacts:\n"
                                      + done.stdout + done.stderr)
    classpath = CLASSPATH_FILE.read_text().strip()
    stamp = CLASSES / ".built"
    newest = max(p.stat().st_mtime for p in [*SOURCES, CLASSPATH_FILE])
    if not stamp.exists() or stamp.stat().st_mtime < newest:
        CLASSES.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["javac", "-nowarn", "-d", str(CLASSES), "-cp", classpath, *map(str, SOURCES)],
            capture_output=True, text=True, timeout=600,
        )
        if done.returncode != 0:
            raise UpstreamUnavailable(f"javac failed:\n{done.stdout}{done.stderr}")
        stamp.touch()
    return f"{CLASSES}:{HERE}:{classpath}"


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


class UpstreamJvm:
    """One JVM running `InteropRunner`: `run("pulsar-admin", conf, "tenants", "list")`."""

    def __init__(self, classpath: str, log: Path, properties: list[str] | None = None) -> None:
        self.log = log
        self.process = subprocess.Popen(
            ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             f"-Dinterop.log={log}", "-Dlog4j2.configurationFile=log4j2.xml",
             *DRIVER_PROPERTIES, *(properties or []), "-cp", classpath, "InteropRunner"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "ab"),  # noqa: SIM115
            text=True, encoding="utf-8",
        )
        ready = self._answer()
        if ready.get("ready") is not True:
            raise UpstreamUnavailable(f"runner did not start: {ready!r}")

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        return self.process.stdin, self.process.stdout

    def _answer(self) -> dict[str, Any]:
        line = self._pipes()[1].readline()
        if not line:
            raise UpstreamUnavailable(f"the JVM exited ({self.process.poll()}); see {self.log}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(self, *args: str) -> Result:
        stdin, _ = self._pipes()
        stdin.write(json.dumps(list(args)) + "\n")
        stdin.flush()
        answer = self._answer()
        return Result(answer["exit"], answer["stdout"], answer["stderr"])

    def stop(self) -> None:
        if self.process.poll() is None:
            self._pipes()[0].close()
            reap(self.process, 15)

    def pulsar_json(self, kind: str, documents: list[bytes]) -> list[bytes | str]:
        """Each document deserialised as Pulsar's class for `kind` and serialised back, by the
        serde Pulsar's metadata cache uses (`java/PulsarJson.java`), in one call: the bytes
        upstream would store, or the exception upstream's reader raised ("Class: message")."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as batch:
            json.dump([base64.b64encode(d).decode() for d in documents], batch)
        try:
            done = self.run("pulsar-json", "read", kind, batch.name)
        finally:
            Path(batch.name).unlink()
        if done.code != 0:
            raise AssertionError(f"pulsar-json {kind} failed: {done.err}")
        return [base64.b64decode(a["bytes"]) if "bytes" in a else a["error"]
                for a in json.loads(done.out)]

    def pulsar_json_defaults(self, kind: str) -> dict[str, bytes | None]:
        """Upstream's serialisation of a default-constructed `kind` ("new") and of its
        `builder().build()` ("built", None when the class has no builder)."""
        done = self.run("pulsar-json", "new", kind)
        if done.code != 0:
            raise AssertionError(f"pulsar-json new {kind} failed: {done.err}")
        return {k: None if v is None else base64.b64decode(v)
                for k, v in json.loads(done.out).items()}


class UpstreamBookie:
    """An upstream bookie (`org.apache.bookkeeper.server.Main`, BookKeeper 4.17.2) with Pulsar's
    metadata-store driver: it registers under our `/ledgers/available` like ours."""

    def __init__(self, classpath: str, workdir: Path, metadata_service_uri: str,
                 port: int) -> None:
        self.workdir = workdir
        self.port = port
        self.bookie_id = f"127.0.0.1:{port}"
        workdir.mkdir(parents=True, exist_ok=True)
        conf = workdir / "bk_server.conf"
        conf.write_text(
            f"metadataServiceUri={metadata_service_uri}\n"
            f"bookiePort={port}\n"
            "advertisedAddress=127.0.0.1\n"
            "allowLoopback=true\n"
            f"journalDirectories={workdir / 'journal'}\n"
            f"ledgerDirectories={workdir / 'ledgers'}\n"
            "httpServerEnabled=false\n"
        )
        log = open(workdir / "bookie.out", "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", f"-Dinterop.log={workdir / 'bookie.log'}",
             "-Dlog4j2.configurationFile=log4j2.xml", *DRIVER_PROPERTIES, "-cp", classpath,
             "org.apache.bookkeeper.server.Main", "--conf", str(conf)],
            stdout=log, stderr=subprocess.STDOUT, cwd=HERE,
        )
        log.close()

    def exited(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            reap(self.process, 20)


BROKER_POM = HERE / "broker" / "pom.xml"
BROKER_CLASSPATH_FILE = HERE / "broker" / "target" / "classpath.txt"


def resolve_broker() -> str:
    """The runtime classpath of the upstream broker (`broker/pom.xml`), resolved when missing;
    fails with Maven's message naming any coordinates that could not be resolved."""
    if (not BROKER_CLASSPATH_FILE.exists()
            or BROKER_CLASSPATH_FILE.stat().st_mtime < BROKER_POM.stat().st_mtime):
        done = subprocess.run(
            ["mvn", "-q", "-B", "-s", str(HERE / "settings.xml"), "-f", str(BROKER_POM),
             "dependency:build-classpath", f"-Dmdep.outputFile={BROKER_CLASSPATH_FILE}"],
            capture_output=True, text=True, timeout=1800,
        )
        if done.returncode != 0:
            raise UpstreamUnavailable("Maven could not resolve the upstream broker:\n"
                                      + done.stdout + done.stderr)
    return f"{HERE}:{BROKER_CLASSPATH_FILE.read_text().strip()}"


class UpstreamBroker:
    """An upstream Pulsar broker (`org.apache.pulsar.PulsarBrokerStarter`, pulsar-broker 4.0.8)
    from a minimal broker.conf: its metadata on our store, its BookKeeper client on our
    bookies (through the same store), no functions worker."""

    def __init__(self, classpath: str, workdir: Path, metadata_store_url: str,
                 web_port: int, broker_port: int, extra: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.web_url = f"http://127.0.0.1:{web_port}"
        self.service_url = f"pulsar://127.0.0.1:{broker_port}"
        workdir.mkdir(parents=True, exist_ok=True)
        conf = {
            "metadataStoreUrl": metadata_store_url,
            "configurationMetadataStoreUrl": metadata_store_url,
            "clusterName": "test",
            "advertisedAddress": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "brokerServicePort": str(broker_port),
            "webServicePort": str(web_port),
            "functionsWorkerEnabled": "false",
            "systemTopicEnabled": "false",
            "topicLevelPoliciesEnabled": "false",
            "managedLedgerDefaultEnsembleSize": "2",
            "managedLedgerDefaultWriteQuorum": "2",
            "managedLedgerDefaultAckQuorum": "2",
            **(extra or {}),
        }
        path = workdir / "broker.conf"
        path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        log = open(workdir / "broker.out", "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            ["java", "-Xmx512m", "-XX:+UseSerialGC", f"-Dinterop.log={workdir / 'broker.log'}",
             "-Dlog4j2.configurationFile=log4j2.xml", "-Dpulsar.allocator.exit_on_oom=true",
             "-cp", classpath, "org.apache.pulsar.PulsarBrokerStarter", "--broker-conf",
             str(path)],
            stdout=log, stderr=subprocess.STDOUT, cwd=HERE,
        )
        log.close()

    def exited(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            reap(self.process, 30)


def initialize_cluster_metadata(classpath: str, workdir: Path, metadata_store_url: str,
                                cluster: str = "test") -> Result:
    """Upstream's `pulsar initialize-cluster-metadata` (`PulsarClusterMetadataSetup`,
    pulsar-broker 4.0.8) on `metadata_store_url`, as configuration store too: the cluster,
    tenants `public` and `pulsar` with their namespaces, and BookKeeper's `/ledgers` root."""
    workdir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
         f"-Dinterop.log={workdir / 'setup.log'}", "-Dlog4j2.configurationFile=log4j2.xml",
         "-cp", classpath, "org.apache.pulsar.PulsarClusterMetadataSetup",
         "--cluster", cluster, "--metadata-store", metadata_store_url,
         "--configuration-metadata-store", metadata_store_url,
         "--web-service-url", "http://127.0.0.1:8080",
         "--broker-service-url", "pulsar://127.0.0.1:6650"],
        cwd=HERE, capture_output=True, text=True, timeout=300,
    )
    return Result(done.returncode, done.stdout, done.stderr)
