"""loadgen, level 2: `--locust-workers N` — the same load driven by a Locust master and workers.

Takes a `LoadPlan` and a `ClientConfig`; gives `RequestRecord`s into bench's
sink and `WorkerReport`s, as `workers` does for `--workers N`, with the users
on Locust's distributed runner (a master and workers across hosts). Parts:
`launch` (bench's side: starts the processes, passes records on), `wire`
(what travels between them), `master` and `worker` (the Locust processes),
`stream` (one measured request on gevent, with `client`'s SSE parser and
stamps). Only `launch` and `wire` are imported where asyncio runs; Locust and
gevent live in the `python -m infertriage.loadgen.locust` processes alone.
"""

from infertriage.loadgen.locust.launch import LocustRun, parse_master_host, run_locust

__all__ = ["LocustRun", "parse_master_host", "run_locust"]
