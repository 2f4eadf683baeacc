"""Jackson's DefaultPrettyPrinter and binding coercions: golden strings, the first ones from
upstream's own `pulsar-admin` session (shared/reference/pulsar-admin-api.md, section 1)."""

from __future__ import annotations

import pytest

from javaformats import jackson_bool, jackson_long, jackson_pretty, jackson_string, jackson_text
from javaformats.jackson import jackson_bytes_escapes


def test_upstream_session_output() -> None:
    # pulsar-admin bookies get-bookie-rack / list-bookies, as the Java tool prints them
    assert jackson_pretty({"rack": "/rack1", "hostname": "127.0.0.1"}) == (
        '{\n  "rack" : "/rack1",\n  "hostname" : "127.0.0.1"\n}'
    )
    assert jackson_pretty({"bookies": [{"bookieId": "127.0.0.1:3181"}]}) == (
        '{\n  "bookies" : [ {\n    "bookieId" : "127.0.0.1:3181"\n  } ]\n}'
    )


def test_object_with_nested_object_and_arrays() -> None:
    value = {"a": "x", "n": 1, "b": True, "list": ["p", "q"], "obj": {"k": "v"}, "empty": []}
    assert jackson_pretty(value) == (
        "{\n"
        '  "a" : "x",\n'
        '  "n" : 1,\n'
        '  "b" : true,\n'
        '  "list" : [ "p", "q" ],\n'
        '  "obj" : {\n'
        '    "k" : "v"\n'
        "  },\n"
        '  "empty" : [ ]\n'
        "}"
    )


def test_empty_containers_and_null() -> None:
    assert jackson_pretty({}) == "{ }"
    assert jackson_pretty([]) == "[ ]"
    assert jackson_pretty({"inner": {}}) == '{\n  "inner" : { }\n}'
    assert jackson_pretty(None) == "null"


def test_null_fields_are_dropped() -> None:
    assert jackson_pretty({"rack": "/r1", "hostname": None}) == '{\n  "rack" : "/r1"\n}'


def test_array_of_objects_keeps_object_depth() -> None:
    value = {"bookies": [{"bookieId": "a:1"}, {"bookieId": "b:2"}]}
    assert jackson_pretty(value) == (
        "{\n"
        '  "bookies" : [ {\n'
        '    "bookieId" : "a:1"\n'
        "  }, {\n"
        '    "bookieId" : "b:2"\n'
        "  } ]\n"
        "}"
    )
    assert jackson_pretty([{"a": 1}]) == '[ {\n  "a" : 1\n} ]'
    assert jackson_pretty([[1, 2], []]) == "[ [ 1, 2 ], [ ] ]"


def test_string_escapes_and_doubles() -> None:
    assert jackson_pretty('q"\\\n\t\x01é/') == '"q\\"\\\\\\n\\t\\u0001é/"'
    assert jackson_pretty({"rate": 0.0, "big": 1.5e10, "small": 0.0001}) == (
        '{\n  "rate" : 0.0,\n  "big" : 1.5E10,\n  "small" : 1.0E-4\n}'
    )


def test_null_fields_are_kept_without_omit_null() -> None:
    # BookKeeper's JsonUtil and the isolation policy's error text keep nulls
    assert jackson_pretty({"a": None, "b": [None]}, omit_null=False) == (
        '{\n  "a" : null,\n  "b" : [ null ]\n}'
    )
    assert jackson_pretty({"a": None, "b": [None]}) == '{\n  "b" : [ null ]\n}'


def test_placement_policy_config_document() -> None:
    # EnsemblePlacementPolicyConfig.encode(): writer().withDefaultPrettyPrinter(); the class
    # is written as its name, the properties map as an object
    policy = "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy"
    document = {
        "policyClass": policy,
        "properties": {"isolationBookieGroups": "g1,g2", "secondaryIsolationBookieGroups": ""},
    }
    assert jackson_pretty(document) == (
        "{\n"
        '  "policyClass" : '
        '"org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy",\n'
        '  "properties" : {\n'
        '    "isolationBookieGroups" : "g1,g2",\n'
        '    "secondaryIsolationBookieGroups" : ""\n'
        "  }\n"
        "}"
    )


def test_strings_keep_utf8_and_escape_controls_in_upper_case_hex() -> None:
    assert jackson_string("grüße\x1f") == '"grüße\\u001F"'
    assert jackson_pretty({"é": "ü"}) == '{\n  "é" : "ü"\n}'


def test_binding_coercions() -> None:
    assert [jackson_text(v) for v in (1, 1.5, True, None, "x")] == ["1", "1.5", "true", None, "x"]
    assert jackson_long(None) == 0
    assert jackson_long(7.9) == 7
    assert jackson_long(" 12 ") == 12
    assert jackson_bool(None) is False
    assert jackson_bool("true") is True


@pytest.mark.parametrize("value", ["x", "1.5", 2**63, [], {}, True, float("inf")])
def test_long_binding_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        jackson_long(value)


@pytest.mark.parametrize("value", ["yes", "TRUE", 1, []])
def test_boolean_binding_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        jackson_bool(value)


def test_bytes_escapes_follow_jacksons_utf8_generator() -> None:
    plain = b'{"rack":"/r1","hostname":"bk1"}'
    assert jackson_bytes_escapes(plain) is plain  # nothing to change: no copy
    assert jackson_bytes_escapes(b'"a\\u001fb"') == b'"a\\u001Fb"'
    assert jackson_bytes_escapes('"é\\u001f"'.encode()) == '"é\\u001F"'.encode()
    assert jackson_bytes_escapes('"😀"'.encode()) == b'"\\uD83D\\uDE00"'
    assert jackson_bytes_escapes(b'"\\\\u001f"') == b'"\\\\u001f"'  # a literal backslash
