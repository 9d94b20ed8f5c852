"""analyze, level 1: pure analyses of what a run recorded, split by the question each answers.

Takes request records, metric samples, server settings, logs and profiler traces
(plain data: no clock, no I/O beyond reading the files it is given); gives typed
summaries, verdicts, checks and `Signal`s for `diagnose`. Subpackages:

- `stats`: how the load performed and how sure we are — per-request metrics, a
  level's `LatencySummary`, request outcomes, distributions, the bootstrap, tests.
- `signals`: what each source says, as named `Signal`s — the client's records,
  the server's metrics (and the Prometheus math under them), its deployment and
  its scaling. Server-log signals are `analyze.server_log`'s.
- `compare`: whether a run differs from a baseline, metric by metric, with a verdict.
- `golive`: whether a server is ready — the go-live checklist of `validate`.
- `trace`: what a profiler trace shows — kernels, steps, launches, findings.

The subpackages stand on `stats` and never on one another (import-linter).
"""
