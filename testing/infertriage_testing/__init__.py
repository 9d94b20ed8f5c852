"""testing: servers and traces with known answers, for tests and benchmarks — not the product.

A distribution of its own (`testing/pyproject.toml`, installed editable by
`make`), so `pip install infertriage` ships none of it and nothing in
`src/infertriage` may import it (`tests/test_architecture.py`). Parts:
`testserver` (a loopback OpenAI-compatible server with known timing and
pathologies, in a thread or a child process: `python -m
infertriage_testing.testserver --help`), `floor` (a raw aiohttp reader, the
floor the client's TTFT is judged against), `tracesynth` (PyTorch-profiler
traces of decode steps and the answers the trace analyses must find) and
`bigfiles` (hundreds of megabytes of gzip made cheaply: bombs, padded traces).
"""
