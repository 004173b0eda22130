"""Delegation: sub-agents shown to the model as tools taking a ``task`` string.

An agent's ``agents:`` (resolved by the loader into :attr:`AgentSpec.agents`, cycles rejected at load) become
:class:`SubAgentTool` s in its toolbox (:func:`add_subagents`, called by :func:`thinkflow.agent.build`). Calling one
builds the sub-agent from its own spec (its own model, tools, prompt and limits) and runs it on the task with
:func:`thinkflow.run.loop.run` -- or :func:`thinkflow.run.planner.run` when its planner is enabled. The sub-agent's final
answer is the observation. While it runs:

- its token usage, cost and tool calls are charged to the calling run's budget too (``budget=`` of the loop), so a
  parent's ``max_tokens`` / ``max_cost`` / ``max_tool_calls`` covers the whole tree of agents;
- its events go to the calling run's trace and live view wrapped in
  :class:`thinkflow.run.events.SubAgentEvent` (tagged with the calling step and the depth); it writes no trace of its
  own;
- its wall-clock timeout is cut to what is left of the caller's;
- delegation depth is checked again at run time: a sub-agent may be called at depth ``d + 1`` only when
  ``d + 1 <= min(limit of the caller, d + caller's max_depth)`` (the loader's rule), else the call is refused with
  an observation.
"""

from __future__ import annotations

import dataclasses
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable

from thinkflow.config.spec import AgentSpec, SubAgentRef, ToolSpec
from thinkflow.errors import ThinkFlowError
from thinkflow.run import events as ev
from thinkflow.run import loop, planner
from thinkflow.run.context import RunContext, current_run
from thinkflow.tools.base import ToolResult
from thinkflow.tools.output import cap_text

TASK_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The task for the sub-agent, with every detail it needs (it sees nothing else).",
        },
    },
    "required": ["task"],
    "additionalProperties": False,
}
"""The arguments every sub-agent tool takes."""

BuildAgent = Callable[..., Any]
"""``build(spec, *, model, approver, on_progress, memory_dir, client) -> Agent`` (:func:`thinkflow.agent.build`)."""

MAX_OBSERVATION_BYTES = 16384
"""Cap on the sub-agent answer shown to the caller (head and tail kept around a marker)."""


@dataclass(frozen=True)
class _Level:
    """Where delegation stands in this thread: ``depth`` of the running agent (0 for the top agent), the absolute
    depth ``limit`` it may delegate to, and the chain of agent names from the top."""

    depth: int
    limit: int
    chain: tuple[str, ...]


_LEVEL: ContextVar[_Level | None] = ContextVar("thinkflow_delegation_level", default=None)


def current_depth() -> int:
    """The delegation depth of the agent running in this thread (0 for the top agent or outside a run)."""
    level = _LEVEL.get()
    return 0 if level is None else level.depth


