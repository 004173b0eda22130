"""kind: http — one HTTP request per call, templated from the arguments, with httpx.

Containment: ``spec.timeout`` seconds bound the whole call -- name resolution, connect, the status line and
headers, the body and every redirect hop -- as one deadline: the request runs on an event loop inside
``asyncio.timeout`` (a cancel scope), so a server that sends its headers one byte at a time is cut at the deadline
like one that sends nothing (per-read timeouts alone would let it go on forever). The body is streamed and reading stops at :func:`read_limit` bytes; redirects are followed
by hand, at most ``max_redirects``, and every hop's host is checked against ``allow_hosts`` and — unless
``allow_private`` — refused when it resolves (``getaddrinfo``) to a private, loopback, link-local or otherwise
non-global address. (The address is checked before connecting; a DNS answer that changes between the check and
the connection is not caught.) Environment proxies are not used (``trust_env=False``).

Templates: placeholders in the URL are percent-encoded (``quote(value, safe="")``); ``params``, ``headers`` and
``body`` get the value text; in ``json`` a string that is exactly ``"{name}"`` becomes the argument's JSON value
(number, list, ...), other strings are text templates. Secrets (``spec.secrets``) are redacted in everything
shown (``data["request"]``, error texts).
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

from thinkflow.config.spec import HttpRequestSpec, ToolSpec
from thinkflow.model import json_limits
from thinkflow.tools.base import ToolResult
from thinkflow.redaction import redact
from thinkflow.tools.jsonpath import JsonPathError, select
from thinkflow.tools.output import cap_text, decode, format_size, truncation_marker
from thinkflow.tools.templating import effective_arguments, render, whole_placeholder

_MISSING = object()
_DNS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="thinkflow-dns")
"""Name resolution for the address checks, outside the event loop's default executor (which the loop would wait
for when it closes, past the deadline)."""


class _Deadline(Exception):
    """The call's deadline passed."""


def run_coroutine(make: Any) -> Any:
    """Run the coroutine ``make()`` returns on a fresh event loop and return its result; from a thread that
    already runs a loop, on a helper thread. The loop is closed without waiting for executor threads."""

    def on_new_loop() -> Any:
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(make())
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return on_new_loop()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = on_new_loop()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=target, name="thinkflow-http", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def read_limit(spec: ToolSpec) -> int:
    """Bytes of a response body read at most: 1 MiB, or ``max_output`` when larger."""
    return max(spec.max_output, 1 << 20)


def _json_template(template: Any, values: dict[str, Any]) -> Any:
    if isinstance(template, str):
        name = whole_placeholder(template)
        if name is not None:
            return values.get(name, _MISSING) if values.get(name) is not None else _MISSING
        return render(template, values)
    if isinstance(template, dict):
        out = {}
        for key, item in template.items():
            rendered = _json_template(item, values)
            if rendered is not _MISSING:
                out[render(key, values)] = rendered
        return out
    if isinstance(template, list):
        return [v for v in (_json_template(t, values) for t in template) if v is not _MISSING]
    return template


