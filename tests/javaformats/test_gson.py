"""Gson's compact, HTML-safe JSON of a HashMap<String, String>."""

from __future__ import annotations

from javaformats import gson_hash_map, gson_string


def test_gson_escapes_html_characters_in_lower_case_hex() -> None:
    # new Gson().toJson("a<b>&'=") escapes what could close an HTML context
    assert gson_string("a<b>&'=") == '"a\\u003cb\\u003e\\u0026\\u0027\\u003d"'
    assert gson_string('q"\\\n\x01\u2028') == '"q\\"\\\\\\n\\u0001\\u2028"'
    assert gson_string("grüße") == '"grüße"'


def test_gson_map_is_compact_and_in_hash_map_order() -> None:
    assert gson_hash_map({}) == "{}"
    # "b" and "a" land in buckets 2 and 1 of a HashMap: "a" iterates first
    assert gson_hash_map({"b": "2", "a": "1"}) == '{"a":"1","b":"2"}'
