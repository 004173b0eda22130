"""kind: shell — run a command as an argv list, contained.

Each ``{param}`` that is a whole argv element becomes exactly one element (a value ``x; touch /tmp/pwned`` is
one literal argument; no shell is involved). A placeholder inside a larger element (``--name={name}``) is
substituted as text in that element. ``shell: true`` opts into ``/bin/sh -c`` with every value
``shlex.quote``-d; a placeholder inside quotes (``'{a}'``), after a backslash, in a here-document or inside
``${...}``/``$((...))`` is refused at load (:func:`shell_template_problems`), since the quoted value would end the
template's own quotes.

Options: a value that begins an argument (or a shell word) and starts with ``-`` would be read as an option of
the command (``sort -o FILE``, ``wc --files0-from=FILE``), so it is refused unless the placeholder stands after a
``--`` in the command or its parameter says ``allow_options: true``. A parameter with ``workspace_path: true``
must name a path inside the agent's workspace (symlinks resolved, so ``/proc`` and ``..`` are out); such a tool
runs in the workspace unless ``cwd`` is set.

Containment: standard input is closed; the command runs under :mod:`~thinkflow.tools.launcher` (a child
subreaper in its own session) in the declared working directory, with the environment reduced to
:data:`ENV_ALLOWLIST` plus ``env_allow`` plus declared ``env``. When the command exits, the timeout passes or
the run is interrupted, every process it started is killed -- also one that detached with ``setsid``,
``nohup ... &`` or a double fork. stdout and stderr are read with a byte cap (head + tail kept).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from thinkflow.config.spec import ToolSpec
from thinkflow.tools.base import ToolResult
from thinkflow.tools.output import CappedBuffer, cap_text
from thinkflow.errors import ToolError
from thinkflow.config.placeholders import shell_template_problems
from thinkflow.tools.process import ProcessTree
from thinkflow.tools.templating import PLACEHOLDER, effective_arguments, render, scan_shell, value_text, \
    whole_placeholder

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


OWN_KEYS = ("allow_options", "workspace_path")
"""ThinkFlow's own keys in a shell tool's parameter schemas (removed from the schema the model sees)."""

def _option_slots(spec: ToolSpec) -> dict[str, bool]:
    """For each placeholder name that begins an argument (or a shell word): whether every such use stands after
    a ``--`` (True: the value is an operand) or not (False: a leading ``-`` would be an option)."""
    slots: dict[str, bool] = {}
    if spec.shell:
        for found in scan_shell(" ".join(spec.command)):
            if found.word_start:
                slots[found.name] = slots.get(found.name, True) and found.after_dashdash
        return slots
    dashdash = False
    for element in spec.command:
        first = PLACEHOLDER.match(element)
        if first is not None:
            slots[first.group(1)] = slots.get(first.group(1), True) and dashdash
        if element == "--":
            dashdash = True
    return slots


def _properties(spec: ToolSpec) -> dict[str, Any]:
    props = (spec.parameters or {}).get("properties")
    return props if isinstance(props, dict) else {}


def option_problem(spec: ToolSpec, arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` may not run (a value that would be read as an option), or None."""
    values = effective_arguments(arguments, spec.parameters)
    props = _properties(spec)
    for name, operand in _option_slots(spec).items():
        value = values.get(name)
        if value is None or operand:
            continue
        schema = props.get(name) if isinstance(props.get(name), dict) else {}
        if schema.get("allow_options") is True:
            continue
        if value_text(value).startswith("-"):
            return (f"argument '{name}' may not start with '-': the command would read it as an option "
                    f"(the tool allows options only where its parameter says allow_options: true)")
    return None


def path_problem(spec: ToolSpec, arguments: dict[str, Any], workspace: Path, cwd: Path) -> str | None:
    """Why a ``workspace_path`` argument may not be used (it resolves outside ``workspace``), or None. Relative
    paths resolve against ``cwd``; symlinks are followed (``os.path.realpath``)."""
    values = effective_arguments(arguments, spec.parameters)
    root = os.path.realpath(workspace)
    for name, schema in _properties(spec).items():
        if not (isinstance(schema, dict) and schema.get("workspace_path") is True) or values.get(name) is None:
            continue
        value = values[name]
        for text in ([value_text(v) for v in value] if isinstance(value, (list, tuple)) else [value_text(value)]):
            if "\0" in text:
                return f"argument '{name}' holds a NUL character"
            real = os.path.realpath(os.path.join(cwd, text))
            if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
                return (f"argument '{name}' {text!r} is outside the workspace ({workspace}); give a path inside "
                        "it, relative to the workspace")
    return None


