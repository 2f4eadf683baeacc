"""`pulsar-admin bookies export` / `bookies import FILE [--dry-run] [--prune]`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import CliRunner, failed, ok
from tests.support import RawEtcd


def test_export_then_import_with_dry_run_and_prune(
    cli: CliRunner, clean_store: RawEtcd, tmp_path: Path
) -> None:
    ok(cli("bookies", "set-bookie-rack", "-b", "a:1", "-r", "/r1"))
    ok(cli("bookies", "set-bookie-rack", "-b", "b:1", "-r", "/r2", "-g", "ssd"))
    exported = ok(cli("bookies", "export"))
    assert json.loads(exported) == {
        "default": {"a:1": {"rack": "/r1"}},
        "ssd": {"b:1": {"rack": "/r2"}},
    }
    document = json.loads(exported)
    del document["ssd"]
    document["default"]["c:1"] = {"rack": "/r3"}
    racks = tmp_path / "racks.json"
    racks.write_text(json.dumps(document))
    before = clean_store.snapshot()
    dry = json.loads(ok(cli("bookies", "import", str(racks), "--dry-run", "--prune")))
    assert dry["dryRun"] is True
    assert [e["bookie"] for e in dry["added"]] == ["c:1"]
    assert [e["bookie"] for e in dry["removed"]] == ["b:1"]
    assert clean_store.snapshot() == before
    done = json.loads(ok(cli("bookies", "import", str(racks), "--prune")))
    assert done["dryRun"] is False and done["revision"] > 0
    assert clean_store.get_json("/bookies") == {
        "default": {"a:1": {"rack": "/r1"}, "c:1": {"rack": "/r3"}}
    }
    racks.write_text(json.dumps({"default": {"d:1": {"rack": "/x/y"}}}))
    assert "rack' parameter is invalid" in failed(cli("bookies", "import", str(racks)))
    assert "Cannot read rack map" in failed(cli("bookies", "import", str(tmp_path / "none.json")))