def build_request(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """The concrete request: ``{"method", "url", "params", "headers", "json"?, "content"?}``.

    A param whose template is a single placeholder of an absent optional argument is left out.
    """
    req = spec.request or HttpRequestSpec()
    values = effective_arguments(arguments, spec.parameters)
    url = render(req.url, values, quote=lambda text: quote(text, safe=""))
    params = {}
    for key, template in req.params.items():
        name = whole_placeholder(template)
        if name is not None and values.get(name) is None:
            continue
        params[key] = render(template, values)
    headers = {key: render(template, values) for key, template in req.headers.items()}
    out: dict[str, Any] = {"method": req.method.upper(), "url": url, "params": params, "headers": headers}
    if req.json is not None:
        body = _json_template(req.json, values)
        out["json"] = None if body is _MISSING else body
    elif req.body is not None:
        out["content"] = render(req.body, values).encode("utf-8")
    return out


def host_allowed(host: str, port: int | None, allow_hosts: tuple[str, ...]) -> bool:
    """True when ``allow_hosts`` is empty or an entry matches: ``example.com``, ``*.example.com`` (fnmatch,
    case-insensitive) or ``host:port``."""
    if not allow_hosts:
        return True
    host = host.lower().rstrip(".")
    for entry in allow_hosts:
        entry = entry.lower().strip()
        if ":" in entry and not entry.startswith("["):
            h, _, p = entry.rpartition(":")
            if p.isdigit() and port is not None and int(p) == port and fnmatch.fnmatchcase(host, h):
                return True
            continue
        if fnmatch.fnmatchcase(host, entry):
            return True
    return False


def address_problem(host: str, port: int) -> str | None:
    """Why ``host`` may not be contacted (it resolves to a non-global address), or None when every address it
    resolves to is global. Raises OSError when it does not resolve."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        kind = None
        if address.is_loopback:
            kind = "a loopback"
        elif address.is_link_local:
            kind = "a link-local"
        elif address.is_private:
            kind = "a private"
        elif address.is_multicast or address.is_unspecified or address.is_reserved or not address.is_global:
            kind = "a non-public"
        if kind:
            return f"host {host!r} resolves to {kind} address {address} (set allow_private: true to allow it)"
    return None


class HttpTool:
    """An http tool. ``run`` returns data ``http_status``, ``duration_s``, ``bytes``, ``truncated``, ``request``
    (method, url, headers, redacted), ``url`` (final URL) and ``redirects``."""

    def __init__(self, spec: ToolSpec):
        self.spec = spec

    def parameters(self) -> dict[str, Any]:
        """The declared JSON Schema (an empty object schema when none)."""
        return self.spec.parameters or {"type": "object", "properties": {}}

    async def _check_url(self, url: Any) -> str | None:
        spec = self.spec
        if url.scheme not in ("http", "https"):
            return f"refused: scheme {url.scheme!r} is not http or https"
        host = url.host
        if not host:
            return "refused: the URL has no host"
        port = url.port or (443 if url.scheme == "https" else 80)
        if not host_allowed(host, url.port, spec.allow_hosts):
            return f"refused: host {host!r} is not in allow_hosts ({', '.join(spec.allow_hosts)})"
        if not spec.allow_private:
            try:
                problem = await asyncio.get_running_loop().run_in_executor(_DNS, address_problem, host, port)
            except OSError as exc:
                return f"cannot resolve host {host!r}: {exc}"
            if problem:
                return "refused: " + problem
        return None

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Send the request (following redirects by hand) and turn the reply into an observation."""
        import httpx  # light, but only http tools need it

        spec = self.spec
        secrets = spec.secrets
        started = time.monotonic()
        deadline = started + spec.timeout
        data: dict[str, Any] = {"http_status": None, "bytes": 0, "truncated": False, "redirects": 0}

        def finish(status: str, text: str) -> ToolResult:
            data["duration_s"] = round(time.monotonic() - started, 3)
            shown, total, cut = cap_text(redact(text, secrets), spec.max_output)
            data["truncated"] = bool(data["truncated"]) or cut
            if not data["bytes"]:
                data["bytes"] = total
            return ToolResult(status, shown, redact(data, secrets))  # type: ignore[arg-type]

        built = build_request(spec, arguments)
        try:
            return run_coroutine(lambda: self._bounded(built, deadline, data, finish))
        except (_Deadline, httpx.TimeoutException):
            return finish("timeout", f"timed out after {spec.timeout:g} s (no complete reply from "
                                     f"{built['url']})")
        except httpx.InvalidURL as exc:
            return finish("error", f"invalid URL {built['url']!r}: {exc}")
        except httpx.HTTPError as exc:
            return finish("error", f"request failed: {type(exc).__name__}: {exc}")
        except ValueError as exc:  # e.g. illegal header value
            return finish("error", f"request failed: {exc}")

    async def _bounded(self, built: dict[str, Any], deadline: float, data: dict[str, Any], finish: Any) -> Any:
        """:meth:`_send` inside one cancel scope that ends at ``deadline`` (raises _Deadline)."""
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + (deadline - time.monotonic())):
                return await self._send(built, deadline, data, finish)
        except TimeoutError:
            raise _Deadline() from None

    async def _send(self, built: dict[str, Any], deadline: float, data: dict[str, Any], finish: Any) -> Any:
        import httpx

        spec = self.spec
        async with httpx.AsyncClient(follow_redirects=False, trust_env=False) as client:
            request = client.build_request(
                built["method"], built["url"], params=built["params"] or None, headers=built["headers"],
                json=built.get("json"), content=built.get("content"),
            )
            data["request"] = {"method": request.method, "url": str(request.url),
                               "headers": {k: v for k, v in built["headers"].items()}}
            hops = 0
            while True:
                problem = await self._check_url(request.url)
                if problem:
                    return finish("denied", problem)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Deadline()
                request.extensions["timeout"] = httpx.Timeout(remaining, connect=min(remaining, 10.0)).as_dict()
                response = await client.send(request, stream=True)
                try:
                    if response.is_redirect and response.next_request is not None:
                        hops += 1
                        data["redirects"] = hops
                        if hops > spec.max_redirects:
                            return finish("error", f"too many redirects (more than {spec.max_redirects})")
                        request = response.next_request
                        continue
                    return await self._reply(response, data, finish)
                finally:
                    await response.aclose()

    async def _reply(self, response: Any, data: dict[str, Any], finish: Any) -> ToolResult:
        spec = self.spec
        limit = read_limit(spec)
        chunks: list[bytes] = []
        size = 0
        complete = True
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                complete = False
                break
        body = b"".join(chunks)[:limit]
        data["http_status"] = response.status_code
        data["url"] = str(response.url)
        data["content_type"] = response.headers.get("content-type", "")
        declared = response.headers.get("content-length")
        total = size
        if not complete and declared and declared.isdigit():
            total = int(declared)
        data["bytes"] = total
        charset = response.charset_encoding
        text = decode(body, charset)
        if not complete:
            data["truncated"] = True
        if response.status_code >= 400:
            snippet, _, _ = cap_text(text.strip(), 500)
            head = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
            return finish("error", f"{head}\n{snippet}" if snippet else head)
        claims_json = "json" in data["content_type"].lower()
        if claims_json or spec.response_json_path:
            if not complete:
                if spec.response_json_path:
                    return finish("error", f"response too large to select {spec.response_json_path!r} "
                                           f"(more than {format_size(limit)})")
                return finish("ok", _head_only(body, charset, spec.max_output, total, declared))
            try:
                document = json_body(text) if text.strip() else None
            except json_limits.NestingError as exc:
                return finish("error", f"response is {exc}")
            except json.JSONDecodeError as exc:
                snippet, _, _ = cap_text(text, 300)
                return finish("error", f"response is not valid JSON ({exc.msg} at line {exc.lineno} column "
                                       f"{exc.colno}): {snippet}")
            if spec.response_json_path:
                try:
                    selected = select(document, spec.response_json_path)
                except JsonPathError as exc:
                    return finish("error", str(exc))
                text = selected if isinstance(selected, str) else json.dumps(selected, ensure_ascii=False)
            return finish("ok", text if text.strip() else "(empty response)")
        if not complete:
            return finish("ok", _head_only(body, charset, spec.max_output, total, declared))
        return finish("ok", text if text.strip() else f"HTTP {response.status_code} (empty response)")


