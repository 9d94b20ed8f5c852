"""analyze.stats: how the load performed, and how sure the figures are.

Takes plain samples (sequences or float arrays) or `RequestRecord`s; gives
numbers and frozen dataclasses, with every random step seeded. Modules:

- `latency`: per-request metrics (TTFT, TPOT, ITL, ICL, E2E), SLOs, the steady
  window and a load level's `LatencySummary`.
- `outcomes`: which requests failed, were cut, rejected (4xx) or refused (429).
- `distribution`: `describe`, one metric's `Distribution` (mean, percentiles).
- `sketch`: `QuantileSketch`, quantiles of a stream within 0.5 % in bounded memory.
- `bootstrap`: the seeded percentile bootstrap (one sample, a difference, groups).
- `significance`: Mann–Whitney, Fisher, KS, trends, quantile functions, proportions.
- `binomial`: exact intervals of an error rate and the requests that would settle it.
- `earlystop`: MLPerf LoadGen's early-stopping rule, the sample a percentile claim needs.
- `samples`: the sample type and its cleaning (finite values only).

Imports nothing from the other `analyze` subpackages.
"""
