"""BookKeeper's cookie text, against what an upstream bookie (4.17.2) wrote to its VERSION files
and to `/ledgers/cookies/{bookieId}`."""

from __future__ import annotations

import pytest

from javaformats.cookie import Cookie, InvalidCookie, encode_dir_paths

# Written by BookKeeper 4.17.2's bookie (journalDirectories=/d/upstream0/journal,
# ledgerDirectories=/d/upstream0/ledgers), byte for byte.
UPSTREAM = (
    "5\n"
    'bookieHost: "127.0.0.1:34453"\n'
    'journalDir: "/d/upstream0/journal"\n'
    'ledgerDirs: "1\\t/d/upstream0/ledgers"\n'
    'instanceId: "7f2c1aad-dc63-4b96-b6f8-f859b975d3c7"\n'
)
INSTANCE = "7f2c1aad-dc63-4b96-b6f8-f859b975d3c7"


def ours() -> Cookie:
    return Cookie.generate("127.0.0.1:34453", ["/d/upstream0/journal"], ["/d/upstream0/ledgers"],
                           INSTANCE)


def test_generated_cookie_is_upstreams_text() -> None:
    assert ours().encode() == UPSTREAM
    assert Cookie.parse(UPSTREAM) == ours()


def test_dir_lists_and_escapes() -> None:
    assert encode_dir_paths(["/a", "/b"]) == "2\t/a\t/b"
    cookie = Cookie.generate("h:1", ["/j1", "/j2"], ['/l"é'], None)
    text = cookie.encode()
    assert text == ('5\nbookieHost: "h:1"\njournalDir: "/j1,/j2"\n'
                    'ledgerDirs: "1\\t/l\\"\\303\\251"\n')  # no instanceId line without one
    assert Cookie.parse(text) == cookie


def test_verify_messages() -> None:
    ours().verify(Cookie.parse(UPSTREAM))
    moved = Cookie.generate("127.0.0.1:34453", ["/d/upstream0/journal"], ["/elsewhere"], INSTANCE)
    with pytest.raises(InvalidCookie) as mismatch:
        moved.verify(ours())
    assert str(mismatch.value) == f"Cookie [{moved.encode()}] is not matching with [{UPSTREAM}]"
    other = Cookie.generate("127.0.0.1:34453", ["/d/upstream0/journal"],
                            ["/d/upstream0/ledgers"], None)
    with pytest.raises(InvalidCookie, match=rf"^instanceId null is not matching with {INSTANCE}$"):
        other.verify(ours())
    with pytest.raises(InvalidCookie, match=r"^Cookie is of too old version 2$"):
        ours().verify(Cookie.parse("2\n"))


def test_parse_errors() -> None:
    with pytest.raises(ValueError, match=r"^Invalid string 'x', cannot parse cookie.$"):
        Cookie.parse("x\n")
    with pytest.raises(ValueError, match=r"^Exception in parsing cookie$"):
        Cookie.parse("")
    with pytest.raises(ValueError, match="required"):
        Cookie.parse('5\nbookieHost: "h:1"\n')