def json_body(text: str) -> Any:
    """The JSON document of a response body, decoded with the bounded decoder
    (:func:`thinkflow.model.json_limits.loads`): nested deeper than :data:`~thinkflow.model.json_limits.MAX_DEPTH`
    levels is a :class:`~thinkflow.model.json_limits.NestingError`, never a ``RecursionError``. ``NaN``, ``Infinity``
    and floats beyond the float range, which JSON has not but servers write (Python's ``json.dumps``), and an object
    naming a key twice are read as Python reads them (the last value kept), as before, within the same depth bound.

    Raises:
        json.JSONDecodeError: not JSON (also an integer of more digits than Python turns into a number).
        thinkflow.model.json_limits.NestingError: nested too deep.
    """
    try:
        return json_limits.loads(text)
    except (json_limits.NumberError, json_limits.DuplicateKeyError) as refused:
        try:
            value = json.loads(text)
        except RecursionError:
            raise json_limits.NestingError() from None
        except json.JSONDecodeError:
            raise
        except ValueError:  # an integer longer than Python reads: the bounded decoder's reason says so
            raise refused from None
    if json_limits.too_deep(value):
        raise json_limits.NestingError()
    return value


def _head_only(body: bytes, charset: str | None, cap: int, total: int, declared: str | None) -> str:
    """The first ``cap`` bytes (less room for the marker) of a body whose reading was abandoned, then the marker:
    ``[... 4.9 MB truncated ...]`` when the size is declared, else ``[... response cut after 1.0 MB ...]``."""
    keep = max(0, cap - 64)
    head = decode(body[:keep], charset).rstrip("\n")
    if declared and declared.isdigit():
        return f"{head}\n{truncation_marker(total - keep)}"
    return f"{head}\n[... response cut after {format_size(len(body))} ...]"
