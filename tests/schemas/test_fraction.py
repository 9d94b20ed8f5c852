"""One way to write a fraction (`schemas.parse_fraction`), and each caller's own range."""

from __future__ import annotations

import math

import pytest

from infertriage.plan.whatif import parse_what_if
from infertriage.schemas import UserError, parse_fraction
from infertriage.schemas.thresholds import load_thresholds


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), (" 0.05 ", 0.05), ("150%", 1.5)])
def test_a_fraction_is_a_decimal_or_a_percentage(text: str, value: float) -> None:
    assert parse_fraction(text) == pytest.approx(value)


def test_text_that_is_no_number_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_fraction("half")
    assert math.isnan(parse_fraction("nan"))  # the callers' ranges refuse it


def test_what_if_reads_a_utilization_as_a_share_above_zero() -> None:
    assert parse_what_if("gpu-memory-utilization=90%,0.8") == (
        "gpu-memory-utilization",
        [("90%", pytest.approx(0.9)), ("0.8", 0.8)],
    )
    for bad in ("0", "120%", "nan"):
        with pytest.raises(UserError):
            parse_what_if(f"gpu-memory-utilization={bad}")


def test_an_slo_share_may_be_zero_and_may_not_pass_one() -> None:
    assert load_thresholds("error_rate=0").error_rate == 0.0
    assert load_thresholds("error_rate=2%").error_rate == pytest.approx(0.02)
    with pytest.raises(UserError):
        load_thresholds("error_rate=120%")
