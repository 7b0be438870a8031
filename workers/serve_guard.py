"""What keeps `sleuth serve` safe to expose: a bearer token, a Host allow-list, a body cap read
as the body arrives, JSON-only request bodies, and valid run ids (see docs/security-serve.md).

`ServeGuard.from_settings(bind_host)` reads the `SLEUTH_SERVE_*` settings and refuses to make a
guard without a token for an address other than loopback. `guard.install(api)` adds the
middleware: the Host check first (a request for another name never reaches anything else), then
CORS when origins are configured, then the token and the body cap.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import stat
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import FastAPI
from markupsafe import escape
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from sleuth.runtime.errors import SleuthError
from sleuth.runtime.settings import SleuthSettings, load_settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
"""Names `sleuth serve` always answers to."""
TOKEN_COOKIE = "sleuth_serve_token"
"""The cookie a browser keeps the token in after opening a page with `?token=…`."""
MIN_TOKEN_CHARS = 16
MAX_RUN_ID_CHARS = 200
RUN_ID_PATTERN = rf"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._:@=+\-]{{0,{MAX_RUN_ID_CHARS - 1}}}$"
"""A run (workflow) id `sleuth serve` accepts: letters, digits and `. _ : @ = + -`, starting
with a letter or digit, no `..`, at most 200 characters. Everything it starts and reads fits."""
_RUN_ID = re.compile(RUN_ID_PATTERN)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_MAKE_TOKEN = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


class ServeSettingsError(SleuthError, ValueError):
    """`sleuth serve`'s settings cannot make it safe (no token for a public address, a weak or
    unreadable token); the message says what to set."""


def is_loopback(host: str) -> bool:
    """Whether `host` (a bind address or a Host name) is this machine only."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_run_id(run_id: str) -> str:
    """`run_id` when it is one `sleuth serve` accepts (see `RUN_ID_PATTERN`), else ValueError."""
    if not _RUN_ID.match(run_id):
        raise ValueError(
            "a run id is 1 to 200 letters, digits and . _ : @ = + - (starting with a letter or "
            "digit, without '..', '/', spaces or control characters)"
        )
    return run_id


