"""The tool protocol: what every tool kind returns and how the loop calls it, and the run context a tool may
declare it needs (:class:`RunAware`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from thinkflow.config.spec import ToolSpec

ToolStatus = Literal["ok", "error", "timeout", "denied", "invalid"]


@dataclass
class ToolResult:
    """The outcome of one tool call.

    Attributes:
        status: "ok"; "error" (the tool failed); "timeout"; "denied" (by a person or an agent rule);
            "invalid" (arguments did not match the tool's parameters; the tool did not run).
        text: the observation shown to the model (already capped to the tool's ``max_output`` bytes).
        data: structured facts for the trace: ``exit_code`` or ``http_status``, ``duration_s`` (seconds),
            ``bytes`` (output size before capping), ``truncated`` (bool), ``traceback``, ``path`` (files written), ...
    """

    status: ToolStatus
    text: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the tool ran and succeeded."""
        return self.status == "ok"


class Tool(Protocol):
    """A callable tool. ``run`` gets arguments already validated against ``spec.parameters``; it never raises for
    a failure inside the tool (that is a ToolResult with status "error" or "timeout")."""

    spec: ToolSpec

    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (derived from the function for python tools without one)."""
        ...

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the tool once and return its result."""
        ...


@dataclass(frozen=True)
class RunInfo:
    """What a run tells the tools that ask for it (:class:`RunAware`) when it starts.

    Attributes:
        run_id: the run's id.
        agent: the running agent's name.
        session: the name of the run's session (``--session``), or None.
    """

    run_id: str
    agent: str
    session: str | None = None


@runtime_checkable
class RunAware(Protocol):
    """A tool that needs to know the run calling it (e.g. ``remember_fact`` tags facts with the run's session).
    :meth:`thinkflow.tools.toolbox.Toolbox.start_run` calls :meth:`start_run` on every such tool before the run's
    first step."""

    def start_run(self, run: RunInfo) -> None:
        """Take note of the run that is starting (called once per run, before any call of the tool)."""
        ...
