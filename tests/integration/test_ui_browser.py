"""The web console in a real browser (the system's chromium via Playwright; never `playwright
install`): 401 without the token, the runs page, a run's chart marks against `ckptlog fold`, a
report showing up live, a `<script>` run id shown as text; a run ranked by a nested metric and a
chart read at a glance (issue 38 items 1 and 2). A missing chromium fails the test."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Page, async_playwright

from ckptlog.events.metrics import lookup
from ckptlog.processor.ui.pages import run_url
from tests import factories as f
from tests.integration.ui_console import HOSTILE, NESTED, NESTED_SCORES, TOKEN, Console, console

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
            await page.wait_for_selector(f"td.path [title='{path}']", timeout=10_000)
            assert dialogs == []
        finally:
            await browser.close()


async def cells(page: Page, selector: str) -> list[str]:
    found: list[str] = await page.eval_on_selector_all(selector, "els => els.map(e => e.textContent.trim())")
    return found


async def runs_page_fits_with_a_sparkline_per_run(page: Page, shown: Console) -> None:
    await page.goto(shown.url + "/")
    assert await page.evaluate("document.documentElement.scrollWidth") <= 1400  # no horizontal overflow
    lines = await page.eval_on_selector_all(
        "tr[data-run]", "rows => rows.map(r => r.querySelectorAll('td.trend svg.spark polyline').length)"
    )
    assert lines == [1] * len(shown.folded())
    assert await cells(page, f"tr[data-run='{NESTED}'] td:nth-child(4)") == [f"{max(NESTED_SCORES):.6g}"]


async def nested_run_reads_its_scores(page: Page, shown: Console) -> None:
    await page.goto(shown.url + run_url(NESTED))
    options = await page.eval_on_selector_all("select[name=metric] option", "os => os.map(o => o.value)")
    assert options[0] == "eval/acc" and "eval/loss" in options and "eval" not in options
    ys = await page.eval_on_selector_all("svg.chart circle.mark", "els => els.map(e => +e.getAttribute('cy'))")
    assert len(ys) == len(NESTED_SCORES) and len(set(ys)) == len(NESTED_SCORES)  # not a flat line
    kept = [lookup(c["metrics"], "eval/acc") for c in reversed(shown.folded()[NESTED]["checkpoints"])]
    assert await cells(page, "table.kept tbody td:nth-child(5)") == [f"{v:.6g}" for v in kept]


async def chart_has_ticks_hover_and_an_honest_legend(page: Page, shown: Console) -> None:
    y = [float(v) for v in await cells(page, "svg.chart text.tick.y")]
    lo, hi = min(NESTED_SCORES), max(NESTED_SCORES)
    assert 3 <= len(y) <= 12 and y == sorted(y) and y[0] <= lo and y[-1] >= hi and y[-1] - y[0] < 3 * (hi - lo)
    x = [int(v) for v in await cells(page, "svg.chart text.tick.x")]
    assert x == sorted(x) and x[0] <= 0 and x[-1] >= len(NESTED_SCORES) - 1 and len(x) >= 3
    box = await page.locator("svg.chart text.tick.y").first.bounding_box()
    assert box is not None and box["width"] > 0  # drawn, not just present
    assert await page.locator("svg.chart polyline.line").count() == 1
    best = shown.folded()[NESTED]["best"]
    await page.locator("svg.chart .mark.best").hover()
    tip = page.locator(".plot .tip")
    await tip.wait_for(state="visible")
    text = await tip.inner_text()
    index = NESTED_SCORES.index(max(NESTED_SCORES))
    assert f"report {index}" in text and f"eval/acc: {max(NESTED_SCORES):.6g}" in text
    assert best in text and "best" in text
    keys = await page.eval_on_selector_all(".legend .key", "ks => ks.map(k => k.classList[1])")
    marks = {"no-value": "rect.mark", "reported": ".mark.reported"}
    for key in keys:
        assert await page.locator(f"svg.chart {marks.get(key, '.mark.' + key)}").count() > 0, key
    assert "preserved" not in keys and "pending" not in keys and "kept" in keys


async def test_a_nested_metric_and_a_chart_read_at_a_glance(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)"
    async with console(topic_factory, kafka_bootstrap, tmp_path) as shown, async_playwright() as pw:
        browser: Browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            await runs_page_fits_with_a_sparkline_per_run(page, shown)
            await nested_run_reads_its_scores(page, shown)
            await chart_has_ticks_hover_and_an_honest_legend(page, shown)
        finally:
            await browser.close()
