"""The bookie registration value (`BookieServiceInfoFormat`), against bytes derived by hand
from the field table (reference 1.1), and the legacy empty value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metastore.bookie_service_info import (
    BOOKIE_RPC,
    BookieServiceInfo,
    ServiceEndpoint,
    bookie_service_info,
    decode_bookie_service_info,
    encode_bookie_service_info,
)
from metastore.errors import MetadataFormatError

# field 6 (endpoints), length 34: 1 id "bookie", 2 port 3181 (varint ed 18),
# 3 host "127.0.0.1", 4 protocol "bookie-rpc"
BOOKIE_ONLY = bytes.fromhex(
    "3222"
    "0a06" + b"bookie".hex() + "10ed18" + "1a09" + b"127.0.0.1".hex() + "220a" + b"bookie-rpc".hex()
)


def test_a_bookie_endpoint_is_byte_exact() -> None:
    info = bookie_service_info("127.0.0.1", 3181)
    assert encode_bookie_service_info(info) == BOOKIE_ONLY
    assert decode_bookie_service_info("127.0.0.1:3181", BOOKIE_ONLY) == info


def test_http_endpoint_tls_and_sorted_properties() -> None:
    info = bookie_service_info(
        "b1", 3181, http_port=8000, tls=True, properties={"z": "1", "a": "2"}
    )
    raw = encode_bookie_service_info(info)
    # second endpoint: id "httpserver", port 8000 (varint c0 3e), protocol "http"
    assert b"\x0a\x0ahttpserver\x10\xc0\x3e\x1a\x02b1\x22\x04http" in raw
    assert b"\x32\x03tls" in raw  # extension of the bookie endpoint (field 6 inside it)
    # map entries (field 7) in key order
    assert raw.endswith(b"\x3a\x06\x0a\x01a\x12\x012\x3a\x06\x0a\x01z\x12\x011")
    decoded = decode_bookie_service_info("b1:3181", raw)
    assert decoded == info
    assert decoded.endpoint("httpserver") == ServiceEndpoint("httpserver", "b1", 8000, "http")


def test_empty_value_is_the_legacy_registration() -> None:
    info = decode_bookie_service_info("10.0.0.7:3181", b"")
    assert info == BookieServiceInfo(
        (ServiceEndpoint("10.0.0.7:3181", "10.0.0.7", 3181, BOOKIE_RPC),)
    )


@pytest.mark.parametrize("bookie_id", ["no-port", ":3181", "host:port"])
def test_empty_value_with_an_id_that_is_no_address(bookie_id: str) -> None:
    with pytest.raises(MetadataFormatError, match="not host:port"):
        decode_bookie_service_info(bookie_id, b"")


@pytest.mark.parametrize("raw", [b"\xff\xff", b"\x32\x05ab", b"\x32\x02\x10\x01"])
def test_garbage_is_a_format_error(raw: bytes) -> None:
    with pytest.raises(MetadataFormatError, match="bookie registration"):
        decode_bookie_service_info("h:1", raw)


texts = st.text(max_size=12)
endpoints = st.builds(
    ServiceEndpoint,
    id=texts,
    host=texts,
    port=st.integers(-(2**31), 2**31 - 1),
    protocol=texts,
    auth=st.lists(texts, max_size=3).map(tuple),
    extensions=st.lists(texts, max_size=3).map(tuple),
)


@given(
    st.lists(endpoints, min_size=1, max_size=3).map(tuple),  # none at all encodes as b""
    st.dictionaries(texts, texts, max_size=4),
)
def test_round_trip(found: tuple[ServiceEndpoint, ...], properties: dict[str, str]) -> None:
    info = BookieServiceInfo(found, properties)
    assert decode_bookie_service_info("h:1", encode_bookie_service_info(info)) == info
