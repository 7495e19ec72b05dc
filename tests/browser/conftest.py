"""A real browser against a real server: Debian's Chromium driven by Playwright.

`live_server(settings)` serves the app with uvicorn on a free loopback port in a thread;
`page` is a fresh Chromium page. Chromium is Debian's (/usr/bin/chromium, installed by .ci/run);
Playwright never downloads a browser. Without Chromium these tests are skipped with one line
saying so, but CI always has it.
"""

import os
import shutil
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager

import pytest
import uvicorn

from app.config import Settings
from app.main import create_app

CHROMIUM = os.environ.get("INTAKE_CHROMIUM", "/usr/bin/chromium")
# The flags a root, headless, offline machine needs (see the machine notes): no sandbox, no GPU,
# and none of the background traffic the closed network would refuse.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


SKIP_BROWSER = (
    f"Browser tests SKIPPED: there is no Chromium at {CHROMIUM} — install Debian's chromium "
    "(apt-get install chromium) or point INTAKE_CHROMIUM at one"
)
#: How many browser tests this run skipped for want of Chromium (read by the terminal summary).
_skipped = pytest.StashKey[int]()


def pytest_collection_modifyitems(config, items) -> None:
    if shutil.which(CHROMIUM) or os.path.exists(CHROMIUM):
        return
    if os.environ.get("INTAKE_REQUIRE_BROWSER") == "1":
        pytest.exit(f"INTAKE_REQUIRE_BROWSER=1 but there is no Chromium at {CHROMIUM}", returncode=3)
    skip = pytest.mark.skip(reason=f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    browser = [item for item in items if "tests/browser" in str(item.fspath)]
    for item in browser:
        item.add_marker(skip)
    config.stash[_skipped] = len(browser)


def pytest_terminal_summary(terminalreporter, config) -> None:
    # -rfE (pyproject) does not list skips: without this line they would pass unnoticed.
    if skipped := config.stash.get(_skipped, 0):
        terminalreporter.write_line(f"{SKIP_BROWSER}; {skipped} tests did not run.", yellow=True, bold=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _serving(settings: Settings) -> Iterator[str]:
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the live server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def live_server() -> Iterator[Callable[[Settings], str]]:
    """`live_server(settings)`: the app served by uvicorn on loopback; its base URL."""
    stack = []

    def start(settings: Settings) -> str:
        context = _serving(settings)
        stack.append(context)
        return context.__enter__()

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


@pytest.fixture
async def browser() -> AsyncIterator:
    """Debian's Chromium, headless, through Playwright."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
async def page(browser) -> AsyncIterator:
    """A fresh page in a fresh context (no cookies, no storage), at a desktop width."""
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    page = await context.new_page()
    try:
        yield page
    finally:
        await context.close()
