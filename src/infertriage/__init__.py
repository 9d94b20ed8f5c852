"""infertriage: find why an LLM inference service is slow.

Drives load against an OpenAI-compatible server (or the built-in twin),
collects evidence from every layer of the request path and produces a
seven-layer bottleneck map. See docs/architecture.md for the pipeline.
"""

__version__ = "0.1.0"
