"""The native decoder's own checks, each a subset of what the Python decoder accepts."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.unit.native_required import ckptlog_native

native = ckptlog_native()

_digits = st.integers(min_value=0, max_value=99).map(lambda n: f"{n:02d}")
_times = st.builds(
    lambda y, mo, d, h, mi, s, frac, zone: f"{y:04d}-{mo}-{d}T{h}:{mi}:{s}{frac}{zone}",
    st.integers(min_value=0, max_value=9999),
    _digits,
    _digits,
    _digits,
    _digits,
    _digits,
    st.sampled_from(["", ".1", ".12", ".123", ".1234", ".12345", ".123456", ".1234567", "."]),
    st.one_of(
        st.sampled_from(["Z", "z", "", "+00:00", "-00:00", "+24:00", "+05:30", "-23:59", "+0530", " Z"]),
        st.builds(lambda sign, h, m: f"{sign}{h}:{m}", st.sampled_from("+-"), _digits, _digits),
    ),
)


@given(_times | st.text(max_size=40))
@example("2026-02-29T12:00:00Z")  # not a leap year
@example("2024-02-29T12:00:00Z")
@example("0000-01-01T00:00:00Z")
@settings(max_examples=5000)
def test_every_time_the_native_decoder_accepts_passes_fromisoformat(value: str) -> None:
    if native.time_ok(value):
        datetime.fromisoformat(value)  # raises (and fails the test) if Python would refuse it


def test_the_clients_time_stamps_are_decoded_natively() -> None:
    """ckptlog/bodies.py stamps every event this way: such logs must not all go to Python."""
    for spec in ("milliseconds", "microseconds", "seconds"):
        stamp = datetime.now(UTC).isoformat(timespec=spec)
        assert native.time_ok(stamp) and native.time_ok(stamp.replace("+00:00", "Z")), stamp
    assert not native.time_ok("2026-01-31 12:00:00Z") and not native.time_ok("2026-01-31T12:00:00")
