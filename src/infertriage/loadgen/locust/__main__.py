"""loadgen, level 2: `python -m infertriage.loadgen.locust master|worker` — a Locust process.

Takes the command line bench gives its master (`master --job FILE --bind H --port P
--out-fd FD`) or a worker's (`worker --master-host H [--master-port P] [--once]`, the
one a user runs on each load host of a multi-host run, with `OPENAI_API_KEY` set when
the run sends a key); gives a running master until its run ends, or a worker that serves
one run (`--once`: bench's local workers) or run after run until stopped. Locust monkey-
patches the process for gevent when it is imported: this entry point is its only
importer, in a process where no asyncio runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from pathlib import Path

from infertriage.loadgen.locust.wire import DEFAULT_PORT
from infertriage.schemas.lifeline import die_with_parent


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m infertriage.loadgen.locust")
    # bench's children: SIGTERM when bench dies without stopping them (`schemas.lifeline`)
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="role", required=True)
    master = sub.add_parser("master", help="bench starts this one")
    master.add_argument("--job", type=Path, required=True)
    master.add_argument("--bind", default="127.0.0.1")
    master.add_argument("--port", type=int, default=DEFAULT_PORT)
    master.add_argument("--out-fd", type=int, required=True)
    worker = sub.add_parser("worker", help="one load process; start N of them on any hosts")
    worker.add_argument("--master-host", required=True)
    worker.add_argument("--master-port", type=int, default=DEFAULT_PORT)
    worker.add_argument("--once", action="store_true", help="serve one run, then exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    # The parent packages imported aiohttp (and so ssl) before Locust patches the process;
    # the Locust side never uses them (its requests go out on gevent's own sockets and TLS).
    warnings.filterwarnings("ignore", message="Monkey-patching ssl after ssl")
    import locust  # noqa: F401, PLC0415  # patches for gevent: only ever here

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    if args.role == "master":
        from infertriage.loadgen.locust.master import run_master  # noqa: PLC0415

        with os.fdopen(args.out_fd, "wb") as out:
            return run_master(args.job, args.bind, args.port, out)
    from infertriage.loadgen.locust.worker import run_worker  # noqa: PLC0415

    return run_worker(args.master_host, args.master_port, once=args.once)


if __name__ == "__main__":
    sys.exit(main())
