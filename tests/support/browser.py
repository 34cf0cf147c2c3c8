"""A real headless chromium for the browser tests: one per test session (so one per pytest-xdist
worker), lent to each test with a clean slate.

Starting chromium and its driver costs seconds a test; the browser tests (the answer page's, the
inspector's) share one instead. Between tests every cookie is cleared (the inspector's login cookie
is per host, not per port, so it would reach the next test's daemon) and the page is left on
``about:blank``; a browser that no longer answers is replaced rather than failing the tests after it.

Debian's chromium and chromedriver are driven by Selenium (``.ci/run`` installs them when missing);
outside CI a test that needs them skips, saying so, on a machine without them, and in CI
(``CI=true``) it fails instead, so a CI run can never pass without having run it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def browser_or_skip() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not (p.exists() and os.access(p, os.X_OK))]
    if not missing:
        return
    why = f"{', '.join(missing)} missing: install Debian's chromium and chromium-driver (.ci/run does)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why)
    pytest.skip(why)


class Chromium:
    """The session's browser, started on first use and again if it died."""

    def __init__(self, profiles: pytest.TempPathFactory) -> None:
        self._profiles = profiles
        self._driver: Any = None

    def lend(self) -> Any:
        browser_or_skip()
        if self._driver is None:
            self._driver = self._start()
        return self._driver

    def reset(self) -> None:
        """Clear what one test left behind; a browser that fails at that is quit and replaced."""
        if self._driver is None:
            return
        from selenium.common.exceptions import WebDriverException

        try:
            self._driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
            self._driver.get("about:blank")
        except WebDriverException:
            self.close()

    def close(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001  # a dead browser: quitting it is best effort
                pass

    def _start(self) -> Any:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (*FLAGS, f"--user-data-dir={self._profiles.mktemp('chromium-profile')}"):
            options.add_argument(flag)
        # an explicit driver path: Selenium Manager never looks for (or downloads) one
        driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
        driver.set_page_load_timeout(30)
        return driver


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    holder = Chromium(tmp_path_factory)
    try:
        yield holder
    finally:
        holder.close()


@pytest.fixture
def browser(chromium: Chromium) -> Iterator[object]:
    """The session's chromium (a selenium ``WebDriver``), clean for this test."""
    driver = chromium.lend()
    try:
        yield driver
    finally:
        chromium.reset()
