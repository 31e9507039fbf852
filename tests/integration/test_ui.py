"""`ckptlog ui` over a real processor: the runs page, a run's page and the JSON list what
`ckptlog fold` of the same input keeps and evicts; a new report shows on /events."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import aiohttp

from ckptlog.processor.ui.pages import run_url
from tests import factories as f
from tests.integration.ui_console import HOSTILE, console


def chart_marks(html: str, mark: str) -> set[str]:
    found = re.finditer(r'class="mark ([^"]*)" data-path="([^"]*)"', html)
    return {m.group(2).replace("&amp;", "&") for m in found if mark in m.group(1).split()}


async def test_pages_and_api_list_what_the_fold_keeps(topic_factory: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    async with console(topic_factory, kafka_bootstrap, tmp_path) as shown, aiohttp.ClientSession() as http:
        folded = shown.folded()
        async with http.get(shown.url + "/api/runs") as answer:
            listed = (await answer.json())["runs"]
        assert listed == {run: {k: v for k, v in view.items() if k != "evicted"} for run, view in folded.items()}
        async with http.get(shown.url + "/") as answer:
            page = await answer.text()
        assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        for run, view in folded.items():
            assert f'data-run="{run}"' in page or run == HOSTILE
            async with http.get(shown.url + run_url(run)) as answer:
                html = await answer.text()
            kept = {c["path"] for c in view["checkpoints"]}
            assert chart_marks(html, "kept") == kept, run
            assert chart_marks(html, "evicted") == set(view["evicted"]), run
            assert chart_marks(html, "best") == {view["best"]}
            table = html.split('class="kept"')[1].split("</table>")[0]
            order = [c["path"] for c in reversed(view["checkpoints"])]
            assert sorted(order, key=table.index) == order  # rank order, best first
        evicted = folded["run-0"]["evicted"][0]
        async with http.get(shown.url + run_url("run-0")) as answer:
            assert "reason=" in await answer.text()  # the history names each eviction's reason
        async with http.get(f"{shown.url}/runs/run-0/checkpoints/{evicted.replace('/', '%2F')}") as answer:
            state = re.search(r"state: <b>(\w+)</b>", await answer.text())
        assert state is not None and state.group(1) in {"evicted", "deleted"}


async def test_a_committed_report_is_announced_within_a_second(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    async with (
        console(topic_factory, kafka_bootstrap, tmp_path, reports=6) as shown,
        aiohttp.ClientSession() as http,
        http.get(shown.url + "/events") as events,
    ):
        await events.content.readline()
        await asyncio.sleep(0.3)
        path = (shown.root / "run-1" / "late").as_uri()
        sent = time.monotonic()
        await shown.send([f.report("run-1", {"acc": 2.0}, path)])
        shown_at = None
        while shown_at is None:  # run-1 may be announced first for an earlier change (a deletion settled)
            line = await asyncio.wait_for(events.content.readline(), 10)
            if line.startswith(b"data:") and "run-1" in json.loads(line[5:])["runs"]:
                async with http.get(shown.url + "/") as answer:
                    if path in await answer.text():  # run-1's best now
                        shown_at = time.monotonic()
        assert shown_at - sent < 5.0  # console polls 0.1 s; the rest: the processor
