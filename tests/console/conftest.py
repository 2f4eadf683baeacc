"""Console fixtures: one headless Chromium (Debian's, driven by Playwright) for every console
test, and the service (`python -m api --bookies 3`, its own etcd) it is pointed at.

Every page records what the browser logged as an error and every request for another origin;
such a request is refused and the test fails, so nothing leaves this machine."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import playwright.sync_api as playwright_api
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.support import CuttableProxy, ServerProcess, wait_until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
GROUP, OTHER = "iso", "other"
NAMESPACE = "public/default"


# Package scope: Playwright's sync API keeps its event loop set as the thread's running loop
# while it is open, which would refuse asyncio.run() to every test after the console's.
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    assert Path(CHROMIUM).exists(), "Debian's chromium is not installed (make system-deps)"
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@dataclass
class Page:
    """A page of a fresh browser context, with what it logged and what it tried to fetch."""

    page: Any
    base: str
    errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    expected_statuses: set[int] = field(default_factory=set)
    connections_cut: bool = False  # the browser logs the streams it lost as net:: errors

    def unexpected_errors(self) -> list[str]:
        """The logged errors, less the browser's own line for a response whose error status
        the test provoked on purpose."""
        return [e for e in self.errors if not any(
            f"responded with a status of {status} " in e for status in self.expected_statuses)
            and not (self.connections_cut and e.startswith("Failed to load resource: net::"))]

    def open(self) -> Any:
        self.page.goto(self.base + "/console/")
        return self.page


@contextmanager
def open_page(browser: Any, base: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    watched = Page(page, base)

    def route(handle: Any) -> None:
        if handle.request.url.startswith(base + "/") or handle.request.url.startswith("data:"):
            handle.continue_()
        else:
            watched.foreign.append(handle.request.url)
            handle.abort()

    context.route("**/*", route)
    page.on("console", lambda m: watched.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watched.errors.append(str(e)))
    try:
        yield watched
    finally:
        context.close()


@dataclass
class ConsoleService:
    server: ServerProcess
    http: httpx.Client
    bookies: list[str]

    def place(self, bookie: str, group: str, rack: str) -> None:
        self.http.post(f"/admin/v2/bookies/racks-info/{bookie}", params={"group": group},
                       json={"rack": rack, "hostname": f"host-{rack.strip('/')}"}
                       ).raise_for_status()

    def produce(self, topic: str) -> None:
        self.http.post(f"/topics/persistent/{NAMESPACE}/{topic}",
                       json={"messages": [{"payload": "aGk="}]}).raise_for_status()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleService]:
    """Three bookies: 0 and 1 in group `iso` (racks /rack0, /rack1), 2 in `other` (/rack2);
    namespace public/default with E=Qw=Qa=2 and strict affinity to `iso`, and topic `t1` with
    one ledger on bookies 0 and 1."""
    work = tmp_path_factory.mktemp("console")
    etcd = EmbeddedEtcd(work / "etcd")
    etcd.start()
    server = ServerProcess(etcd.url, work / "service", cluster_name="standalone",
                           extra_conf={"initializeClusterMetadata": "true"},
                           extra_args=["--bookies", "3", "--bookie-port", "0",
                                       "--data-dir", str(work / "data")])  # fmt: skip
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            def writable() -> list[str]:
                found = http.get("/admin/v2/storage/bookies").json()
                return sorted(b["id"] for b in found if b["state"] == "writable")

            bookies = wait_until(lambda: len(writable()) == 3 and writable(), 30)
            wait_until(lambda: http.get("/admin/v2/namespaces/public").status_code == 200, 30)
            running = ConsoleService(server, http, bookies)
            for i, bookie in enumerate(bookies):
                running.place(bookie, GROUP if i < 2 else OTHER, f"/rack{i}")
            http.post(f"/admin/v2/namespaces/{NAMESPACE}/persistence", json={
                "bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
                "managedLedgerMaxMarkDeleteRate": 0}).raise_for_status()
            http.post(f"/admin/v2/namespaces/{NAMESPACE}/persistence/bookieAffinity", json={
                "bookkeeperAffinityGroupPrimary": GROUP,
                "bookkeeperAffinityGroupStrict": True}).raise_for_status()
            running.produce("t1")
            yield running
    finally:
        server.stop()
        etcd.stop()


@pytest.fixture
def proxied(browser: Any, service: ConsoleService) -> Iterator[tuple[Page, CuttableProxy]]:
    """A page that reaches the service through a `CuttableProxy`."""
    proxy = CuttableProxy(service.server.port)
    try:
        with open_page(browser, proxy.url) as watched:
            watched.connections_cut = True
            yield watched, proxy
            assert watched.unexpected_errors() == []
            assert watched.foreign == []
    finally:
        proxy.close()


@pytest.fixture
def console(browser: Any, service: ConsoleService) -> Iterator[Page]:
    """A fresh page on the service; fails the test on a logged error or a foreign request."""
    with open_page(browser, service.server.url) as watched:
        yield watched
        assert watched.unexpected_errors() == []
        assert watched.foreign == []
