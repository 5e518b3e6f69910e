"""The repository's one percentile (load_testing.report.percentile, re-exported by bench.stats) gives the values of
the hand-written linear interpolation it replaced and of numpy.percentile's default method."""

from __future__ import annotations

import math
import random

import numpy
import pytest

from bench import stats as bench_stats
from load_testing.report import percentile

QS = (0, 1, 10, 25, 33.3, 50, 75, 90, 95, 99, 99.9, 100)


def _hand_written(values: list[float], q: float) -> float:
    # The formula both bench/stats.py and load_testing/report.py carried before.
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 10, 11, 100, 101, 1000])
def test_same_values_as_the_old_formula_and_numpy(size: int) -> None:
    rng = random.Random(size)
    values = [rng.lognormvariate(0, 1) * 100 for _ in range(size)]
    for q in QS:
        ours = percentile(values, q)
        assert math.isclose(ours, _hand_written(values, q), rel_tol=1e-12, abs_tol=1e-12), (size, q)
        assert math.isclose(ours, float(numpy.percentile(values, q)), rel_tol=1e-12, abs_tol=1e-12), (size, q)


def test_exact_on_small_integers_and_edges() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([4, 1, 3, 2], 25) == 1.75
    assert percentile([5], 99) == 5
    assert percentile([3, 1, 2], 0) == 1 and percentile([3, 1, 2], 100) == 3
    assert math.isnan(percentile([], 50))


def test_bench_uses_the_same_function() -> None:
    assert bench_stats.percentile is percentile
