"""The web console in a real browser (the system's chromium via Playwright; never `playwright
install`): 401 without the token, the runs page, a run's chart marks against `ckptlog fold`, a
report showing up live, a `<script>` run id shown as text. A missing chromium fails the test."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from playwright.async_api import Page, async_playwright

from processor.ui.pages import run_url
from tests import factories as f
from tests.integration.ui_console import HOSTILE, TOKEN, console

CHROMIUM = "/usr/bin/chromium"


async def marks(page: Page, mark: str) -> set[str]:
    found = await page.eval_on_selector_all(f"svg.chart .mark.{mark}", "els => els.map(e => e.dataset.path)")
    return set(found)


async def test_console_in_a_browser(topic_factory: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)"
    async with console(topic_factory, kafka_bootstrap, tmp_path, token=TOKEN) as shown, async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = await browser.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: dialogs.append(d.message))
            answer = await page.goto(shown.url + "/")
            assert answer is not None and answer.status == 401
            answer = await page.goto(shown.url + f"/?token={TOKEN}")
            assert answer is not None and answer.status == 200
            folded = shown.folded()
            assert set(await page.eval_on_selector_all("tr[data-run]", "r => r.map(e => e.dataset.run)")) == set(folded)
            assert HOSTILE in await page.inner_text("table.runs")  # as text, not run
            await page.click("a[href='/runs/run-0']")
            await page.wait_for_selector("svg.chart")
            view = folded["run-0"]
            assert await marks(page, "kept") == {c["path"] for c in view["checkpoints"]}
            assert await marks(page, "evicted") == set(view["evicted"])
            await page.goto(shown.url + run_url(HOSTILE))
            assert HOSTILE in await page.inner_text("h1")
            await page.goto(shown.url + "/")
            await page.wait_for_selector("body[data-live='1']")
            path = (shown.root / "run-1" / "late").as_uri()
            await shown.send([f.report("run-1", {"acc": 5.0}, path)])
            await page.wait_for_selector(f"td.path:text-is('{path}')", timeout=10_000)
            assert dialogs == []
        finally:
            await browser.close()
