"""`pulsar-admin bookies`, end to end: output byte for byte as the Java tool prints it."""

from __future__ import annotations

import httpx

from tests.cli.conftest import CliRunner, admin_error, failed, ok
from tests.support import RawEtcd

RACK_NOT_FOUND = "Bookie rack placement configuration not found: {}"


def test_set_then_get_bookie_rack(cli: CliRunner) -> None:
    assert ok(cli("bookies", "set-bookie-rack", "-b", "127.0.0.1:3181", "-r", "/rack1",
                  "--hostname", "127.0.0.1")) == ""  # fmt: skip
    assert ok(cli("bookies", "get-bookie-rack", "-b", "127.0.0.1:3181")) == (
        '{\n  "rack" : "/rack1",\n  "hostname" : "127.0.0.1"\n}\n'
    )


def test_set_bookie_rack_long_options_and_default_group(
    cli: CliRunner, admin: httpx.Client
) -> None:
    ok(cli("bookies", "set-bookie-rack", "--bookie", "b1:3181", "--rack", "/r1"))
    assert admin.get("/admin/v2/bookies/racks-info").json() == {
        "default": {"b1:3181": {"rack": "/r1"}}
    }


def test_two_letter_short_option_hn(cli: CliRunner, admin: httpx.Client) -> None:
    ok(cli("bookies", "set-bookie-rack", "-b", "b1:3181", "-r", "/r1", "-g", "ssd",
           "-hn", "bk-1.example"))  # fmt: skip
    ok(cli("bookies", "set-bookie-rack", "-b", "b2:3181", "-r", "/r2", "-hn=bk-2.example"))
    assert admin.get("/admin/v2/bookies/racks-info").json() == {
        "default": {"b2:3181": {"rack": "/r2", "hostname": "bk-2.example"}},
        "ssd": {"b1:3181": {"rack": "/r1", "hostname": "bk-1.example"}},
    }


def test_racks_placement_prints_the_rack_map_as_json(cli: CliRunner) -> None:
    ok(cli("bookies", "set-bookie-rack", "-b", "127.0.0.1:3181", "-r", "/rack1",
           "-hn", "127.0.0.1"))  # fmt: skip
    ok(cli("bookies", "set-bookie-rack", "-b", "127.0.0.2:3181", "-r", "/rack1"))
    ok(cli("bookies", "set-bookie-rack", "-b", "10.0.0.7:3181", "-r", "/rack2", "-g",
           "group-ssd", "-hn", "bk-7.example"))  # fmt: skip
    assert ok(cli("bookies", "racks-placement")) == (
        '{\n  "default" : {\n    "127.0.0.1:3181" : {\n      "rack" : "/rack1",\n'
        '      "hostname" : "127.0.0.1"\n    },\n    "127.0.0.2:3181" : {\n'
        '      "rack" : "/rack1"\n    }\n  },\n  "group-ssd" : {\n    "10.0.0.7:3181" : {\n'
        '      "rack" : "/rack2",\n      "hostname" : "bk-7.example"\n    }\n  }\n}\n'
    )


def test_racks_placement_empty_prints_an_empty_object(cli: CliRunner) -> None:
    assert ok(cli("bookies", "racks-placement")) == "{ }\n"


def test_list_bookies_pretty_json(cli: CliRunner, clean_store: RawEtcd) -> None:
    assert ok(cli("bookies", "list-bookies")) == '{\n  "bookies" : [ ]\n}\n'
    clean_store.put("/ledgers/cookies/127.0.0.1:3181", b"")  # every bookie with a cookie
    clean_store.put("/ledgers/cookies/127.0.0.2:3181", b"")
    assert ok(cli("bookies", "list-bookies")) == (
        "{\n"
        '  "bookies" : [ {\n'
        '    "bookieId" : "127.0.0.2:3181"\n'
        "  }, {\n"
        '    "bookieId" : "127.0.0.1:3181"\n'
        "  } ]\n"
        "}\n"
    )


def test_delete_bookie_rack(cli: CliRunner, admin: httpx.Client) -> None:
    ok(cli("bookies", "set-bookie-rack", "-b", "b1:3181", "-r", "/r1"))
    assert ok(cli("bookies", "delete-bookie-rack", "-b", "b1:3181")) == ""
    assert admin.get("/admin/v2/bookies/racks-info").json() == {}


def test_unknown_bookie_is_reason_block_and_exit_1(cli: CliRunner) -> None:
    reason = RACK_NOT_FOUND.format("127.0.0.1:3181")
    assert failed(cli("bookies", "get-bookie-rack", "-b", "127.0.0.1:3181")) == admin_error(reason)
    assert failed(cli("bookies", "delete-bookie-rack", "-b", "127.0.0.1:3181")) == admin_error(
        reason
    )


def test_server_side_rack_validation_error(cli: CliRunner) -> None:
    err = failed(cli("bookies", "set-bookie-rack", "-b", "b1:3181", "-r", "/rack/a"))
    reason = err.split("\n", 1)[0]
    assert reason.startswith("Bookie 'rack' parameter is invalid")
    assert err == admin_error(reason)


def test_empty_or_slash_rack_is_rejected_before_sending(
    cli: CliRunner, admin: httpx.Client
) -> None:
    for rack in ("", "/", " / "):
        err = failed(cli("bookies", "set-bookie-rack", "-b", "b1:3181", "-r", rack))
        assert err.startswith("rack name is invalid, it should not be null, empty or '/'\n")
        assert "Usage: pulsar-admin bookies set-bookie-rack" in err
    assert admin.get("/admin/v2/bookies/racks-info").json() == {}


def test_missing_required_option_is_usage_error_exit_1(cli: CliRunner) -> None:
    err = failed(cli("bookies", "get-bookie-rack"))
    assert "Missing option '-b' / '--bookie'" in err
    assert "Usage: pulsar-admin bookies get-bookie-rack" in err
    err = failed(cli("bookies", "set-bookie-rack", "-b", "b1:3181"))
    assert "'-r' / '--rack'" in err


def test_output_formats(cli: CliRunner) -> None:
    ok(cli("bookies", "set-bookie-rack", "-b", "b1:3181", "-r", "/r1", "-hn", "h1"))
    assert ok(cli("bookies", "racks-placement", "-o", "json")) == (
        '{\n  "default": {\n    "b1:3181": {\n      "rack": "/r1",\n'
        '      "hostname": "h1"\n    }\n  }\n}\n'
    )
    assert ok(cli("bookies", "racks-placement", "-o", "yaml")) == (
        "default:\n  b1:3181:\n    rack: /r1\n    hostname: h1\n"
    )
    assert ok(cli("bookies", "racks-placement", "-o", "table")) == (
        "GROUP    BOOKIE   RACK  HOSTNAME\ndefault  b1:3181  /r1   h1\n"
    )
    assert ok(cli("-o", "json", "bookies", "get-bookie-rack", "-b", "b1:3181")) == (
        '{\n  "rack": "/r1",\n  "hostname": "h1"\n}\n'
    )
