"""analyze.signals: what each source of evidence says, as named `Signal`s for `diagnose`.

Takes one source each — the client's `RequestRecord`s (`client`, with the prefix
reuse of the prompts it sent in `reuse`), the server's
Prometheus samples over the run's phases (`metrics`, with the counter and
histogram math in `prom`, and its data-parallel ranks read apart in `ranks`),
its settings and fleet (`deployment`), its replicas' scaling (`scaling`); gives
`Signal`s with names from `diagnose.SIGNALS`, besides the per-rank figures
(`dp.running_by_rank.<rank>`…) and the artefacts of `schemas.artefacts`, which
no rule needs by name. Server logs are read by `analyze.server_log`, traces by
`analyze.trace`.

Stands on `analyze.stats`; imports no other `analyze` subpackage.
"""