class SubAgentTool:
    """A sub-agent as a tool (implements :class:`thinkflow.tools.base.Tool`).

    Args:
        ref: the sub-agent (tool ``name``, ``description``, resolved ``spec``).
        owner: the spec of the agent whose toolbox holds this tool (its ``name`` and ``max_depth``).
        build: builds the sub-agent from its spec, as :func:`thinkflow.agent.build` does (called with the spec and
            ``model``, ``approver``, ``on_progress``, ``memory_dir``, ``client`` keywords); passed in by the
            composition root, so the run engine never imports it.
        approver: approves ``confirm`` tool calls inside the sub-agent (the caller's approver), or None.
        on_progress: progress lines while the sub-agent's model is set up (embedded model), or None.
        memory_dir: base directory of long-term stores (as for :func:`thinkflow.agent.build`), or None.
        client: a model client to use instead of building one from the sub-agent's spec (tests), or None.
        model: a model string overriding the sub-agent's own (the run's ``--model``), or None.

    ``run({"task": ...})`` never raises for the sub-agent's faults: a run that does not complete, a depth limit or
    an agent that cannot be built comes back as an "error" ToolResult whose text says why (with the partial
    answer). Ctrl-C inside the sub-agent is re-raised as KeyboardInterrupt, so the whole run stops.
    ``data`` holds ``agent``, ``status``, ``run_id``, ``steps``, ``tool_calls``, ``usage`` and ``depth``.
    """

    parallel_safe = False
    """Sub-agent calls run one at a time in the caller's thread (their events nest in the caller's trace)."""

    def __init__(self, ref: SubAgentRef, owner: AgentSpec, *, build: BuildAgent, approver: Any = None,
                 on_progress: Callable[[str], None] | None = None, memory_dir: Any = None, client: Any = None,
                 model: str | None = None):
        self.ref = ref
        self.build = build
        self.model = model
        self.owner = owner
        self.approver = approver
        self.on_progress = on_progress
        self.memory_dir = memory_dir
        self.client = client
        sub = ref.spec
        description = ref.description or sub.description or f"Delegate a task to the agent '{sub.name}'."
        self.spec = ToolSpec(
            name=ref.name,
            description=description,
            kind="builtin",
            parameters=TASK_PARAMETERS,
            timeout=float(sub.loop.timeout) if sub.loop.timeout else 0.0,
            max_output=MAX_OBSERVATION_BYTES,
            source=sub.source,
        )
        self._agent: Any = None
        self._calls = 0
        self._lock = threading.Lock()

    def parameters(self) -> dict[str, Any]:
        """``{"task": string}``, required."""
        return TASK_PARAMETERS

    # ------------------------------------------------------------------------------------------------ build
    def _built(self) -> Any:
        """The sub-agent, built once on first use and reused (each call is a fresh run)."""
        if self._agent is None:
            self._agent = self.build(self.ref.spec, model=self.model, approver=self.approver,
                                on_progress=self.on_progress, memory_dir=self.memory_dir, client=self.client)
        return self._agent

    # ------------------------------------------------------------------------------------------------ run
    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the sub-agent on ``arguments["task"]``; its final answer is the observation."""
        task = str(arguments.get("task", "")).strip()
        if not task:
            return ToolResult("invalid", f"sub-agent '{self.ref.name}' needs a non-empty 'task'")
        outer = _LEVEL.get() or _Level(0, self.owner.max_depth, (self.owner.name,))
        limit = min(outer.limit, outer.depth + self.owner.max_depth)
        depth = outer.depth + 1
        chain = (*outer.chain, self.ref.name)
        if depth > limit:
            return ToolResult("error", (
                f"delegation depth limit reached: calling '{self.ref.name}' would nest {depth} levels deep "
                f"({' -> '.join(chain)}) but max_depth allows {limit}; do this part yourself"
            ), {"agent": self.ref.name, "depth": depth, "max_depth": limit})
        parent = current_run()
        try:
            agent = self._built()
        except ThinkFlowError as failure:
            return ToolResult("error", f"sub-agent '{self.ref.name}' could not be set up: {failure}",
                              {"agent": self.ref.name, "depth": depth})
        if parent is not None and parent.remaining_s is not None:
            agent = _with_timeout(agent, parent.remaining_s)
        with self._lock:
            self._calls += 1
            number = self._calls
        run_id = f"{parent.run_id}.{self.ref.name}.{number}" if parent is not None else None
        forward = _forwarder(parent, agent=self.ref.name, depth=depth) if parent is not None else None
        token = _LEVEL.set(_Level(depth, limit, chain))
        try:
            run = _runner(agent.spec)
            result = run(agent, task, on_event=forward, write_trace=False, stream=False,
                         budget=parent.budget if parent is not None else None, run_id=run_id)
        finally:
            _LEVEL.reset(token)
        if result.status == "interrupted":
            raise KeyboardInterrupt
        data = {
            "agent": self.ref.name, "status": result.status, "run_id": result.run_id, "steps": result.steps,
            "tool_calls": result.tool_calls, "usage": result.usage.to_dict(), "depth": depth,
        }
        if result.completed:
            return ToolResult("ok", _cap(result.answer) if result.answer.strip() else "(no answer)", data)
        partial = f" Partial answer: {result.answer}" if result.answer.strip() else ""
        return ToolResult("error", _cap(
            f"sub-agent '{self.ref.name}' did not finish ({result.status}: {result.error}).{partial}"), data)


def _runner(spec: AgentSpec) -> Callable[..., Any]:
    return planner.run if spec.planner.enabled else loop.run


def _with_timeout(agent: Any, remaining_s: float) -> Any:
    """``agent`` whose loop timeout is at most ``remaining_s`` seconds (the caller's time left)."""
    loop = agent.spec.loop
    timeout = max(remaining_s, 0.001)
    if loop.timeout is not None and loop.timeout <= timeout:
        return agent
    spec = dataclasses.replace(agent.spec, loop=dataclasses.replace(loop, timeout=timeout))
    return dataclasses.replace(agent, spec=spec)


def _forwarder(parent: RunContext, *, agent: str, depth: int) -> Callable[[ev.Event], None]:
    """An ``on_event`` for the sub-run that nests its events in the parent's (already nested ones pass as they
    are; streamed text is dropped)."""

    def forward(event: ev.Event) -> None:
        if isinstance(event, ev.SubAgentEvent):
            parent.emit(event)
            return
        if not event.traced:
            return
        parent.emit(ev.SubAgentEvent(agent=agent, depth=depth, parent_agent=parent.agent, parent_step=parent.step,
                                     event=event.to_dict()))

    return forward


def _cap(text: str) -> str:
    return cap_text(text, MAX_OBSERVATION_BYTES)[0]


def add_subagents(toolbox: Any, spec: AgentSpec, *, build: BuildAgent, approver: Any = None,
                  on_progress: Callable[[str], None] | None = None, memory_dir: Any = None,
                  model: str | None = None, client: Any = None) -> None:
    """Add a :class:`SubAgentTool` to ``toolbox`` for each of ``spec.agents`` (in order); ``model`` (the run's
    ``--model``) overrides every sub-agent's model; ``client``, when given, answers for every sub-agent too (a
    cassette replaying one run's model calls in order); ``build`` builds each sub-agent on its first call."""
    for ref in spec.agents:
        toolbox.add(SubAgentTool(ref, spec, build=build, approver=approver, on_progress=on_progress,
                                 memory_dir=memory_dir, model=model, client=client))
