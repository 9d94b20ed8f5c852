"""analyze.golive: is this server ready to go live? The checklist `validate` prints.

Takes the records of `validate`'s phases, the server's metric samples and the
SLO thresholds; gives `schemas.Check`s (`checks`): performance against the SLOs
with 95 % intervals (a pass whose interval crosses the limit is marginal), and
stability over a soak (memory and latency drift, errors over time, the drain).

Stands on `analyze.stats`; imports no other `analyze` subpackage.
"""
