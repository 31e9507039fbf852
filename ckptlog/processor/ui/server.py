"""The console's HTTP server (aiohttp): read-only pages and JSON over a `Source`, live via SSE.

Safe by default: GET and HEAD only (405 otherwise); with a token every request needs it (an
`Authorization: Bearer` header, the cookie, or `?token=`, which sets the cookie), else 401;
without one (loopback only) every request must name a loopback host (`Host: 127.0.0.1:8000`,
`localhost`, `[::1]`), else 421: a page whose name is rebound to 127.0.0.1 (DNS rebinding) sends
its own name and reads nothing; security headers on every answer; no page shows a setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import unquote

from aiohttp import web
from aiohttp.typedefs import Middleware

from ckptlog.errors import ConfigError
from ckptlog.processor.ui import pages
from ckptlog.processor.ui.model import (
    Query,
    RunLog,
    default_metric,
    metrics_of,
    points,
    root_of,
    row_of,
    select,
    trend_of,
)
from ckptlog.processor.ui.source import Source
from ckptlog.processor.ui.static import CSS, JS

COOKIE = "ckptlog_ui_token"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
SOURCE = web.AppKey("source", Source)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
KEEPALIVE_S = 15.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str | None:
    """The name in a `Host` header (`[::1]:8000` -> `::1`, `LocalHost` -> `localhost`); None when
    it is not a name with an optional numeric port."""
    header = header.strip().lower()
    if header.startswith("["):  # an IPv6 literal: [::1] or [::1]:port
        name, bracket, rest = header[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None if rest else ""
        return name if bracket and port is not None and (port == "" or port.isdigit()) else None
    name, colon, port = header.partition(":")
    return name if name and (not colon or (port.isascii() and port.isdigit())) else None


def loopback_host(header: str | None) -> bool:
    """A `Host` header naming this machine by a loopback name (`localhost`, `127.0.0.1`, `[::1]`,
    any port): a page on another site, its name rebound to 127.0.0.1, still sends its own."""
    name = host_name(header) if header is not None else None
    return name is not None and is_loopback(name)


def _misdirected(header: str | None) -> web.Response:
    shown = "no Host header" if header is None else f"Host {header[:100]!r}"
    return web.Response(
        status=421,
        text=(
            f"421: this console has no token, so it answers only requests for 127.0.0.1, localhost or [::1] "
            f"(any port); this one came with {shown} (a page that rebound its name to this machine?). "
            "Open it as http://127.0.0.1:<port>/, or serve it with a token (--token or CKPTLOG_UI_TOKEN) "
            "to allow other names.\n"
        ),
    )


def check_exposure(host: str, token: str | None) -> None:
    """A host other than loopback needs a token (ConfigError saying how to give one)."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"--host {host} serves the console beyond this machine: give a token (--token or CKPTLOG_UI_TOKEN) "
            "so every request has to present it, or serve on 127.0.0.1"
        )


class Hub:
    """Fans the source's changes out to every /events subscriber."""

    def __init__(self) -> None:
        self.queues: set[asyncio.Queue[list[str]]] = set()

    async def pump(self, source: Source) -> None:
        async for runs in source.changes():
            for queue in self.queues:
                queue.put_nowait(runs)


HUB = web.AppKey("hub", Hub)


def _given_token(request: web.Request) -> tuple[str, bool]:
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header[7:].strip(), False
    if "token" in request.query:
        return request.query["token"], True
    return request.cookies.get(COOKIE, ""), False


def middlewares(token: str | None) -> list[Middleware]:
    @web.middleware
    async def secure(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = web.Response(status=exc.status, text=f"{exc.status} {exc.reason}")
        if not response.prepared:
            response.headers.update(SECURITY_HEADERS)
        return response

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="405: this console is read-only", headers={"Allow": "GET, HEAD"})
        if token is None:
            host = request.headers.get("Host")
            return await handler(request) if loopback_host(host) else _misdirected(host)
        given, from_query = _given_token(request)
        if not given or not hmac.compare_digest(given.encode(), token.encode()):
            return web.Response(status=401, text="401: a token is required", headers={"WWW-Authenticate": "Bearer"})
        response = await handler(request)
        if from_query and not response.prepared:
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        return response

    return [secure, guard]