def _seconds(value: float) -> str:
    return f"{value:g}"


class ShellTool:
    """A shell tool built from its spec. ``run`` returns ``ToolResult`` with data ``exit_code`` (None on timeout),
    ``duration_s``, ``bytes`` (stdout + stderr before capping), ``truncated``, ``argv``."""

    def __init__(self, spec: ToolSpec, workspace: Path | None = None):
        if spec.shell:
            problems = shell_template_problems(" ".join(spec.command))
            if problems:
                name, problem, fix = problems[0]
                raise ToolError(f"tool {spec.name!r}: {problem} ({fix})")
        self.spec = spec
        self.workspace = Path(workspace) if workspace is not None else None
        self._has_paths = any(isinstance(s, dict) and s.get("workspace_path") is True
                              for s in _properties(spec).values())

    def parameters(self) -> dict[str, Any]:
        """The declared JSON Schema without ThinkFlow's own keys (:data:`OWN_KEYS`); an empty object schema when
        none."""
        schema = self.spec.parameters or {"type": "object", "properties": {}}
        props = schema.get("properties")
        if not isinstance(props, dict) or not any(isinstance(p, dict) and set(p) & set(OWN_KEYS)
                                                   for p in props.values()):
            return schema
        clean = {name: ({k: v for k, v in p.items() if k not in OWN_KEYS} if isinstance(p, dict) else p)
                 for name, p in props.items()}
        return {**schema, "properties": clean}

    def working_directory(self) -> Path | None:
        """Where the command runs: ``cwd``, else the workspace for a tool with ``workspace_path`` parameters,
        else None (the runner's current directory)."""
        if self.spec.cwd is not None:
            return self.spec.cwd
        return self.workspace if self._has_paths else None

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the command once (blocking at most ``spec.timeout`` seconds plus a short drain)."""
        spec = self.spec
        argv = build_argv(spec, arguments)
        started = time.monotonic()
        data: dict[str, Any] = {"argv": argv}
        empty = {"exit_code": None, "duration_s": 0.0, "bytes": 0, "truncated": False}
        if not argv:
            return ToolResult("error", "the command is empty", {**data, **empty})
        cwd = self.working_directory()
        if cwd is not None and not Path(cwd).is_dir():
            return ToolResult("error", f"working directory {str(cwd)!r} does not exist", {**data, **empty})
        refused = option_problem(spec, arguments) or (
            path_problem(spec, arguments, self.workspace or Path(cwd or "."), Path(cwd or ".")) if self._has_paths
            else None)
        if refused:
            return ToolResult("invalid", refused, {**data, **empty})
        env = build_env(spec)
        program = shutil.which(argv[0], path=env.get("PATH", os.defpath)) if "/" not in argv[0] else (
            argv[0] if os.access(os.path.join(str(cwd or "."), argv[0]), os.X_OK) else None)
        if program is None:
            missing = os.path.join(str(cwd or "."), argv[0])
            reason = "Permission denied" if "/" in argv[0] and os.path.exists(missing) else "No such file or directory"
            return ToolResult("error", f"could not start {argv[0]!r}: {reason}", {**data, **empty})
        cap = spec.max_output
        out, err = CappedBuffer(cap), CappedBuffer(cap)
        try:
            tree = ProcessTree(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=str(cwd) if cwd else None, env=env)
        except OSError as exc:
            text = f"could not start {argv[0]!r}: {exc.strerror or exc}"
            return ToolResult("error", text, {**data, **empty, "duration_s": time.monotonic() - started})
        proc = tree.proc
        readers = [
            threading.Thread(target=_reader, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_reader, args=(proc.stderr, err), daemon=True),
        ]
        for t in readers:
            t.start()
        timed_out = False
        try:
            tree.wait(timeout=spec.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # The launcher kills what the command left behind; on timeout or Ctrl-C, close() makes it do so now.
            tree.close()
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
