"""analyze.stats.sketch: the stream's quantiles within the stated relative error of numpy's."""

from __future__ import annotations

import numpy as np
import pytest

from infertriage.analyze.stats.sketch import DEFAULT_RELATIVE_ERROR, QuantileSketch

QS = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0]


def _draws() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "lognormal ttft": rng.lognormal(np.log(0.05), 1.2, 20_000),
        "exponential itl": rng.exponential(0.008, 50_000) + 1e-4,
        "uniform e2e": rng.uniform(0.5, 40.0, 3_000),
        "bimodal": np.concatenate([rng.normal(0.01, 1e-3, 900), rng.normal(2.0, 0.1, 100)]),
        "few": np.array([0.3, 0.1, 0.2]),
        "one": np.array([0.042]),
    }


@pytest.mark.parametrize("name", sorted(_draws()))
def test_quantiles_are_within_the_relative_error_of_numpys(name: str) -> None:
    values = _draws()[name]
    sketch = QuantileSketch()
    sketch.add_many(values[: len(values) // 2])
    for value in values[len(values) // 2 :].tolist():
        sketch.add(value)
    exact = np.percentile(values, [q * 100 for q in QS])
    got = sketch.quantiles(QS)
    assert np.all(np.abs(got - exact) <= DEFAULT_RELATIVE_ERROR * exact + 1e-15), name
    assert sketch.count == len(values)
    assert sketch.mean == pytest.approx(values.mean(), rel=1e-12)
    assert (sketch.min, sketch.max) == (values.min(), values.max())


def test_weights_count_a_value_that_many_times() -> None:
    rng = np.random.default_rng(3)
    values = rng.lognormal(-4, 0.5, 2_000)
    weights = rng.integers(1, 5, values.size)
    sketch = QuantileSketch()
    sketch.add_many(values, weights)
    exact = np.percentile(np.repeat(values, weights), [50, 90, 99])
    assert np.all(np.abs(sketch.quantiles([0.5, 0.9, 0.99]) - exact) <= 0.005 * exact)
    assert sketch.count == weights.sum()
    assert sketch.mean == pytest.approx(np.repeat(values, weights).mean(), rel=1e-12)


def test_merging_equals_one_sketch_of_everything() -> None:
    rng = np.random.default_rng(11)
    first, second = rng.exponential(0.02, 5_000), rng.exponential(3.0, 5_000)
    merged, parts = QuantileSketch(), QuantileSketch()
    merged.add_many(np.concatenate([first, second]))
    parts.add_many(first)
    other = QuantileSketch()
    other.add_many(second)
    parts.merge(other)
    assert np.array_equal(parts.quantiles(QS), merged.quantiles(QS))
    assert parts.count == merged.count and parts.mean == pytest.approx(merged.mean)


def test_zeros_and_an_empty_sketch() -> None:
    empty = QuantileSketch()
    assert empty.count == 0 and empty.mean == 0.0 and empty.quantile(0.5) == 0.0
    sketch = QuantileSketch()
    sketch.add_many(np.array([0.0, 0.0, 0.0, 1.0]))
    assert sketch.quantile(0.5) == 0.0 and sketch.quantile(1.0) == 1.0
    assert sketch.quantile(0.75) == pytest.approx(np.percentile([0, 0, 0, 1.0], 75), abs=1e-12)


def test_memory_is_bounded_by_the_span_not_the_count() -> None:
    sketch = QuantileSketch()
    rng = np.random.default_rng(5)
    for _ in range(20):
        sketch.add_many(rng.uniform(1e-3, 100.0, 50_000))
    assert sketch.count == 1_000_000
    # ln(1e5) / ln((1 + a) / (1 - a)) buckets cover 1 ms to 100 s.
    assert len(sketch._counts) <= 1_200


def test_a_relative_error_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="relative_error"):
        QuantileSketch(relative_error=0.0)
