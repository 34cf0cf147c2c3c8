"""The answer page in a real headless browser (docs/protocol.md §10): Debian's chromium, driven by
Selenium through chromedriver, opens the link, clicks Approve, and the suspended handle finishes.

The ``browser`` fixture (tests/support/browser.py) lends the session's chromium; ``.ci/run`` installs
chromium and chromium-driver when they are missing; outside CI the test skips, saying so, on a
machine without them, and in CI (``CI=true``) it fails instead, so a CI run can never pass without
having run it.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.answer_links import linked_daemon, park
from tests.support.grpc_client import open_stub
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer


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

