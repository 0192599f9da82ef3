"""Who may call the MCP server, and on which stores.

Tokens are configured by their sha256 hex digest, never in clear. Each maps to a name (what the logs
show), the stores it may read, and whether it may write there. Over HTTP a request without a token,
or with a token nobody configured, is answered 401 before it reaches the MCP layer; the only thing an
anonymous caller may do is check health (and the protocol handshake needed to get there). Over
stdio the caller is the local user who started the process and may do everything.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from memory_orchestrator.entrypoints.mcp.http_limits import read_body, replay
from memory_orchestrator.ports import AccessDenied

#: Tools that need write rights on the store they touch.
WRITE_TOOLS = frozenset({"memory_write", "memory_link", "memory_forget", "memory_session_summary"})
#: Tools an anonymous caller may use.
ANONYMOUS_TOOLS = frozenset({"memory_health"})
#: JSON-RPC methods an anonymous caller needs to reach the anonymous tools.
ANONYMOUS_METHODS = frozenset(
    {"initialize", "notifications/initialized", "ping", "server/discover", "tools/list"}
)
#: Key under which the authenticated caller is put into the ASGI scope's state.
CALLER_STATE_KEY = "memory_orchestrator_caller"
ALL_STORES = "*"
_MAX_AUTH_BODY = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Caller:
    """An identified caller: ``stores`` it may read (``*`` = all) and whether it may ``write``."""

    name: str
    stores: frozenset[str]
    write: bool
    anonymous: bool = False

    def may_read(self, store: str) -> bool:
        """True when the caller may read ``store``."""
        return ALL_STORES in self.stores or store in self.stores

    def check(self, tool: str, store: str) -> None:
        """Raise ``AccessDenied`` unless the caller may use ``tool`` on ``store``."""
        if self.anonymous and tool not in ANONYMOUS_TOOLS:
            raise AccessDenied(f"not authorised: {tool} needs a bearer token")
        if not self.may_read(store):
            raise AccessDenied(f"not authorised: token {self.name!r} has no access to store {store!r}")
        if tool in WRITE_TOOLS and not self.write:
            raise AccessDenied(f"not authorised: token {self.name!r} is read-only on store {store!r}")


#: The stdio caller: the local user who started the server.
LOCAL_CALLER = Caller(name="local", stores=frozenset({ALL_STORES}), write=True)


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """One configured token: its sha256 hex digest, a name for the logs, its stores and rights."""

    name: str
    sha256: str
    stores: tuple[str, ...] = (ALL_STORES,)
    write: bool = False

    def caller(self) -> Caller:
        """The caller this token identifies."""
        return Caller(name=self.name, stores=frozenset(self.stores), write=self.write)


def hash_token(token: str) -> str:
    """The sha256 hex digest under which ``token`` is configured."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenRegistry:
    """Looks up callers by bearer token (constant-time digest comparison)."""

    def __init__(self, grants: Iterable[TokenGrant]) -> None:
        self._grants = tuple(grants)

    def __bool__(self) -> bool:
        return bool(self._grants)

    def verify(self, token: str) -> Caller | None:
        """The caller holding ``token``, or ``None`` when no grant matches."""
        digest = hash_token(token)
        match = None
        for grant in self._grants:
            if hmac.compare_digest(grant.sha256, digest):
                match = grant
        return match.caller() if match else None


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (IPv4 and IPv6)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, registry: TokenRegistry) -> None:
    """Refuse to serve HTTP beyond loopback without tokens (fail closed)."""
    if not registry and not is_loopback(host):
        raise ValueError(
            f"refusing to listen on {host} without authentication: configure [auth] tokens "
            "(sha256 of each bearer token) or bind to 127.0.0.1"
        )


def caller_from_scope(scope: Mapping[str, Any] | None) -> Caller | None:
    """The caller the HTTP middleware put into the request scope, if any."""
    if not scope:
        return None
    state = scope.get("state") or {}
    caller = state.get(CALLER_STATE_KEY)
    return caller if isinstance(caller, Caller) else None


class BearerAuthMiddleware:
    """ASGI middleware in front of the MCP app: fail-closed bearer-token authentication.

    With no tokens configured (only allowed on loopback) every request passes as the local caller.
    Otherwise: a wrong token -> 401; no token -> 401 unless the JSON-RPC body only asks for the
    handshake or an anonymous tool, which then runs as an anonymous caller.
    """

    def __init__(self, app: ASGIApp, registry: TokenRegistry, *, open_paths: Iterable[str] = ()) -> None:
        self._app = app
        self._registry = registry
        self._open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate one HTTP request, then hand it on (or answer 401)."""
        if scope["type"] == "http" and str(scope.get("path", "")).startswith("/.well-known/"):
            # No OAuth here: a 404 (not a 401) tells MCP clients not to look for an authorisation
            # server, so they send the bearer token they were given instead.
            await _not_found(send)
            return
        if scope["type"] != "http" or scope.get("path") in self._open_paths:
            await self._app(scope, receive, send)
            return
        if not self._registry:
            await self._pass(scope, receive, send, LOCAL_CALLER)
            return
        token = _bearer_token(scope)
        if token is not None:
            caller = self._registry.verify(token)
            if caller is None:
                await _unauthorised(send, "invalid_token", "unknown bearer token")
                return
            await self._pass(scope, receive, send, caller)
            return
        body = await read_body(receive, _MAX_AUTH_BODY)
        if body is None or not _anonymous_allowed(body):
            await _unauthorised(send, "invalid_request", "a bearer token is required")
            return
        anonymous = Caller(name="anonymous", stores=frozenset(), write=False, anonymous=True)
        await self._pass(scope, replay(body, receive), send, anonymous)

    async def _pass(self, scope: Scope, receive: Receive, send: Send, caller: Caller) -> None:
        state = dict(scope.get("state") or {})
        state[CALLER_STATE_KEY] = caller
        await self._app({**scope, "state": state}, receive, send)


def _bearer_token(scope: Scope) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == b"authorization":
            text = value.decode("latin-1").strip()
            if text.lower().startswith("bearer "):
                return text[7:].strip() or None
            return ""
    return None


def _anonymous_allowed(body: bytes) -> bool:
    """True when every JSON-RPC message in ``body`` is a handshake or an anonymous tool call."""
    try:
        payload = json.loads(body or b"null")
    except (ValueError, RecursionError):
        # RecursionError: JSON nested deeper than the parser's stack; refused like any unreadable body
        return False
    messages = payload if isinstance(payload, list) else [payload]
    if not messages:
        return False
    for message in messages:
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method in ANONYMOUS_METHODS:
            continue
        params = message.get("params")
        if method == "tools/call" and isinstance(params, dict) and params.get("name") in ANONYMOUS_TOOLS:
            continue
        return False
    return True


async def _not_found(send: Send) -> None:
    body = b'{"error": "not_found"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 404, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _unauthorised(send: Send, error: str, description: str) -> None:
    body = json.dumps({"error": error, "error_description": description}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", f'Bearer error="{error}"'.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
