"""Golden strings: what CliCommand.print produces for each result type."""

from __future__ import annotations

from cli.javafmt import BOOKIE_GROUP, FAILURE_DOMAIN, NAMESPACE_ISOLATION_DATA
from cli.output import (
    JsonResult,
    LinesResult,
    MapResult,
    OutputFormat,
    TextResult,
    render,
)


def test_render_results_in_pulsar_format() -> None:
    assert render(None, OutputFormat.pulsar) == ""
    assert render(JsonResult(None), OutputFormat.pulsar) == "null\n"
    assert render(TextResult(None), OutputFormat.pulsar) == "null\n"
    assert render(TextResult("grp"), OutputFormat.pulsar) == "grp\n"
    assert render(LinesResult(["a", "b"]), OutputFormat.pulsar) == "a\nb\n"
    assert render(LinesResult([{"x": 1}, {"x": 2}]), OutputFormat.pulsar) == (
        '{\n  "x" : 1\n}\n{\n  "x" : 2\n}\n'
    )


def test_map_lines_with_java_to_string() -> None:
    racks = {"default": {"127.0.0.1:3181": {"rack": "/rack1", "hostname": "127.0.0.1"}}}
    assert render(MapResult(racks, BOOKIE_GROUP), OutputFormat.pulsar) == (
        "default    {127.0.0.1:3181=BookieInfoImpl(rack=/rack1, hostname=127.0.0.1)}\n"
    )
    domains = {"domain-a": {"brokers": ["broker-1:8080", "broker-2:8080"]}, "b": {}}
    # brokers is a Set<String>: Jackson reads it into a HashSet, whose order Java prints
    assert render(MapResult(domains, FAILURE_DOMAIN), OutputFormat.pulsar) == (
        "domain-a    FailureDomainImpl(brokers=[broker-2:8080, broker-1:8080])\n"
        "b    FailureDomainImpl(brokers=null)\n"
    )
    policy = {
        "namespaces": ["my-tenant/isolated-.*"],
        "primary": ["broker-[0-1]\\..*"],
        "secondary": [],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": "1", "usage_threshold": "80"},
        },
    }
    assert render(MapResult({"pol-1": policy}, NAMESPACE_ISOLATION_DATA), OutputFormat.pulsar) == (
        "pol-1    NamespaceIsolationDataImpl(namespaces=[my-tenant/isolated-.*], "
        "primary=[broker-[0-1]\\..*], secondary=[], autoFailoverPolicy=AutoFailoverPolicyDataImpl("
        "policyType=min_available, parameters={min_limit=1, usage_threshold=80}), "
        "unloadScope=null)\n"
    )


def test_extension_formats() -> None:
    result = JsonResult({"rack": "/r1", "hostname": "h"})
    assert render(result, OutputFormat.json) == '{\n  "rack": "/r1",\n  "hostname": "h"\n}\n'
    assert render(result, OutputFormat.yaml) == "rack: /r1\nhostname: h\n"
    assert render(result, OutputFormat.table) == "KEY       VALUE\nrack      /r1\nhostname  h\n"
    assert render(LinesResult(["a", "bb"]), OutputFormat.table) == "VALUE\na\nbb\n"
    assert render(JsonResult(None), OutputFormat.json) == "null\n"
    assert render(None, OutputFormat.json) == ""
