"""Fixtures of the web page's tests: the app served by uvicorn on loopback (in a thread), and
headless Chromium from the distribution driven by Playwright (the browser tests skip, with the
reason, where either is missing; ``scripts/test.sh`` installs Chromium when it runs as root)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.web_helpers import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (each test opens its own context). Not longer: the
    sync Playwright API keeps an event loop running in the main thread while it is open."""
    if shutil.which(CHROMIUM) is None:
        pytest.skip(f"the browser tests need Chromium at {CHROMIUM}: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the browser tests need Playwright: pip install -e '.[dev]'")
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # a loaded machine may take its time
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (its own storage) and a page in it."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(30_000)
    try:
        yield context.new_page()
    finally:
        context.close()
