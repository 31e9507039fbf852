"""The quick version of the input-path fuzzer (the long one: `python -m tests.reliability.fuzz`)."""

from __future__ import annotations

import pytest

from tests.reliability.fuzz import run


@pytest.mark.parametrize("seed", [1, 2])
def test_no_input_makes_decoding_or_folding_raise(seed: int) -> None:
    tally = run(20_000, seed)
    assert not tally.failures, tally.failures[0]
    assert tally.inputs == 20_000
    # the mutations reach all three outcomes, so the fold itself is exercised, not only the decoder
    assert tally.applied > 500 and tally.rejected_fold > 200 and tally.rejected_decode > 5_000
