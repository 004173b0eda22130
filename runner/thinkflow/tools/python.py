"""kind: python — call a Python function.

The function comes from ``entrypoint`` (``package.module:function``), from the :func:`~.registry.tool` registry,
or from an installed package's ``thinkflow.tools`` entry point. Its return value becomes the observation (JSON
for dicts and lists); an exception becomes an error observation ``ValueError: message`` with the traceback only
in ``data["traceback"]``.

Timeout: the function runs in a worker process (:mod:`~thinkflow.tools.pyworker`, under the launcher of
:mod:`~thinkflow.tools.process`), started on the tool's first call and kept for the next ones. When the call
passes ``timeout`` seconds, the worker and everything it started are killed (status "timeout") and the next call
starts a new one, so the timeout holds even for code that never releases the interpreter lock
(``sum(range(10**10))``, a huge ``pow``). Arguments and results cross as JSON (results as their text); the worker
sees the runner's ``sys.path``, working directory and environment of the moment of the call. Importing the
function in a new worker is not counted in the timeout (it is bounded by :data:`STARTUP_SECONDS`).

A tool that declares ``quick: true`` runs in the caller's own thread, with no handoff at all (no process, no JSON,
no thread): Ctrl-C interrupts it as any code of the loop, but its timeout is not enforced (a call that overran it is
marked ``data["overran_timeout"]``). A function that cannot be imported by name in another process (defined inside
a function, in ``__main__``, or not a plain function) runs in a reused daemon thread (:mod:`thinkflow.workers`)
where the timeout only stops waiting (the thread cannot be killed and runs on in the background).
``data["isolation"]`` says which applied ("process", "inline" or "thread").
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import os
import subprocess
import sys
import threading
import time
import traceback
import weakref
from pathlib import Path
from typing import Any, Callable

from thinkflow import jsonout
from thinkflow.errors import ToolError
from thinkflow.config.spec import ToolSpec
from thinkflow.tools.base import ToolResult
from thinkflow.tools.frames import read_frame, write_frame
from thinkflow.config.entrypoints import search_dirs
from thinkflow.tools.output import cap_text, decode
from thinkflow.tools.registry import load_entry_point, registered
from thinkflow.tools.schema import SignatureArguments, derive_parameters, describe_function
from thinkflow.workers import WorkerPool


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
    and other JSON-able values as JSON (:func:`thinkflow.jsonout.dumps`: NaN as ``"NaN"``, a too-long integer
    described), anything else ``str()``. Never raises."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, (bytes, bytearray)):
        return decode(bytes(value))
    if isinstance(value, (dict, list, tuple, int, float, bool)):
        try:  # NaN as "NaN"; an integer too long to print as "<an integer of about N digits>"
            return jsonout.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            pass
    try:
        return str(value)
    except (ValueError, RecursionError) as error:  # str() of a structure holding a too-long integer
        return f"(a {type(value).__name__} that cannot be shown as text: {error})"


def error_result(exc: BaseException) -> ToolResult:
    """An error observation ``Type: message`` with the traceback in ``data["traceback"]``."""
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ToolResult("error", text, {"traceback": tb, "exception": type(exc).__name__})


_TOOL_CALLS = WorkerPool("thinkflow-tool")


def run_with_timeout(func: Callable[..., Any], kwargs: dict[str, Any], timeout: float, max_output: int, *,
                     inline: bool = False) -> ToolResult:
    """Call ``func(**kwargs)`` in a pooled daemon worker thread, waiting at most ``timeout`` seconds, and turn the
    outcome into a ToolResult (a returned ToolResult passes through). Data gets ``duration_s``, ``bytes``,
    ``truncated``. ``inline``: call it in this thread instead (a ``quick`` tool): no handoff, Ctrl-C interrupts
    it as any code of the caller, the timeout is not enforced and an overrun is marked ``overran_timeout``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            value = func(**kwargs)
            if inspect.iscoroutine(value):  # async def tools run on their own event loop
                value = asyncio.run(value)
            box["value"] = value
        except Exception as exc:  # noqa: BLE001 - every failure becomes an observation
            box["error"] = exc
        except BaseException as exc:  # noqa: BLE001 - SystemExit and the like from a tool, too
            if inline and isinstance(exc, KeyboardInterrupt):
                raise  # Ctrl-C in the caller's thread interrupts the run, as it would outside the tool
            box["error"] = exc

    started = time.monotonic()
    if inline:
        target()
    else:
        if not _TOOL_CALLS.submit(target).wait(timeout):
            duration = round(time.monotonic() - started, 3)
            return ToolResult("timeout", f"timed out after {timeout:g} s",
                              {"duration_s": duration, "bytes": 0, "truncated": False})
    duration = round(time.monotonic() - started, 3)
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
    if inline and duration > timeout:
        data["overran_timeout"] = True
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


