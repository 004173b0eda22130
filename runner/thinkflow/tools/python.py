"""kind: python — call a Python function.

The function comes from ``entrypoint`` (``package.module:function``), from the :func:`~.registry.tool` registry,
or from an installed package's ``thinkflow.tools`` entry point. Its return value becomes the observation (JSON
for dicts and lists); an exception becomes an error observation ``ValueError: message`` with the traceback only
in ``data["traceback"]``.

Timeout: the function runs in a daemon worker thread and the call stops waiting after ``timeout`` seconds
(status "timeout"). Python cannot kill a thread, so a function that never returns keeps running in the
background until the process exits; write long-running work as a shell tool when it must be killed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from thinkflow.errors import ToolError
from thinkflow.config.spec import ToolSpec
from thinkflow.tools.base import ToolResult
from thinkflow.config.entrypoints import search_dirs
from thinkflow.tools.output import cap_text, decode
from thinkflow.tools.registry import load_entry_point, registered
from thinkflow.tools.schema import SignatureArguments, derive_parameters, describe_function


def import_entrypoint(value: str, search: list[Path] | None = None) -> Callable[..., Any]:
    """Import ``package.module:attr.path`` and return the object.

    ``search`` directories are added to ``sys.path`` (at the end) when the first import fails.
    Raises ToolError when the module or attribute is missing or the object is not callable.
    """
    module_name, sep, attr = value.partition(":")
    if not sep or not module_name or not attr:
        raise ToolError(f"entrypoint {value!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as first:
        added = [str(p) for p in (search or []) if str(p) not in sys.path]
        if not added or (first.name and not module_name.startswith(first.name.split(".")[0])):
            raise ToolError(f"entrypoint {value!r}: {first}") from first
        sys.path.extend(added)
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ToolError(f"entrypoint {value!r}: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        raise ToolError(f"entrypoint {value!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") \
            from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ToolError(f"entrypoint {value!r}: module {module_name!r} has no attribute {attr!r}") from exc
    if not callable(obj):
        raise ToolError(f"entrypoint {value!r} is not callable")
    return obj


def result_text(value: Any) -> str:
    """A return value as text: str unchanged, bytes decoded (replacement), None -> "(no output)", dicts, lists
    and other JSON-able values as JSON, anything else ``str()``."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, (bytes, bytearray)):
        return decode(bytes(value))
    if isinstance(value, (dict, list, tuple, int, float, bool)):
        try:
            return json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def error_result(exc: BaseException) -> ToolResult:
    """An error observation ``Type: message`` with the traceback in ``data["traceback"]``."""
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ToolResult("error", text, {"traceback": tb, "exception": type(exc).__name__})


def run_with_timeout(func: Callable[..., Any], kwargs: dict[str, Any], timeout: float, max_output: int) -> ToolResult:
    """Call ``func(**kwargs)`` in a daemon thread, waiting at most ``timeout`` seconds, and turn the outcome into
    a ToolResult (a returned ToolResult passes through). Data gets ``duration_s``, ``bytes``, ``truncated``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            value = func(**kwargs)
            if inspect.iscoroutine(value):  # async def tools run on their own event loop in the worker
                value = asyncio.run(value)
            box["value"] = value
        except BaseException as exc:  # noqa: BLE001 - every failure becomes an observation
            box["error"] = exc

    started = time.monotonic()
    worker = threading.Thread(target=target, name=f"tool-{getattr(func, '__name__', 'call')}", daemon=True)
    worker.start()
    worker.join(timeout)
    duration = round(time.monotonic() - started, 3)
    if worker.is_alive():
        return ToolResult("timeout", f"timed out after {timeout:g} s",
                          {"duration_s": duration, "bytes": 0, "truncated": False})
    if "error" in box:
        result = error_result(box["error"])
    else:
        value = box.get("value")
        result = value if isinstance(value, ToolResult) else ToolResult("ok", result_text(value))
    text, total, truncated = cap_text(result.text, max_output)
    data = dict(result.data)
    data.setdefault("bytes", total)
    data["truncated"] = bool(data.get("truncated")) or truncated
    data["duration_s"] = duration
    return ToolResult(result.status, text, data)


def resolve_function(spec: ToolSpec) -> Callable[..., Any]:
    """The function behind a python tool: ``entrypoint``, else the @tool registry, else the entry-point group.

    Raises ToolError when none is found or the import fails.
    """
    if spec.entrypoint:
        reg = registered(spec.name)
        if reg is not None and reg[1].entrypoint == spec.entrypoint:
            return reg[0]
        return import_entrypoint(spec.entrypoint, search_dirs(spec.source))
    reg = registered(spec.name)
    if reg is not None:
        return reg[0]
    func, _ = load_entry_point(spec.name)
    return func


class PythonTool:
    """A python tool. ``func`` may be given directly (else resolved from the spec at construction).

    A spec without a description (an entry-point tool named by an agent) takes the function's: its ``@tool``
    description, else its docstring's summary, else the tool's name -- what the model is shown."""

    def __init__(self, spec: ToolSpec, func: Callable[..., Any] | None = None):
        self.func = func if func is not None else resolve_function(spec)
        if not spec.description.strip():
            declared = getattr(self.func, "__thinkflow_tool__", None)
            described = (declared.description if declared is not None else "") or describe_function(self.func)
            spec = dataclasses.replace(spec, description=described or spec.name)
        self.spec = spec
        self._derived = spec.parameters is None
        self._parameters = derive_parameters(self.func) if self._derived else spec.parameters
        self._arguments = SignatureArguments(self.func)

    def parameters(self) -> dict[str, Any]:
        """The declared schema, or the one derived from the function."""
        return self._parameters

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Call the function with the arguments converted to its parameters' types by pydantic
        (:class:`~thinkflow.tools.schema.SignatureArguments`: Enum members, datetimes, paths, dataclasses); a value
        that does not convert is an "invalid" result when the schema was derived from the signature, and passes
        as it is when the spec declares its own schema."""
        try:
            kwargs = self._arguments.convert(arguments, strict=self._derived)
        except ValueError as problem:
            return ToolResult("invalid", f"invalid arguments for tool '{self.spec.name}': {problem}")
        return run_with_timeout(self.func, kwargs, self.spec.timeout, self.spec.max_output)

