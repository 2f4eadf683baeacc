"""Rack-name validation (Pulsar's rule), as properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.services.racks import is_valid_rack_name

segment = st.text(st.characters(blacklist_characters="/", codec="utf-8"), min_size=1, max_size=12)
slashes = st.text(alphabet="/", max_size=3)


@given(segment, slashes, slashes)
def test_one_segment_is_a_rack_whatever_the_outer_slashes(name: str, lead: str, tail: str) -> None:
    rack = lead + name + tail
    assert is_valid_rack_name(rack, region_aware=False)
    assert not is_valid_rack_name(rack, region_aware=True)


@given(segment, segment, slashes, slashes)
def test_two_segments_are_a_region_rack_only(region: str, rack: str, lead: str, tail: str) -> None:
    path = f"{lead}{region}/{rack}{tail}"
    assert is_valid_rack_name(path, region_aware=True)
    assert not is_valid_rack_name(path, region_aware=False)


@given(st.lists(segment, min_size=3, max_size=6), slashes)
def test_three_or_more_segments_are_never_valid(parts: list[str], lead: str) -> None:
    path = lead + "/".join(parts)
    assert not is_valid_rack_name(path, region_aware=False)
    assert not is_valid_rack_name(path, region_aware=True)


@given(slashes)
def test_empty_and_slash_only_pass_in_rack_mode_and_fail_in_region_mode(only: str) -> None:
    assert is_valid_rack_name(only, region_aware=False)
    assert not is_valid_rack_name(only, region_aware=True)


def test_missing_rack_behaves_like_empty() -> None:
    assert is_valid_rack_name(None, region_aware=False)
    assert not is_valid_rack_name(None, region_aware=True)


@given(segment, segment)
def test_inner_double_slash_counts_twice(a: str, b: str) -> None:
    assert not is_valid_rack_name(f"/{a}//{b}", region_aware=True)
