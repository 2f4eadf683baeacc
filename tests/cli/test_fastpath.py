"""The Typer-free reads (`cli.fastpath`) print exactly what the Typer commands print, and leave
every other command line to Typer."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable

import httpx
import pytest
import typer

from cli.app import app
from cli.app import main as typer_main
from cli.fastpath import READS, parse
from cli.fastpath import run as fast_run
from tests.support import RawEtcd, ServerProcess


def captured(
    run: Callable[[list[str]], int | None], argv: list[str]
) -> tuple[int | None, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = run(argv)
    return status, out.getvalue(), err.getvalue()


def test_every_read_is_a_typer_command_with_those_positionals_and_no_required_option() -> None:
    root = typer.main.get_command(app)
    for (group, name), (count, _) in READS.items():
        command = root.commands[group].commands[name]  # type: ignore[attr-defined]
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        assert len(arguments) == count, (group, name)
        assert not [p for p in command.params if p.param_type_name == "option" and p.required]


@pytest.mark.parametrize(
    "argv",
    [
        ["-o", "json", "clusters", "list"],
        ["clusters", "list", "-c"],
        ["clusters", "get"],
        ["clusters", "get", "-h"],
        ["clusters", "get", "a", "b"],
        ["--admin-url"],
        ["namespaces", "policies", ""],
        ["clusters", "create", "x"],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert parse(argv) is None


def test_both_paths_print_the_same(
    server: ServerProcess,
    admin: httpx.Client,
    clean_store: RawEtcd,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clean_store.put("/admin/clusters/test", {"serviceUrl": "http://localhost:8080"})
    clean_store.put("/admin/clusters/west", {"serviceUrl": "http://west:8080"})
    assert admin.put("/admin/v2/tenants/t1",
                     json={"adminRoles": ["b", "a"], "allowedClusters": ["west", "test"]}
                     ).status_code == 204  # fmt: skip
    assert admin.put("/admin/v2/namespaces/t1/ns1", json={"replication_clusters": ["west", "test"]}
                     ).status_code == 204  # fmt: skip
    rack = admin.post("/admin/v2/bookies/racks-info/b1:3181?group=g", json={"rack": "/r1"})
    assert rack.status_code == 204
    url = ["--admin-url", server.url]
    lines = [
        [*url, *command, *args]
        for (command, (count, _)), args in zip(
            READS.items(),
            [[], [], ["test"], ["west"], [], ["t1/ns1"], ["t1"], ["t1/ns1"], ["t1"], []],
            strict=True,
        )
    ]
    lines += [
        [*url, "clusters", "get", "absent"],  # an error reason
        [f"--admin-url={server.url}", "tenants", "get", "absent"],
        ["--admin-url", "http://127.0.0.1:1", "tenants", "list"],  # no connection
    ]
    for argv in lines:
        fast = captured(fast_run, argv)
        assert fast[0] is not None, argv
        assert fast == captured(typer_main, argv), argv
    _, out, _ = captured(typer_main, [*url, "namespaces", "policies", "t1/ns1"])
    assert '"replication_clusters" : [ "test", "west" ]' in out  # HashSet order
    # A parameter error prints usage: Typer's job.
    assert captured(fast_run, [*url, "namespaces", "policies", "t1"]) == (None, "", "")
