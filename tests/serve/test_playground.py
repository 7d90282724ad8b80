"""The playground in headless Chromium (selenium + chromedriver): two memories side by side."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ..chromium import CHROMIUM, DRIVER, chromium_driver

LEAD_COPY = Path("/work/serve-screenshot.png")  # one copy for a person to look at

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no chromium/chromedriver: apt-get install -y chromium chromium-driver",
)

MESSAGES = [
    "Hi, I'm Noor and I grew up in Tangier.",
    "My brother Idris is a pilot.",
    "I'm allergic to peanuts.",
    "We adopted a parrot named Kiwi.",
    "Tomorrow I fly to Oslo.",
]


@pytest.fixture
def browser():
    pytest.importorskip("selenium.webdriver")
    with chromium_driver() as driver:
        yield driver


def test_two_memories_side_by_side_five_turns(serve, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60)
    with serve(["buffer", "window:k=1"]) as url:
        browser.get(url + "/")
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
        user = browser.find_element(By.ID, "user")
        user.clear()
        user.send_keys("noor")
        left, right = (browser.find_element(By.ID, f"panel-{i}") for i in (0, 1))
        assert left.find_element(By.CLASS_NAME, "label").text == "buffer"
        assert right.find_element(By.CLASS_NAME, "label").text == "window:k=1"
        for n, message in enumerate(MESSAGES, 1):
            box = browser.find_element(By.ID, "message")
            box.send_keys(message)
            browser.find_element(By.ID, "send").click()
            wait.until(lambda d, n=n: right.get_attribute("data-turns") == str(n))
        status = browser.find_element(By.ID, "status")
        assert "error" not in (status.get_attribute("class") or ""), status.text

        def context(panel) -> str:
            return panel.find_element(By.CSS_SELECTOR, "pre.context").text

        # the buffer shows every message; the window only the last exchange
        assert all(m in context(left) for m in MESSAGES)
        assert MESSAGES[-1] in context(right)
        assert not [m for m in MESSAGES[:-1] if m in context(right)]
        assert context(left) != context(right)
        # a token row per turn in each panel, the buffer's context growing, the window's not
        rows = {
            name: [
                [int(c.text) for c in r.find_elements(By.TAG_NAME, "td")]
                for r in panel.find_elements(By.CSS_SELECTOR, "table.tokens tbody tr")
            ]
            for name, panel in (("left", left), ("right", right))
        }
        assert [r[0] for r in rows["left"]] == [1, 2, 3, 4, 5] == [r[0] for r in rows["right"]]
        left_context = [r[1] for r in rows["left"]]
        assert left_context == sorted(left_context) and left_context[-1] > rows["right"][-1][1]
        assert "Tangier" in left.find_element(By.CLASS_NAME, "log").text
        # the offline reader acknowledges a statement (it only quotes memory), and the page
        # says which model answers
        assert "I don't know." not in left.find_element(By.CLASS_NAME, "log").text
        assert "Noted." in left.find_element(By.CLASS_NAME, "log").text
        assert browser.find_element(By.ID, "model").text.startswith("answering model: offline")
        shot = tmp_path / "playground.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        try:
            shutil.copyfile(shot, LEAD_COPY)
        except OSError:
            pass  # not this machine's layout: the tmp copy is the test's
