"""The answer page in a real headless browser (docs/protocol.md §10): Debian's chromium, driven by
Selenium through chromedriver, opens the link, clicks Approve, and the suspended handle finishes.

``.ci/run`` installs chromium and chromium-driver when they are missing; outside CI the test skips,
saying so, on a machine without them, and in CI (``CI=true``) it fails instead, so a CI run can
never pass without having run it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.answer_links import linked_daemon, park
from tests.support.grpc_client import open_stub
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def _browser_or_skip() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not (p.exists() and os.access(p, os.X_OK))]
    if not missing:
        return
    why = f"{', '.join(missing)} missing: install Debian's chromium and chromium-driver (.ci/run does)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    # an explicit driver path: Selenium Manager never looks for (or downloads) one
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def test_open_the_link_click_approve_and_the_handle_finishes(browser: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    with ScriptedModelServer() as model:
        proc = linked_daemon(tmp_path / "data").start()
        channel, stub = open_stub(proc.target)
        try:
            parked = park(stub, model)
            browser.get(parked.pending.answer_url)
            assert browser.find_element(By.ID, "prompt").text == parked.pending.prompt
            browser.find_element(By.ID, "reason").send_keys("looks right")
            browser.find_element(By.ID, "approve").click()
            # the click submits a form: wait for the answered page rather than racing its navigation
            state = WebDriverWait(browser, 15).until(
                expected_conditions.presence_of_element_located((By.ID, "state")))
            assert state.get_attribute("data-state") == "answered", browser.page_source
            assert "close this page" in browser.find_element(By.ID, "message").text
            wait = pb.WaitRequest(runtime_id=parked.runtime, handle=parked.handle, timeout_ms=10_000)
            done = stub.Wait(wait, timeout=15)
            assert (done.status, done.text) == ("done", "action performed")
            browser.get(parked.pending.answer_url)  # the used link says so
            assert browser.find_element(By.ID, "state").get_attribute("data-state") == "answered"
            assert "already answered (approved)" in browser.find_element(By.ID, "message").text
        finally:
            channel.close()
            proc.stop()

