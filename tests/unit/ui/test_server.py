"""The console's HTTP rules without a broker: read-only, tokens, headers, JSON shape, SSE."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from ckptlog.errors import ConfigError
from ckptlog.processor.ui.server import check_exposure, running
from tests.unit.ui.fake import FakeSource, log_of, view

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, FakeSource]]:
    source = FakeSource({"r": view([("file:///r/c1", 0.9)]), HOSTILE: view([])}, {"r": log_of([0.2, 0.9], {1})})
    async with running(source, token="s3cret") as url:
        yield url, source


async def test_every_request_needs_the_token_and_a_query_token_sets_a_cookie(served: tuple[str, FakeSource]) -> None:
    url, _ = served
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:  # unsafe: an IP's cookies
        for path in ("/", "/api/runs", "/runs/r", "/events", "/static/ui.css", "/nothing"):
            async with http.get(url + path) as answer:
                assert answer.status == 401, path
                assert answer.headers["X-Content-Type-Options"] == "nosniff"
        async with http.get(url + "/", headers={"Authorization": "Bearer wrong"}) as answer:
            assert answer.status == 401
        async with http.get(url + "/", headers={"Authorization": "Bearer s3cret"}) as answer:
            assert answer.status == 200
        async with http.get(url + "/?token=s3cret") as answer:
            assert answer.status == 200 and "ckptlog_ui_token" in answer.cookies
        async with http.get(url + "/runs/r") as answer:  # the cookie now
            assert answer.status == 200 and "file:///r/c1" in await answer.text()


async def test_only_get_and_head(served: tuple[str, FakeSource]) -> None:
    url, _ = served
    auth = {"Authorization": "Bearer s3cret"}
    async with aiohttp.ClientSession(headers=auth) as http:
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            async with http.request(method, url + "/") as answer:
                assert answer.status == 405 and answer.headers["Allow"] == "GET, HEAD"
        async with http.head(url + "/") as answer:
            assert answer.status == 200


async def test_pages_have_security_headers_and_escape_and_json_is_the_view(served: tuple[str, FakeSource]) -> None:
    url, source = served
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer s3cret"}) as http:
        async with http.get(url + "/") as answer:
            text = await answer.text()
            assert answer.headers["Content-Security-Policy"].startswith("default-src 'self'")
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and HOSTILE not in text
        async with http.get(url + "/runs/%3Cscript%3Ealert%281%29%3C%2Fscript%3E") as answer:
            assert answer.status == 200 and HOSTILE not in await answer.text()
        async with http.get(url + "/api/runs") as answer:
            assert await answer.json() == {"runs": source.views()}
        async with http.get(url + "/api/runs/r") as answer:
            assert await answer.json() == source.views()["r"]
        async with http.get(url + "/api/runs/nope") as answer:
            assert answer.status == 404
        async with http.get(url + "/runs/r/checkpoints/file%3A%2F%2F%2Fr%2Fc0") as answer:
            assert "EVICTED" in await answer.text()


async def test_events_stream_names_the_changed_runs(served: tuple[str, FakeSource]) -> None:
    url, source = served
    auth = {"Authorization": "Bearer s3cret"}
    async with aiohttp.ClientSession(headers=auth) as http, http.get(url + "/events") as answer:
        assert answer.headers["Content-Type"] == "text/event-stream"
        assert await answer.content.readline() == b": live\n"
        await answer.content.readline()
        await asyncio.sleep(0.05)  # subscribed
        source.changed.put_nowait(["r"])
        line = await asyncio.wait_for(answer.content.readline(), 5)
        assert json.loads(line.removeprefix(b"data: ")) == {"runs": ["r"]}


def test_a_host_beyond_loopback_needs_a_token() -> None:
    check_exposure("127.0.0.1", None)
    check_exposure("::1", None)
    check_exposure("localhost", None)
    check_exposure("0.0.0.0", "t")
    with pytest.raises(ConfigError, match="give a token"):
        check_exposure("0.0.0.0", None)


FOREIGN_HOSTS = [
    "evil.example",
    "evil.example:8000",
    "127.0.0.1.evil.example",  # a loopback name as a prefix of another
    "localhost.evil.example:8000",
    "10.0.0.1",
    "[::2]:8000",
    "[::1",  # malformed
    "localhost:80x",
    "::1",  # an IPv6 literal without its brackets
    "",
]
LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:{port}", "localhost", "LocalHost:{port}", "[::1]", "[::1]:{port}"]


async def test_without_a_token_only_a_loopback_host_is_answered() -> None:
    """Issue 42 item 3: a page the user visits can rebind its own name to 127.0.0.1 (DNS rebinding);
    its requests then reach the loopback console with `Host: its-name`. Without a token the console
    answers only loopback names (any port, IPv6 included), with 421 and a body saying what to do."""
    source = FakeSource({"r": view([("file:///r/c1", 0.9)])}, {"r": log_of([0.2, 0.9], {1})})
    async with running(source) as url, aiohttp.ClientSession() as http:
        port = url.rsplit(":", 1)[1]
        for host in FOREIGN_HOSTS:
            for path in ("/", "/api/runs", "/runs/r", "/events", "/static/live.js"):
                async with http.get(url + path, headers={"Host": host}) as answer:
                    body = await answer.text()
                    assert answer.status == 421, (host, path, answer.status)
                    assert "file:///r/c1" not in body and "only requests for 127.0.0.1, localhost or [::1]" in body
                    assert "--token" in body and answer.headers["X-Content-Type-Options"] == "nosniff"
        for host in LOOPBACK_HOSTS:
            async with http.get(url + "/api/runs", headers={"Host": host.format(port=port)}) as answer:
                assert answer.status == 200, host
                assert "file:///r/c1" in await answer.text()


async def test_with_a_token_any_host_presenting_it_is_answered(served: tuple[str, FakeSource]) -> None:
    """A token is what guards a console served beyond loopback (behind a proxy, by its own name)."""
    url, _ = served
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/", headers={"Host": "ckptlog.example", "Authorization": "Bearer s3cret"}) as answer:
            assert answer.status == 200
        async with http.get(url + "/", headers={"Host": "ckptlog.example"}) as answer:
            assert answer.status == 401
