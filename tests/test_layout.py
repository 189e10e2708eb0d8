"""btf.layout's shortcut for the common hole between members: whenever it
says C aligns the next member by itself, libbpf's padding rules add nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from btf.layout import aligns_itself, padding_fields


@settings(max_examples=3000, deadline=None)
@given(st.integers(0, 4096), st.integers(1, 1024), st.sampled_from([0, 1, 2, 4, 8, 16, 32]),
       st.sampled_from([4, 8]))
def test_a_hole_that_aligns_itself_needs_no_padding(cur_off, gap, align, pointer_size):
    next_off = cur_off + gap
    if aligns_itself(cur_off, next_off, align, pointer_size):
        assert padding_fields(cur_off, next_off, align, False, pointer_size) == []


def test_the_shortcut_is_taken_for_natural_holes():
    assert aligns_itself(32, 64, 8, 8)       # int then a pointer
    assert aligns_itself(8, 16, 2, 8)        # char then a short
    assert aligns_itself(9, 16, 1, 8)        # after a bitfield, a byte-aligned member
    assert not aligns_itself(32, 128, 8, 8)  # a wider hole: padding
    assert not aligns_itself(32, 64, 8, 4)   # 8-byte alignment with 4-byte longs: the slow rules
    assert not aligns_itself(0, 128, 16, 8)  # over-aligned: the slow rules
    assert not aligns_itself(0, 64, 0, 8)    # no alignment (bad BTF)