@dataclass(frozen=True)
class ServeGuard:
    """The checks every request to `sleuth serve` passes."""

    token: str | None
    """Required on every request when set (the bearer token or the page's cookie)."""
    allowed_hosts: frozenset[str] | None = field(default=frozenset(LOOPBACK_HOSTS))
    """The Host names answered (None: any)."""
    max_body_bytes: int = 1_048_576
    cors_origins: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, bind_host: str, settings: SleuthSettings | None = None) -> ServeGuard:
        """The guard for a server listening on `bind_host`, from the `SLEUTH_SERVE_*` settings."""
        settings = settings or load_settings()
        token = _configured_token(settings)
        if token is None and not is_loopback(bind_host):
            raise ServeSettingsError(
                f"sleuth serve would listen on {bind_host}, beyond this machine, without a token: "
                "anyone who reaches it could start runs, read them and answer reviews. Set "
                f"SLEUTH_SERVE_TOKEN (make one with: {_MAKE_TOKEN}) or SLEUTH_SERVE_TOKEN_FILE, "
                "or listen on 127.0.0.1"
            )
        hosts: frozenset[str] | None = None
        if "*" not in settings.serve_allowed_hosts:
            named = {host.strip("[]").lower() for host in settings.serve_allowed_hosts}
            bind = bind_host.strip("[]").lower()
            if bind not in ("0.0.0.0", "::", ""):
                named.add(bind)
            hosts = frozenset({*LOOPBACK_HOSTS, *named})
        return cls(
            token=token,
            allowed_hosts=hosts,
            max_body_bytes=settings.serve_max_body_bytes,
            cors_origins=tuple(settings.serve_cors_origins),
        )

    def install(self, api: FastAPI) -> None:
        """Add the guard's middleware to `api` (the last added runs first)."""
        api.add_middleware(_TokenAndBody, guard=self)
        if self.cors_origins:
            api.add_middleware(
                CORSMiddleware,
                allow_origins=list(self.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
            )
        api.add_middleware(_HostCheck, guard=self)

    def host_allowed(self, host_header: str) -> bool:
        if self.allowed_hosts is None:
            return True
        return _host_name(host_header) in self.allowed_hosts

    def token_matches(self, offered: str | None) -> bool:
        if self.token is None:
            return True
        return offered is not None and hmac.compare_digest(
            offered.encode("utf-8", "surrogateescape"), self.token.encode()
        )


def _configured_token(settings: SleuthSettings) -> str | None:
    token: str | None = None
    where = "SLEUTH_SERVE_TOKEN"
    if settings.serve_token is not None:
        token = settings.serve_token.get_secret_value().strip()
    elif settings.serve_token_file is not None:
        path = settings.serve_token_file.expanduser()
        where = f"SLEUTH_SERVE_TOKEN_FILE={path}"
        token = _token_from_file(path)
    if token is not None and (len(token) < MIN_TOKEN_CHARS or not token.isprintable()):
        raise ServeSettingsError(
            f"{where}: a token is at least {MIN_TOKEN_CHARS} printable characters; make one "
            f"with: {_MAKE_TOKEN}"
        )
    return token


def _token_from_file(path: Path) -> str:
    try:
        mode = path.stat().st_mode
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ServeSettingsError(
            f"SLEUTH_SERVE_TOKEN_FILE={path}: cannot read it ({exc.strerror})"
        ) from None
    if mode & 0o077:
        raise ServeSettingsError(
            f"SLEUTH_SERVE_TOKEN_FILE={path} is readable by others (mode "
            f"{stat.filemode(mode)}); run `chmod 600 {path}`"
        )
    return lines[0].strip() if lines else ""


def _host_name(host_header: str) -> str:
    """The name of a Host header: `[::1]:8000` → `::1`, `Example.com:80` → `example.com`."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _headers(scope: Scope) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, value in scope.get("headers", []):
        found.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return found


def _refusal(scope: Scope, status: int, detail: str, **headers: str) -> Response:
    """A JSON refusal, or a short page for a browser asking for one."""
    accept = ",".join(_headers(scope).get("accept", []))
    if "text/html" in accept:
        page = (
            "<!DOCTYPE html><meta charset=utf-8><title>sleuth serve</title>"
            f"<body style='font-family:system-ui;margin:2rem'><h1>{status}</h1>"
            f"<p>{escape(detail)}</p>"
        )
        return HTMLResponse(page, status_code=status, headers=headers)
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


class _HostCheck:
    """Refuse a request whose Host is not allowed, before anything else sees it."""

    def __init__(self, app: ASGIApp, guard: ServeGuard):
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = (_headers(scope).get("host") or [""])[0]
            if not self.guard.host_allowed(host):
                detail = (
                    f"this server does not answer to the host {_host_name(host)!r}; if that is "
                    "its name, add it to SLEUTH_SERVE_ALLOWED_HOSTS"
                )
                await _refusal(scope, 400, detail)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _TokenAndBody:
    """The token (bearer header, or the cookie a `?token=` page visit sets), then JSON-only
    bodies, then the body cap: a declared length over it is refused unread, and a body sent in
    chunks is refused as soon as it passes the cap, so no more than the cap is ever held."""

    def __init__(self, app: ASGIApp, guard: ServeGuard):
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refused = self._token_refusal(scope, headers)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if self.guard.token is not None and scope["method"] == "GET":
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            if "token" in query:
                await self._remember_token(scope, query)(scope, receive, send)
                return
        refused = self._body_refusal(scope, headers)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if "content-length" not in headers and "transfer-encoding" not in headers:
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.guard.max_body_bytes:
                await self._too_large()(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)

    def _token_refusal(self, scope: Scope, headers: dict[str, list[str]]) -> Response | None:
        if self.guard.token is None:
            return None
        offered = None
        authorization = (headers.get("authorization") or [""])[0]
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() == "bearer":
            offered = credentials.strip()
        elif scope["method"] in ("GET", "HEAD"):
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            offered = query.get("token") or _cookie(headers, TOKEN_COOKIE)
        else:
            offered = _cookie(headers, TOKEN_COOKIE)
        if self.guard.token_matches(offered):
            return None
        detail = (
            "this sleuth serve needs its token: send `Authorization: Bearer <token>` (the value "
            "of SLEUTH_SERVE_TOKEN), or open a page once with ?token=<token>"
            if offered is None
            else "wrong token: use the value of SLEUTH_SERVE_TOKEN (or SLEUTH_SERVE_TOKEN_FILE)"
        )
        return _refusal(scope, 401, detail, **{"www-authenticate": 'Bearer realm="sleuth"'})

    def _remember_token(self, scope: Scope, query: dict[str, str]) -> Response:
        """Keep the token in a same-site cookie and send the browser to the page without it, so
        the token stays out of the address bar, history and any link copied from there."""
        rest = {key: value for key, value in query.items() if key != "token"}
        location = scope.get("root_path", "") + scope["path"]
        if rest:
            location += "?" + urlencode(rest)
        response = RedirectResponse(location, status_code=303)
        response.set_cookie(
            TOKEN_COOKIE,
            self.guard.token or "",
            httponly=True,
            samesite="strict",
            secure=scope.get("scheme") == "https",
            path="/",
        )
        return response

    def _body_refusal(self, scope: Scope, headers: dict[str, list[str]]) -> Response | None:
        lengths = headers.get("content-length", [])
        if lengths:
            if len(set(lengths)) != 1 or not lengths[0].strip().isdigit():
                return _refusal(
                    scope, 400, "Content-Length must be one non-negative whole number of bytes"
                )
            if int(lengths[0]) > self.guard.max_body_bytes:
                return self._too_large()
        has_body = bool(lengths and int(lengths[0]) > 0) or "transfer-encoding" in headers
        if scope["method"] in _BODY_METHODS and has_body:
            content_type = (headers.get("content-type") or [""])[0].split(";")[0].strip().lower()
            if content_type != "application/json":
                return _refusal(
                    scope, 415, "send the request body as JSON (Content-Type: application/json)"
                )
        return None

    def _too_large(self) -> Response:
        return JSONResponse(
            {
                "detail": f"the request body is larger than {self.guard.max_body_bytes} bytes "
                "(SLEUTH_SERVE_MAX_BODY_BYTES)"
            },
            status_code=413,
            headers={"connection": "close"},
        )


def _cookie(headers: dict[str, list[str]], name: str) -> str | None:
    for line in headers.get("cookie", []):
        for pair in line.split(";"):
            key, _, value = pair.strip().partition("=")
            if key == name:
                return value
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the buffered body once, then the connection's own messages (the
    disconnect an event stream waits for)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
