"""JSON errors and request checks shared by the REST, OpenAI-compatible and page routes.

Every refused request gets a JSON body ``{"error": {"code", "message", "hint"}}`` (the OpenAI endpoint uses
OpenAI's shape ``{"error": {"message", "type", "code", "param"}}``) with a 4xx status that says what to fix.
"""

from __future__ import annotations

import json
from typing import Any

from thinkflow.errors import ThinkFlowError


class ApiError(ThinkFlowError):
    """A request the server refuses.

    Attributes:
        status: the HTTP status (400, 401, 404, 409, 413, 415, 429, 503, ...).
        code: a short machine name (``bad_json``, ``unknown_agent``, ``busy``, ...).
        message: what is wrong. hint: how to fix it, or "".
        headers: extra response headers (``Retry-After`` with 429 and 503, ``WWW-Authenticate`` with 401).
        param: the request field at fault, or None.
    """

    def __init__(self, status: int, code: str, message: str, hint: str = "", *, headers: dict[str, str] | None = None,
                 param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.headers = dict(headers or {})
        self.param = param

    def body(self) -> dict[str, Any]:
        """``{"error": {"code", "message", "hint", "param"}}``."""
        return {"error": {"code": self.code, "message": self.message, "hint": self.hint, "param": self.param}}

    def openai_body(self) -> dict[str, Any]:
        """OpenAI's error shape: ``{"error": {"message", "type", "code", "param"}}``."""
        kind = "invalid_request_error" if self.status < 500 and self.status != 429 else (
            "rate_limit_error" if self.status == 429 else "server_error")
        text = f"{self.message} ({self.hint})" if self.hint else self.message
        return {"error": {"message": text, "type": kind, "code": self.code, "param": self.param}}


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object. Raises ApiError 400 ``bad_json`` (not JSON, or not an object)."""
    if not raw.strip():
        raise ApiError(400, "bad_json", "the request body is empty", 'send a JSON object, e.g. {"task": "..."}')
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise ApiError(400, "bad_json", f"the request body is not valid JSON: {error}",
                       "send a JSON object with Content-Type: application/json") from None
    except RecursionError:
        raise ApiError(400, "bad_json", "the request body is JSON nested too deeply",
                       "send a JSON object with less nesting") from None
    try:
        raw.decode("utf-8") if isinstance(raw, bytes) else raw.encode("utf-8")
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeError:
        raise ApiError(400, "bad_json", "the request body holds text that is not valid Unicode (a lone surrogate)",
                       "send UTF-8 text") from None
    if not isinstance(data, dict):
        raise ApiError(400, "bad_json", f"the request body must be a JSON object, not {type(data).__name__}",
                       'wrap the fields in an object, e.g. {"task": "..."}')
    return data


_TYPE_NAMES = {str: "a string", bool: "true or false", dict: "an object", list: "an array", int: "an integer"}


def field(data: dict[str, Any], name: str, kind: type, *, required: bool = False, default: Any = None) -> Any:
    """``data[name]`` checked to be of ``kind`` (bool is not an int). Raises ApiError 400 ``missing_field`` or
    ``wrong_type`` naming the field."""
    if name not in data or data[name] is None:
        if required:
            raise ApiError(400, "missing_field", f"'{name}' is required", f"add \"{name}\" ({_TYPE_NAMES[kind]})",
                           param=name)
        return default
    value = data[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ApiError(400, "wrong_type", f"'{name}' must be {_TYPE_NAMES[kind]}, not {type(value).__name__}",
                       param=name)
    return value


def unknown_fields(data: dict[str, Any], allowed: set[str]) -> None:
    """Raise ApiError 400 ``unknown_field`` when ``data`` has a key outside ``allowed`` (with a did-you-mean)."""
    from thinkflow.text import did_you_mean

    for key in data:
        if key not in allowed:
            hint = did_you_mean(key, sorted(allowed)) or f"known fields: {', '.join(sorted(allowed))}"
            raise ApiError(400, "unknown_field", f"unknown field '{key}'", hint, param=key)