def _segments(request: web.Request, prefix: str) -> list[str]:
    """The raw path after `prefix`, split on `/` and each part url-decoded (a run id may hold `/`)."""
    raw = request.raw_path.split("?", 1)[0][len(prefix) :]
    return [unquote(part) for part in raw.split("/")]


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def _json(value: object, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(value), status=status, content_type="application/json")


async def runs_page(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    await source.refresh()
    query = Query.parse(request.query)
    views = source.views()
    rows = [row_of(run, view, source.log(run), source.rejections(run)) for run, view in views.items()]
    shown, total = select(rows, query)
    trends = {row.run: trend_of(views[row.run], source.log(row.run)) for row in shown}  # this page's rows only
    return _html(pages.runs_page(shown, total, query, trends))


async def api_runs(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    await source.refresh()
    return _json({"runs": source.views()})


async def api_run(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    await source.refresh()
    parts = _segments(request, "/api/runs/")
    view = source.views().get(parts[0]) if len(parts) == 1 else None
    return _json(view) if view is not None else _json({"error": "no such run"}, 404)


async def run_pages(request: web.Request) -> web.Response:
    parts = _segments(request, "/runs/")
    source = request.app[SOURCE]
    await source.refresh()
    view = source.views().get(parts[0])
    if view is None:
        return _html(pages.message_page("no such run", f"no VIEW of run {parts[0]!r} on the state topic"), 404)
    if len(parts) == 3 and parts[1] == "checkpoints":
        doc, text = await source.explain(parts[0], parts[2])
        return _html(pages.checkpoint_page(parts[0], parts[2], doc, text))
    if len(parts) != 1:
        return _html(pages.message_page("not found", "no such page"), 404)
    log = source.log(parts[0]) or RunLog()
    metrics = metrics_of(view, log)
    metric = request.query.get("metric") or default_metric(view, metrics)
    steps = await source.history(parts[0])
    found = points(view, log, metric)
    shown = (_number(request.query.get("kept")), _number(request.query.get("history")))
    return _html(pages.run_page(parts[0], view, found, metrics, metric, steps, shown, root_of(view, log)))


def _number(text: str | None) -> int:
    """A page number from the query (1 for none or nonsense)."""
    return int(text) if text is not None and text.isascii() and text.isdigit() and int(text) > 0 else 1


async def events(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **SECURITY_HEADERS})
    await response.prepare(request)
    queue: asyncio.Queue[list[str]] = asyncio.Queue()
    hub = request.app[HUB]
    hub.queues.add(queue)
    try:
        await response.write(b": live\n\n")
        while True:
            try:
                runs = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            await response.write(f"data: {json.dumps({'runs': runs})}\n\n".encode())
    except ConnectionResetError:  # the browser left (aiohttp's ClientConnectionResetError is one): not an error
        pass
    finally:
        hub.queues.discard(queue)
    return response


def _static(body: str, kind: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=body, content_type=kind)

    return handler


def make_app(source: Source, token: str | None = None) -> web.Application:
    app = web.Application(middlewares=middlewares(token))
    app[SOURCE] = source
    app[HUB] = Hub()

    async def pump(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(app[HUB].pump(source))
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    app.cleanup_ctx.append(pump)
    app.router.add_get("/", runs_page)
    app.router.add_get("/api/runs", api_runs)
    app.router.add_get("/api/runs/{rest:.+}", api_run)
    app.router.add_get("/runs/{rest:.+}", run_pages)
    app.router.add_get("/events", events)
    app.router.add_get("/static/ui.css", _static(CSS, "text/css"))
    app.router.add_get("/static/live.js", _static(JS, "application/javascript"))
    return app


@contextlib.asynccontextmanager
async def running(
    source: Source, host: str = "127.0.0.1", port: int = 0, token: str | None = None
) -> AsyncIterator[str]:
    """Serve the console until the block ends; yields its base URL (port 0: a free one)."""
    check_exposure(host, token)
    runner = web.AppRunner(make_app(source, token), shutdown_timeout=0.5, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        bound = runner.addresses[0]
        yield f"http://{host if ':' not in host else f'[{host}]'}:{bound[1]}"
    finally:
        await runner.cleanup()
