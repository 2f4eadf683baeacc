"""The placement console in a real headless Chromium against `python -m api --bookies 3`: each
view, live updates (API and CLI rack writes, a bookie stopping, a new ledger, after a dropped
connection), a violation appearing when a bookie leaves its group, the preview and the apply,
and the change history's filters. The page fixture fails a test on any logged error and on
any request for another origin."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.console.conftest import GROUP, NAMESPACE, OTHER, ConsoleService, Page
from tests.support import CuttableProxy, wait_until

expect.set_options(timeout=10_000)
PULSAR_ADMIN = str(Path(sys.executable).parent / "pulsar-admin")


def tile(page: Any, bookie: str) -> Any:
    return page.locator(f'.tile[data-bookie="{bookie}"]')


def namespace_row(page: Any) -> Any:
    return page.locator(f'tr[data-namespace="{NAMESPACE}"]')


def test_topology_shows_each_bookie_with_group_state_disk_and_ledgers(
    console: Page, service: ConsoleService
) -> None:
    page = console.open()
    first, _, third = service.bookies
    expect(page.locator(".tile")).to_have_count(3)
    expect(tile(page, first)).to_contain_text(f"group {GROUP}")
    expect(tile(page, first)).to_contain_text("writable")
    expect(tile(page, first)).to_contain_text("host-rack0")
    expect(tile(page, first)).to_contain_text("1 ledger")
    expect(tile(page, first)).to_contain_text("disk ")
    expect(tile(page, third)).to_contain_text(f"group {OTHER}")
    expect(tile(page, third)).to_contain_text("0 ledgers")
    expect(page.locator(".area.rack", has=tile(page, third))).to_contain_text("Rack /rack2")
    expect(page.locator("#legend")).to_contain_text(GROUP)
    expect(page.locator("#legend")).to_contain_text(OTHER)
    expect(page.locator("#legend")).to_contain_text("no group")
    page.fill("#bookie-search", OTHER)
    expect(page.locator(".tile")).to_have_count(1)
    expect(page.locator("#bookie-count")).to_have_text("1 of 3 bookies")


def test_namespace_shows_policy_highlights_usable_bookies_and_lists_ensembles(
    console: Page, service: ConsoleService
) -> None:
    page = console.open()
    row = namespace_row(page)
    expect(row).to_contain_text("strict")
    expect(row).to_contain_text("2/2/2")
    expect(row.locator("td").nth(1)).to_have_text(GROUP)
    expect(page.locator(".tile.usable")).to_have_count(0)
    page.get_by_role("button", name=NAMESPACE).click()
    expect(page.locator(".tile.usable")).to_have_count(2)
    expect(tile(page, service.bookies[2])).not_to_have_class(re.compile(r"\busable\b"))
    ledgers = page.locator("#namespace-ledgers")
    expect(ledgers).to_contain_text(f"Topic {NAMESPACE}/persistent/t1")
    for bookie in service.bookies[:2]:
        expect(ledgers.locator(".chip", has_text=bookie)).to_have_count(1)


def test_live_rack_write_through_the_cli_and_the_api(
    console: Page, service: ConsoleService
) -> None:
    page = console.open()
    bookie = service.bookies[2]
    expect(page.locator("#live")).to_have_text("live")
    done = subprocess.run(
        [PULSAR_ADMIN, "--admin-url", service.server.url, "bookies", "set-bookie-rack",
         "--bookie", bookie, "--rack", "/rack9", "--group", OTHER, "--hostname", "cli-host"],
        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    expect(page.locator(".area.rack", has=tile(page, bookie))).to_contain_text("Rack /rack9")
    expect(tile(page, bookie)).to_contain_text("cli-host")
    service.place(bookie, OTHER, "/rack2")
    expect(page.locator(".area.rack", has=tile(page, bookie))).to_contain_text("Rack /rack2")


def test_live_updates_resume_after_a_dropped_connection(
    proxied: tuple[Page, CuttableProxy], service: ConsoleService
) -> None:
    console, proxy = proxied
    page = console.open()
    bookie = service.bookies[2]
    expect(page.locator("#live")).to_have_text("live")
    assert proxy.cut() > 0  # the watch streams (and any idle connection) are cut
    service.place(bookie, OTHER, "/rack7")
    expect(page.locator(".area.rack", has=tile(page, bookie))).to_contain_text("Rack /rack7")
    expect(page.locator("#live")).to_have_text("live")
    service.place(bookie, OTHER, "/rack2")
    expect(page.locator(".area.rack", has=tile(page, bookie))).to_contain_text("Rack /rack2")


def test_new_ledger_appears_live(console: Page, service: ConsoleService) -> None:
    page = console.open()
    expect(page.locator("#live")).to_have_text("live")
    topics = namespace_row(page).locator("td").nth(7)
    before = int(topics.inner_text())
    service.produce(f"live-{before}")
    expect(topics).to_have_text(str(before + 1))


def test_a_bookie_stopping_shows_not_running_and_a_violation(
    console: Page, service: ConsoleService
) -> None:
    page = console.open()
    bookie = service.bookies[1]
    expect(tile(page, bookie)).to_contain_text("writable")
    service.http.post(f"/admin/v2/storage/bookies/{bookie}/stop").raise_for_status()
    try:
        expect(tile(page, bookie)).to_contain_text("not running")
        expect(tile(page, bookie)).to_have_class(re.compile(r"\bnot-running\b"))
        violations = page.locator("#violation-list")
        expect(violations).to_contain_text("NOT_REGISTERED")
        expect(violations).to_contain_text(f"{bookie} is not registered")
    finally:
        service.http.put(f"/admin/v2/storage/bookies/{bookie}").raise_for_status()
    expect(tile(page, bookie)).to_contain_text("writable")
    expect(page.locator("#violation-summary")).to_contain_text("No ledger breaks")


def test_violation_appears_when_a_bookie_leaves_its_group(
    console: Page, service: ConsoleService
) -> None:
    page = console.open()
    bookie = service.bookies[0]
    expect(page.locator("#violation-summary")).to_contain_text("No ledger breaks")
    service.place(bookie, OTHER, "/rack0")
    try:
        row = page.locator("#violation-list .row").first
        expect(row).to_contain_text("FOREIGN_GROUP")
        expect(row).to_contain_text(
            f"{bookie} is in group '{OTHER}', not one of primary ['{GROUP}']")
        expect(row).to_contain_text(f"{NAMESPACE}/persistent/t1")
        expect(page.get_by_role("heading", name="Placement violations")).to_be_visible()
    finally:
        service.place(bookie, GROUP, "/rack0")
    expect(page.locator("#violation-summary")).to_contain_text("No ledger breaks")


def test_preview_then_apply_a_bookie_move(console: Page, service: ConsoleService) -> None:
    page = console.open()
    bookie = service.bookies[1]
    tile(page, bookie).click()
    expect(page.locator("#move-bookie")).to_have_value(bookie)
    page.get_by_label("Group", exact=True).fill(OTHER)
    page.get_by_role("button", name="Preview move").click()
    preview = page.locator("#preview")
    expect(preview).to_be_visible()
    expect(preview).to_contain_text("would violate")
    expect(preview).to_contain_text(f"{bookie} is in group '{OTHER}'")
    expect(preview).to_contain_text(
        f"Namespace {NAMESPACE} would be left with 1 usable bookie, fewer than its ensemble size 2")
    assert service.http.get(f"/admin/v2/bookies/racks-info/{bookie}").json()["rack"] == "/rack1"
    groups = service.http.get("/admin/v2/bookies/racks-info").json()
    assert bookie in groups[GROUP]  # nothing applied by the preview
    try:
        page.get_by_role("button", name="Apply").click()
        expect(page.locator("#change-result")).to_have_text("Applied.")
        wait_until(lambda: bookie in service.http.get("/admin/v2/bookies/racks-info").json()
                   .get(OTHER, {}))
        expect(tile(page, bookie)).to_contain_text(f"group {OTHER}")
        expect(page.locator("#violation-list")).to_contain_text("FOREIGN_GROUP")
    finally:
        service.place(bookie, GROUP, "/rack1")


def test_namespace_change_preview_and_an_apply_error_shows_pulsars_reason(
    console: Page, service: ConsoleService
) -> None:
    page = console.open()
    page.get_by_role("button", name=NAMESPACE).click()
    expect(page.get_by_label("Primary groups (comma separated)")).to_have_value(GROUP)
    expect(page.get_by_label("strict")).to_be_checked()
    page.get_by_label("Primary groups (comma separated)").fill(OTHER)
    page.get_by_role("button", name="Preview change").click()
    preview = page.locator("#preview")
    expect(preview).to_contain_text("would violate")
    expect(preview).to_contain_text(
        f"Namespace {NAMESPACE} would be left with 1 usable bookie")
    page.get_by_role("button", name="Cancel").click()
    expect(preview).to_be_hidden()
    # strict with primary '*' is refused by the REST API: its reason is shown
    console.expected_statuses.add(412)
    page.get_by_label("Primary groups (comma separated)").fill("*")
    page.get_by_role("button", name="Preview change").click()
    expect(preview).to_contain_text("No ledger would newly break its policy")
    page.get_by_role("button", name="Apply").click()
    error = page.locator("#change-error")
    expect(error).to_contain_text("412 Precondition failed: ")
    reason = service.http.post(
        f"/admin/v2/namespaces/{NAMESPACE}/persistence/bookieAffinity",
        json={"bookkeeperAffinityGroupPrimary": "*", "bookkeeperAffinityGroupStrict": True},
    ).json()["reason"]
    expect(error).to_have_text(f"412 Precondition failed: {reason}")
    affinity = service.http.get(f"/admin/v2/namespaces/{NAMESPACE}/persistence/bookieAffinity")
    assert affinity.json()["bookkeeperAffinityGroupPrimary"] == GROUP


def test_change_history_filters_by_bookie_and_namespace(
    console: Page, service: ConsoleService
) -> None:
    bookie = service.bookies[2]
    service.place(bookie, OTHER, "/rack2")
    page = console.open()
    rows = page.locator("#history-list .row")
    expect(rows.first).to_be_visible()
    page.fill("#history-bookie", bookie)
    expect(rows.first).to_contain_text(f"/admin/v2/bookies/racks-info/{bookie}")
    for text in rows.all_inner_texts():
        assert bookie in text or "/bookies" in text
    page.fill("#history-bookie", "")
    page.fill("#history-namespace", NAMESPACE)
    expect(rows.first).to_contain_text(f"/admin/v2/namespaces/{NAMESPACE}/")
    for text in rows.all_inner_texts():
        assert NAMESPACE in text
    page.fill("#history-namespace", "no-such/namespace")
    expect(rows).to_have_count(0)


def test_keyboard_selects_a_namespace_and_a_bookie(console: Page, service: ConsoleService) -> None:
    page = console.open()
    page.get_by_role("button", name=NAMESPACE).focus()
    page.keyboard.press("Enter")
    expect(page.locator(".tile.usable")).to_have_count(2)
    tile(page, service.bookies[2]).focus()
    page.keyboard.press("Enter")
    expect(page.get_by_label("Bookie", exact=True)).to_have_value(service.bookies[2])
    expect(page.get_by_label("Group", exact=True)).to_be_focused()
