"""A real browser for the HTML report's tests: Debian's `chromium`, headless, over DevTools.

`open_page(path)` starts chromium with a fresh profile and its DevTools
port on 127.0.0.1, opens `file://path`, waits for the load event and a
short settle, and gives a `PageLoad`: every URL the page asked the network
layer for (`Network.requestWillBeSent`), every console message of level
error or warning (`Runtime.consoleAPICalled`, `Log.entryAdded` — a
Content-Security-Policy refusal is one), every uncaught exception, every
JavaScript dialog that opened (an `alert()` that ran), the page's
`innerText`, and the number of elements a selector matches. The DevTools
protocol is spoken with aiohttp's WebSocket client; no driver package.
`chromium_binary()` is None where the browser is not installed.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["PageLoad", "chromium_binary", "open_page"]

_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-extensions",
    "--disable-default-apps", "--mute-audio", "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)  # fmt: skip
_SETTLE_S = 0.5  # after the load event: late requests or errors still arrive


def chromium_binary() -> str | None:
    """The chromium executable on PATH (Debian's `chromium` package), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageLoad:
    url: str
    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)  # "level: text" of errors and warnings
    exceptions: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    text: str = ""
    counts: dict[str, int] = field(default_factory=dict)  # selector → elements matched

    @property
    def foreign_requests(self) -> list[str]:
        """Requests other than the page itself and data: URLs."""
        return [u for u in self.requests if u != self.url and not u.startswith("data:")]

    @property
    def errors(self) -> list[str]:
        return [line for line in self.console if line.startswith("error")] + self.exceptions


class _Session:
    """One DevTools page session: commands by id, events kept in order as they arrive."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, load: PageLoad) -> None:
        self._ws = ws
        self._id = 0
        self._load = load
        self.seen: list[str] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        wanted = self._id
        await self._ws.send_json({"id": wanted, "method": method, "params": params})
        while True:
            message = await self._ws.receive_json()
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                await self._event(message["method"], message.get("params", {}))

    async def until(self, event: str) -> None:
        while event not in self.seen:
            message = await self._ws.receive_json()
            if "method" in message:
                await self._event(message["method"], message.get("params", {}))

    async def _event(self, method: str, params: dict[str, Any]) -> None:
        self.seen.append(method)
        load = self._load
        if method == "Network.requestWillBeSent":
            load.requests.append(str(params["request"]["url"]))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            load.console.append(f"{params['type']}: {text}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            load.console.append(f"{params['entry']['level']}: {params['entry']['text']}")
        elif method == "Runtime.exceptionThrown":
            load.exceptions.append(str(params["exceptionDetails"].get("text", "")))
        elif method == "Page.javascriptDialogOpening":
            load.dialogs.append(str(params.get("message", "")))
            # answered without waiting: the page would otherwise block every later command
            self._id += 1
            await self._ws.send_json(
                {
                    "id": self._id,
                    "method": "Page.handleJavaScriptDialog",
                    "params": {"accept": True},
                }
            )


async def _page_socket(http: aiohttp.ClientSession, port: int, deadline: float) -> str:
    while True:
        try:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = await response.json()
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("chromium showed no page target")
        await asyncio.sleep(0.1)


async def _drive(port: int, load: PageLoad, selectors: Sequence[str], deadline: float) -> None:
    async with aiohttp.ClientSession() as http:
        socket = await _page_socket(http, port, deadline)
        async with http.ws_connect(socket, max_msg_size=0) as ws:
            session = _Session(ws, load)
            for domain in ("Page", "Network", "Runtime", "Log"):
                await session.call(f"{domain}.enable")
            await session.call("Page.navigate", url=load.url)
            await session.until("Page.loadEventFired")
            await asyncio.sleep(_SETTLE_S)
            text = await session.call(
                "Runtime.evaluate", expression="document.body.innerText", returnByValue=True
            )
            load.text = str(text["result"].get("value", ""))
            for selector in selectors:
                found = await session.call(
                    "Runtime.evaluate",
                    expression=f"document.querySelectorAll({selector!r}).length",
                    returnByValue=True,
                )
                load.counts[selector] = int(found["result"]["value"])


def _port(profile: Path, process: subprocess.Popen[bytes], deadline: float) -> int:
    """The DevTools port chromium chose, from the file it writes into its profile."""
    marker = profile / "DevToolsActivePort"
    while True:
        if marker.is_file() and (lines := marker.read_text().splitlines()):
            return int(lines[0])
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before DevTools began")
        if time.monotonic() > deadline:
            raise TimeoutError("chromium did not open its DevTools port")
        time.sleep(0.05)


def open_page(path: Path, *, selectors: Sequence[str] = (), timeout_s: float = 60.0) -> PageLoad:
    """Load `path` in headless chromium; see the module docstring."""
    binary = chromium_binary()
    if binary is None:
        raise RuntimeError("chromium is not installed")
    load = PageLoad(url=path.resolve().as_uri())
    deadline = time.monotonic() + timeout_s
    profile = tempfile.mkdtemp(prefix="infertriage-chromium-")
    try:
        command = [binary, *_FLAGS, f"--user-data-dir={profile}", "about:blank"]
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        try:
            port = _port(Path(profile), process, deadline)
            remaining = max(1.0, deadline - time.monotonic())
            asyncio.run(asyncio.wait_for(_drive(port, load, selectors, deadline), remaining))
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
    finally:
        _remove_profile(Path(profile))
    return load


def _remove_profile(profile: Path) -> None:
    """Chromium's helper processes (crashpad, the zygote) outlive the browser by a moment
    and may still write into the profile ("Directory not empty"): retry, then let go."""
    for _ in range(20):
        try:
            shutil.rmtree(profile)
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
        else:
            return
    shutil.rmtree(profile, ignore_errors=True)
