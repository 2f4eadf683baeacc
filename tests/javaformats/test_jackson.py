"""Jackson's DefaultPrettyPrinter and binding coercions: golden strings, the first ones from
upstream's own `pulsar-admin` session (shared/reference/pulsar-admin-api.md, section 1)."""

from __future__ import annotations

import pytest

from javaformats import (
    jackson_bool,
    jackson_double,
    jackson_integer,
    jackson_long,
    jackson_object_refusal,
    jackson_pretty,
    jackson_string,
    jackson_string_field,
    jackson_text,
)
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
    """As the upstream broker (4.0.8) binds its admin API's request bodies."""
    assert [jackson_text(v) for v in (1, 1.5, True, None, "x")] == ["1", "1.5", "true", None, "x"]
    assert jackson_long(None) == 0
    assert jackson_long(7.9) == 7
    assert jackson_long(" 12 ") == 12
    assert [jackson_integer(v, "int") for v in ("3", " 3", "3 ", "+3", "03", 3.999, -0.5, "")] \
        == [3, 3, 3, 3, 3, 3, 0, 0]
    assert [jackson_double(v) for v in ("1.5", " 1.5", "1e3", "", None, 5, "-0")] \
        == [1.5, 1.5, 1000.0, 0.0, 0.0, 5.0, -0.0]
    assert [jackson_bool(v) for v in (None, "true", "True", "TRUE", " true", "false", "", 1, 0,
                                      2, -1)] == [False, True, True, True, True, False, False,
                                                  True, False, True, True]  # fmt: skip


@pytest.mark.parametrize("value", ["x", "1.5", 2**63, [], {}, True, float("inf")])
def test_long_binding_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        jackson_long(value)


@pytest.mark.parametrize(("value", "message"), [
    ("0x3", 'Cannot deserialize value of type `int` from String "0x3": not a valid `int` value'),
    ("3e0", 'Cannot deserialize value of type `int` from String "3e0": not a valid `int` value'),
    (True, "Cannot deserialize value of type `int` from Boolean value (token "
           "`JsonToken.VALUE_TRUE`)"),
    (1e10, "Numeric value (10000000000.0) out of range of int (-2147483648 - 2147483647)"),
    (2**31, "Numeric value (2147483648) out of range of int (-2147483648 - 2147483647)"),
    ("٣", 'Cannot deserialize value of type `int` from String "٣": not a valid `int` value'),
])  # fmt: skip
def test_int_binding_refuses_in_jacksons_words(value: object, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        jackson_integer(value, "int")
    assert str(refused.value) == message


@pytest.mark.parametrize(("value", "message"), [
    ("yes", 'Cannot deserialize value of type `boolean` from String "yes": only "true"/"True"/'
            '"TRUE" or "false"/"False"/"FALSE" recognized'),
    ("1", 'Cannot deserialize value of type `boolean` from String "1": only "true"/"True"/'
          '"TRUE" or "false"/"False"/"FALSE" recognized'),
    (1.0, "Cannot deserialize value of type `boolean` from Floating-point value (token "
          "`JsonToken.VALUE_NUMBER_FLOAT`)"),
    ([], "Cannot deserialize value of type `boolean` from Array value (token "
         "`JsonToken.START_ARRAY`)"),
])  # fmt: skip
def test_boolean_binding_refuses_in_jacksons_words(value: object, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        jackson_bool(value)
    assert str(refused.value) == message


@pytest.mark.parametrize("value", ["0x10", "1,5", "NaN", "Infinity", True, [], {}])
def test_double_binding_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        jackson_double(value)


def test_string_binding_takes_scalars_and_refuses_structures() -> None:
    assert [jackson_string_field(v) for v in (5, 5.5, True, None, "x")] == \
        ["5", "5.5", "true", None, "x"]
    with pytest.raises(ValueError) as refused:
        jackson_string_field({"a": 1})
    assert str(refused.value) == ("Cannot deserialize value of type `java.lang.String` from "
                                  "Object value (token `JsonToken.START_OBJECT`)")


@pytest.mark.parametrize(("value", "tail"), [
    ("x", "no String-argument constructor/factory method to deserialize from String value ('x')"),
    (5, "no int/Int-argument constructor/factory method to deserialize from Number value (5)"),
    (2**40, "no long/Long-argument constructor/factory method to deserialize from Number value "
            "(1099511627776)"),
    (100.0, "no double/Double-argument constructor/factory method to deserialize from Number "
            "value (100.0)"),
    (False, "no boolean/Boolean-argument constructor/factory method to deserialize from boolean "
            "value (false)"),
])  # fmt: skip
def test_a_scalar_for_a_bean_is_refused_in_jacksons_words(value: object, tail: str) -> None:
    """As the upstream broker refused each for a tenant's body."""
    assert jackson_object_refusal("a.B", value) == (
        "Cannot construct instance of `a.B` (although at least one Creator exists): " + tail)
    assert jackson_object_refusal("a.B", []) == (
        "Cannot deserialize value of type `a.B` from Array value (token `JsonToken.START_ARRAY`)")


def test_bytes_escapes_follow_jacksons_utf8_generator() -> None:
    plain = b'{"rack":"/r1","hostname":"bk1"}'
    assert jackson_bytes_escapes(plain) is plain  # nothing to change: no copy
    assert jackson_bytes_escapes(b'"a\\u001fb"') == b'"a\\u001Fb"'
    assert jackson_bytes_escapes('"é\\u001f"'.encode()) == '"é\\u001F"'.encode()
    assert jackson_bytes_escapes('"😀"'.encode()) == b'"\\uD83D\\uDE00"'
    assert jackson_bytes_escapes(b'"\\\\u001f"') == b'"\\\\u001f"'  # a literal backslash
