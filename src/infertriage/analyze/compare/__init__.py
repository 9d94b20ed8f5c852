"""analyze.compare: does a run differ from its baseline, and is that a regression?

Takes two runs' `RequestRecord`s (and their server configurations); gives a
`Comparison` per load level (`comparison`: every metric's change, the traffic-
shape warnings, the config diff) and its `Verdict` (`verdict`: regressed,
improved, unchanged or inconclusive, by seeded tests and bootstrap intervals),
the sample that would decide it (`power`: requests per arm from a pilot's
spread) and `compare --until-decided`'s looks (`sequential`: alpha spending).

Stands on `analyze.stats`; imports no other `analyze` subpackage.
"""
