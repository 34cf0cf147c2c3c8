"""The inspector in a real headless browser (Debian's chromium through chromedriver, as the answer
page's test): log in with the token, open the runtime, find its pending request, approve it, and
watch the agent finish on the live timeline — with a model reply and a tool prompt that try to run
script, which must stay text; and the model's text streaming into the open page.

Outside CI the test skips on a machine without chromium; in CI (``CI=true``) it fails instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inspector.support import TOKEN, ask_agent, inspector_daemon, park, ui_base, wait_result
from tests.support.grpc_client import open_stub
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

PROMPT = 'ship it? <img src=x onerror="alert(1)">'
ROW_TEXTS = "return Array.from(document.querySelectorAll('#events tr.ev'), (row) => row.textContent)"
REPLY = "shipped <script>alert(2)</script><img src=y onerror=alert(3)>"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[object, str]]:
    proc = inspector_daemon(tmp_path).start()
    try:
        yield proc, ui_base(proc.target)
    finally:
        proc.stop()


def test_log_in_open_the_runtime_approve_and_watch_the_agent_finish(browser: object,
                                                                     daemon: tuple[object, str]) -> None:
    from selenium.common.exceptions import NoAlertPresentException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    proc, base = daemon
    with ScriptedModelServer() as model:
        channel, stub = open_stub(proc.target)  # type: ignore[attr-defined]
        try:
            parked = park(stub, model, ask_agent(model, prompt=PROMPT, output=REPLY))
            browser.get(base + "/")
            browser.find_element(By.ID, "token").send_keys(TOKEN)
            browser.find_element(By.ID, "login").click()
            link = WebDriverWait(browser, 15).until(
                ec.presence_of_element_located((By.LINK_TEXT, parked.runtime)))
            link.click()
            WebDriverWait(browser, 15).until(ec.text_to_be_present_in_element((By.ID, "stream-state"),
                                                                              "following live"))
            # an event made now reaches the open page over the live stream, not by a reload
            before = len(browser.find_elements(By.CSS_SELECTOR, "#events tr.ev"))
            browser.execute_script("document.body.dataset.loaded = 'first'")
            post = pb.PostRequest(runtime_id=parked.runtime, handle="root",
                                  item=pb.InboxItem(text="note <b>bold</b>"))
            stub.Post(post, metadata=[("authorization", f"Bearer {TOKEN}")], timeout=5)
            WebDriverWait(browser, 15).until(
                lambda b: len(b.find_elements(By.CSS_SELECTOR, '#events tr.ev[data-type="post"]')) == 1)
            assert len(browser.find_elements(By.CSS_SELECTOR, "#events tr.ev")) == before + 1
            assert browser.execute_script("return document.body.dataset.loaded") == "first"
            ask = browser.find_element(By.CSS_SELECTOR, f'section.ask[data-request="{parked.request}"]')
            assert ask.find_element(By.CSS_SELECTOR, "p.prompt").text == PROMPT  # shown as text
            ask.find_element(By.CSS_SELECTOR, "textarea[name=reason]").send_keys("go ahead")
            ask.find_element(By.CSS_SELECTOR, "button.approve").click()
            # the answer returns to the runtime page, whose live timeline shows the agent finishing
            # read the rows in one script: the page navigates after the click, and an element
            # found before that fails with a driver error rather than a stale-element one
            WebDriverWait(browser, 20, ignored_exceptions=(WebDriverException,)).until(
                lambda b: any(REPLY in text for text in b.execute_script(ROW_TEXTS)))
            rows = browser.find_elements(By.CSS_SELECTOR, "#events tr.ev")
            assert any(r.get_attribute("data-type") == "resumed" for r in rows)
            assert wait_result(stub, parked).text == REPLY
            # nothing the model or the tool said ran as script or became an element
            with pytest.raises(NoAlertPresentException):
                _ = browser.switch_to.alert.text
            assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script, main b")
            assert browser.execute_script("return window.__xss === undefined")
        finally:
            channel.close()


def test_the_model_text_streams_into_the_open_page_as_text(browser: object,
                                                           daemon: tuple[object, str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    proc, base = daemon
    with ScriptedModelServer() as model:
        channel, stub = open_stub(proc.target)  # type: ignore[attr-defined]
        try:
            parked = park(stub, model, ask_agent(model, prompt="go?", output=REPLY))
            browser.get(base + "/login")
            browser.find_element(By.ID, "token").send_keys(TOKEN)
            browser.find_element(By.ID, "login").click()
            WebDriverWait(browser, 15).until(ec.presence_of_element_located((By.ID, "runtimes")))
            browser.get(f"{base}/runtime?id={parked.runtime}")
            WebDriverWait(browser, 15).until(ec.text_to_be_present_in_element((By.ID, "stream-state"),
                                                                              "following live"))
            answer = pb.Answer(id=parked.request, ok=True)
            stub.Resume(pb.ResumeRequest(runtime_id=parked.runtime, answer=answer, no_wait=True),
                        metadata=[("authorization", f"Bearer {TOKEN}")], timeout=5)
            text = WebDriverWait(browser, 20).until(
                ec.presence_of_element_located((By.CSS_SELECTOR, "#live-text pre.text")))
            WebDriverWait(browser, 20).until(lambda b: REPLY in text.get_attribute("textContent"))
            assert text.get_attribute("data-handle") == parked.handle
            assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script")
        finally:
            channel.close()
