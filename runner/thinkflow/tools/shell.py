"""kind: shell — run a command as an argv list, contained.

Each ``{param}`` that is a whole argv element becomes exactly one element (a value ``x; touch /tmp/pwned`` is
one literal argument; no shell is involved). A placeholder inside a larger element (``--name={name}``) is
substituted as text in that element. ``shell: true`` opts into ``/bin/sh -c`` with every value
``shlex.quote``-d. Standard input is closed; the command runs in its own session/process group, in the declared
working directory, with the environment reduced to :data:`ENV_ALLOWLIST` plus ``env_allow`` plus declared
``env``. When the main process exits, or the timeout passes, the whole process group is killed (SIGKILL), so
background children never outlive the call. stdout and stderr are read with a byte cap (head + tail kept).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from thinkflow.config.spec import ToolSpec
from thinkflow.tools.base import ToolResult
from thinkflow.tools.output import CappedBuffer, cap_text
from thinkflow.tools.templating import effective_arguments, render, whole_placeholder

ENV_ALLOWLIST: tuple[str, ...] = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER")
"""Environment variables passed to shell tools by default (besides ``env_allow`` and declared ``env``)."""

_READ_CHUNK = 65536
_DRAIN_SECONDS = 2.0


def build_argv(spec: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    """The argv to execute for ``arguments`` (defaults from the schema filled in).

    A whole-element placeholder of a parameter that is absent (optional, no default) drops that element.
    With ``shell: true`` the script is the command's elements joined with spaces (a command written as one string
    stays one element) and runs as ``["/bin/sh", "-c", script]``.
    """
    values = effective_arguments(arguments, spec.parameters)
    if spec.shell:
        script = " ".join(spec.command)
        return ["/bin/sh", "-c", render(script, values, quote=shlex.quote)]
    argv: list[str] = []
    for element in spec.command:
        name = whole_placeholder(element)
        if name is not None:
            if values.get(name) is None:
                continue
            argv.append(render(element, values))
        else:
            argv.append(render(element, values))
    return argv


def build_env(spec: ToolSpec, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The reduced environment: allowlisted and ``env_allow`` names copied from ``environ`` (default
    ``os.environ``), then the declared ``env`` on top."""
    source = os.environ if environ is None else environ
    env = {name: source[name] for name in (*ENV_ALLOWLIST, *spec.env_allow) if name in source}
    env.update({k: str(v) for k, v in spec.env.items()})
    return env


def _reader(stream: Any, buf: CappedBuffer) -> None:
    fd = stream.fileno()
    try:
        while True:
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                break
            buf.write(chunk)
    except OSError:
        pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _seconds(value: float) -> str:
    return f"{value:g}"


class ShellTool:
    """A shell tool built from its spec. ``run`` returns ``ToolResult`` with data ``exit_code`` (None on timeout),
    ``duration_s``, ``bytes`` (stdout + stderr before capping), ``truncated``, ``argv``."""

    def __init__(self, spec: ToolSpec):
        self.spec = spec

    def parameters(self) -> dict[str, Any]:
        """The declared JSON Schema (an empty object schema when none)."""
        return self.spec.parameters or {"type": "object", "properties": {}}

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the command once (blocking at most ``spec.timeout`` seconds plus a short drain)."""
        spec = self.spec
        argv = build_argv(spec, arguments)
        started = time.monotonic()
        data: dict[str, Any] = {"argv": argv}
        if not argv:
            return ToolResult("error", "the command is empty", {**data, "exit_code": None, "duration_s": 0.0,
                                                                   "bytes": 0, "truncated": False})
        if spec.cwd is not None and not Path(spec.cwd).is_dir():
            return ToolResult("error", f"working directory {str(spec.cwd)!r} does not exist",
                              {**data, "exit_code": None, "duration_s": 0.0, "bytes": 0, "truncated": False})
        cap = spec.max_output
        out, err = CappedBuffer(cap), CappedBuffer(cap)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=str(spec.cwd) if spec.cwd else None,
                env=build_env(spec),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            text = f"could not start {argv[0]!r}: {exc.strerror or exc}"
            return ToolResult("error", text, {**data, "exit_code": None, "duration_s": time.monotonic() - started,
                                              "bytes": 0, "truncated": False})
        readers = [
            threading.Thread(target=_reader, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_reader, args=(proc.stderr, err), daemon=True),
        ]
        for t in readers:
            t.start()
        timed_out = False
        try:
            proc.wait(timeout=spec.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Kill the whole group: on timeout, and after a normal exit so background children die too.
            _kill_group(proc.pid)
            proc.wait()
        for t in readers:
            t.join(_DRAIN_SECONDS)
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        duration = time.monotonic() - started
        o, e = out.result(), err.result()
        parts = []
        if o.total:
            parts.append(o.text().rstrip("\n"))
        if e.total:
            parts.append("[stderr]\n" + e.text().rstrip("\n"))
        body = "\n".join(parts)
        exit_code = None if timed_out else proc.returncode
        if timed_out:
            status = "timeout"
            head = f"timed out after {_seconds(spec.timeout)} s"
            text = head + ("; partial output:\n" + body if body else " (no output)")
        elif exit_code == 0:
            status = "ok"
            text = body if body else "(no output)"
        else:
            status = "error"
            reason = f"killed by signal {-exit_code}" if exit_code < 0 else f"exit code {exit_code}"
            text = f"{reason}\n{body}" if body else reason
        text, _, cut = cap_text(text, cap + 200)
        data.update(
            exit_code=exit_code,
            duration_s=round(duration, 3),
            bytes=o.total + e.total,
            truncated=o.truncated or e.truncated or cut,
        )
        return ToolResult(status, text, data)
