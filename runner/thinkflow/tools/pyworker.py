"""The worker process python tools run in, so that a call that never returns (or never releases the interpreter
lock: ``sum(range(10**10))``, a huge ``pow``) can be stopped by killing the process.

Protocol (runner side in :mod:`thinkflow.tools.python`): frames (:mod:`thinkflow.tools.frames`), requests on standard input, replies on the file descriptor that was standard output (standard output is
then pointed at standard error, so a tool's ``print`` cannot corrupt the replies).

Requests: ``{"op": "load", "sys_path": [...], "target": "module:qualname", "search": [...]}`` imports the
function once (reply ``{"ok": true}`` or ``{"ok": false, "error": "..."}``); ``{"op": "call", "arguments": {...},
"cwd": "...", "environ": {...}, "max_output": n}`` calls it (reply ``{"status", "text", "data"}``, the text
already capped). The worker exits at end of input or after :data:`IDLE_SECONDS` without a request.

The worker is a child subreaper (as the launcher): after each call it kills every process the call started and
left running, so a python tool's children end with its call too (:func:`thinkflow.tools.launcher._kill_all`).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from thinkflow.tools.frames import read_frame, write_frame

IDLE_SECONDS = 300.0


def _read_frame(fd: int) -> dict[str, Any] | None:
    """The next request, or None at end of input or after IDLE_SECONDS without one."""
    try:
        return read_frame(fd, time.monotonic() + IDLE_SECONDS)
    except EOFError:
        return None


def _call(func: Any, converter: Any, request: dict[str, Any]) -> dict[str, Any]:
    import asyncio
    import inspect

    from thinkflow.tools.base import ToolResult
    from thinkflow.tools.output import cap_text
    from thinkflow.tools.python import error_result, result_text

    arguments = dict(request.get("arguments") or {})
    try:  # the runner checked them already; here they become the parameters' types (Enum, datetime, ...)
        kwargs = converter.convert(arguments, strict=bool(request.get("strict")))
    except ValueError:
        kwargs = arguments
    if request.get("cwd"):
        try:
            os.chdir(request["cwd"])
        except OSError as error:  # gone, or a name that is not UTF-8: never run the tool somewhere else
            return {"status": "error", "text": f"the tool's working directory cannot be entered: {error}",
                    "data": {"bytes": 0, "truncated": False}}
    if isinstance(request.get("environ"), dict):
        os.environ.clear()
        os.environ.update(request["environ"])
    try:
        value = func(**kwargs)
        if inspect.iscoroutine(value):
            value = asyncio.run(value)
        result = value if isinstance(value, ToolResult) else ToolResult("ok", result_text(value))
    except BaseException as exc:  # noqa: BLE001 - every failure becomes an observation
        result = error_result(exc)
    text, total, truncated = cap_text(result.text, int(request.get("max_output") or 16384))
    data = dict(result.data)
    data.setdefault("bytes", total)
    data["truncated"] = bool(data.get("truncated")) or truncated
    return {"status": result.status, "text": text, "data": data}


def main() -> None:
    """Serve requests until the input ends or stays idle."""
    from thinkflow.tools import launcher

    reaper = launcher._prctl(launcher.PR_SET_CHILD_SUBREAPER, 1)
    replies = os.dup(1)
    os.dup2(2, 1)
    requests = sys.stdin.fileno()
    func: Any = None
    converter: Any = None
    while True:
        request = _read_frame(requests)
        if request is None:
            return
        if request.get("op") == "load":
            sys.path[:] = list(request.get("sys_path") or sys.path)
            try:
                from thinkflow.tools.python import import_entrypoint
                from thinkflow.tools.schema import SignatureArguments

                func = import_entrypoint(request["target"], [__import__("pathlib").Path(p)
                                                             for p in request.get("search") or []])
                converter = SignatureArguments(func)
                write_frame(replies, {"ok": True})
            except BaseException as exc:  # noqa: BLE001 - reported to the runner
                write_frame(replies, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        elif request.get("op") == "call" and func is not None:
            reply = _call(func, converter, request)
            if reaper:
                launcher._kill_all(os.getpid())
            write_frame(replies, reply)
        else:
            write_frame(replies, {"status": "error", "text": "the worker has no function loaded", "data": {}})


if __name__ == "__main__":
    main()
