"""ckptlog.events.numbers: the one place readers turn a metric into text or a plotted float
(issue 42 items 1-2); tests/unit/test_attack_huge_scores.py drives every reader through it."""

from __future__ import annotations

from ckptlog.events.numbers import comparable, number_text, plotted

BIG, SMALL = 10**400, -(10**400)


def test_numbers_show_and_place_any_json_number() -> None:
    assert number_text(BIG) == "1e+400" and number_text(SMALL) == "-1e+400"
    assert number_text(15 * 10**399) == "1.5e+400" and number_text(123456789) == "123456789"
    assert number_text(0.123456789) == "0.123457" and number_text(10**5000) == "1e+5000"  # past int's str limit
    assert plotted(BIG) == 1.7976931348623157e308 and plotted(SMALL) == -1.7976931348623157e308
    assert plotted(True) is None and plotted(float("nan")) is None and plotted("1") is None
    assert comparable(BIG) == BIG and comparable(float("inf")) is None
