"""Java properties files (`java.util.Properties.load`) and broker.conf."""

from __future__ import annotations

import pytest

from javaformats import parse_broker_conf, parse_properties, property_lines


def test_java_properties_syntax() -> None:
    text = (
        "# comment\n! also a comment\n"
        "webServiceUrl=http://localhost:8080/\n"
        "authPlugin = org.x.Token\n"
        "authParams:token:abc\n"
        "spaced value here\n"
        "multi=a\\\n    b\n"
        "empty=\n"
        "escaped\\=key=v\\tw\n"
    )
    assert parse_properties(text) == {
        "webServiceUrl": "http://localhost:8080/",
        "authPlugin": "org.x.Token",
        "authParams": "token:abc",
        "spaced": "value here",
        "multi": "ab",
        "empty": "",
        "escaped=key": "v\tw",
    }


def test_unicode_escapes_and_continued_comment_markers() -> None:
    text = "k=caf\\u00e9\nnext=a\\\n  #not-a-comment\n"
    assert parse_properties(text) == {"k": "café", "next": "a#not-a-comment"}


def test_entries_carry_their_first_line() -> None:
    entries = list(property_lines("# c\n\na=1\\\n 2\nb\n"))
    assert [(e.number, e.key, e.value, e.separated) for e in entries] == [
        (3, "a", "12", True), (5, "b", "", False)]  # fmt: skip


def test_broker_conf_trims_and_refuses_a_bare_key() -> None:
    assert parse_broker_conf("clusterName = standalone \nzk=zk:host:2181\n") == {
        "clusterName": "standalone", "zk": "zk:host:2181"}  # fmt: skip
    expected = r"^conf/broker.conf:2: expected key=value, got 'justakey'$"
    with pytest.raises(ValueError, match=expected):
        parse_broker_conf("a=1\njustakey\n", "conf/broker.conf")