STARTUP_SECONDS = 60.0
"""Seconds a new worker may take to start and import the tool's function."""


def import_path(func: Callable[..., Any], entrypoint: str | None) -> str | None:
    """``module:qualname`` under which another process imports the very same function: ``entrypoint`` when it
    names ``func``, else the function's own module and qualified name; None when neither does (a function defined
    inside another, in ``__main__``, a partial or a callable object)."""
    candidates = [entrypoint] if entrypoint else []
    module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
    if module and qualname and module != "__main__" and "<locals>" not in qualname:
        candidates.append(f"{module}:{qualname}")
    for candidate in candidates:
        module_name, _, attr = candidate.partition(":")
        obj: Any = sys.modules.get(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part, None)
        if obj is func and module_name != "__main__":
            return candidate
    return None


class _WorkerGone(Exception):
    """The worker exited or broke the protocol."""


class _Worker:
    """One worker process with the tool's function loaded."""

    def __init__(self, target: str, search: list[Path]):
        from thinkflow.tools.process import ProcessTree

        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
        self.tree = ProcessTree([sys.executable, "-m", "thinkflow.tools.pyworker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
        try:
            self.send({"op": "load", "sys_path": list(sys.path), "target": target,
                       "search": [str(p) for p in search]})
            reply = self.receive(time.monotonic() + STARTUP_SECONDS)
        except BaseException:
            self.close()
            raise
        if reply is None or not reply.get("ok"):
            self.close()
            raise ToolError(f"the tool's worker could not load {target!r}: "
                            f"{(reply or {}).get('error', 'it did not start in time')}")

    def alive(self) -> bool:
        return self.tree.proc.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        try:
            write_frame(self.tree.proc.stdin.fileno(), message)  # type: ignore[union-attr]
        except (OSError, ValueError) as exc:
            raise _WorkerGone(str(exc)) from exc

    def receive(self, deadline: float) -> dict[str, Any] | None:
        """The next reply, or None when ``deadline`` (monotonic) passes first. Raises _WorkerGone."""
        try:
            return read_frame(self.tree.proc.stdout.fileno(), deadline)  # type: ignore[union-attr]
        except EOFError as exc:
            raise _WorkerGone(f"the worker exited ({exc})") from None

    def close(self) -> None:
        for stream in (self.tree.proc.stdin, self.tree.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self.tree.close()


def _close_workers(workers: list[_Worker]) -> None:
    while workers:
        workers.pop().close()


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
        self._target = None if getattr(spec, "quick", False) else import_path(self.func, spec.entrypoint)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        weakref.finalize(self, _close_workers, self._idle)

    @property
    def isolation(self) -> str:
        """``"process"`` (calls run in a worker process that is killed on timeout), ``"inline"`` (``quick``: in the
        caller's thread) or ``"thread"`` (a reused worker thread; the timeout only stops waiting)."""
        if self._target is not None:
            return "process"
        return "inline" if getattr(self.spec, "quick", False) else "thread"

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
        if self._target is not None:
            return self._run_in_worker(arguments)
        quick = bool(getattr(self.spec, "quick", False))
        result = run_with_timeout(self.func, kwargs, self.spec.timeout, self.spec.max_output, inline=quick)
        return ToolResult(result.status, result.text, {**result.data, "isolation": self.isolation})

    def _worker(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                worker.close()
        return _Worker(self._target or "", search_dirs(self.spec.source))

    def _run_in_worker(self, arguments: dict[str, Any]) -> ToolResult:
        spec = self.spec
        worker = self._worker()
        started = time.monotonic()
        reply = None
        try:
            worker.send({"op": "call", "arguments": arguments, "strict": self._derived, "cwd": os.getcwd(),
                         "environ": dict(os.environ), "max_output": spec.max_output})
            reply = worker.receive(started + spec.timeout)
        except _WorkerGone as gone:
            worker.close()
            return ToolResult("error", f"the tool's worker process died during the call ({gone})",
                              {"duration_s": round(time.monotonic() - started, 3), "bytes": 0, "truncated": False,
                               "isolation": "process"})
        except BaseException:  # Ctrl-C: the call dies with its worker
            worker.close()
            raise
        duration = round(time.monotonic() - started, 3)
        if reply is None:
            worker.close()
            return ToolResult("timeout", f"timed out after {spec.timeout:g} s",
                              {"duration_s": duration, "bytes": 0, "truncated": False, "isolation": "process"})
        with self._lock:
            self._idle.append(worker)
        data = dict(reply.get("data") or {})
        data["duration_s"] = duration
        data["isolation"] = "process"
        return ToolResult(reply.get("status", "error"), str(reply.get("text", "")), data)

