"""Assemble a runnable agent from its spec: model client, toolbox, prompt variables and memory.

``build(spec)`` does everything that can fail before a run starts (unknown tool entry point, unreachable memory
store), so that the loop itself only meets the faults of a run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from thinkflow.config.spec import AgentSpec, ModelSpec
from thinkflow.memory.longterm import LongTermMemory
from thinkflow.memory.policy import RememberFactTool
from thinkflow.memory.shortterm import ShortTermMemory
from thinkflow.model.client import ModelClient, build_client, call_limit_of
from thinkflow.model.resolution import resolve_model
from thinkflow.model.messages import Message
from thinkflow.prompting.templates import check_prompt_vars
from thinkflow.text import valid_unicode
from thinkflow.run.collaborators import LongTerm, ShortTerm
from thinkflow.run.collaborators import Toolbox as ToolboxPort
from thinkflow.run.delegation import add_subagents
from thinkflow.tools.approval import Approver
from thinkflow.tools.toolbox import Toolbox

SUMMARY_INSTRUCTION = (
    "Summarize the conversation below for the assistant that will continue it. Keep every fact, number, name, "
    "file, decision and open question; drop small talk. Write at most 10 short sentences."
)


@dataclass
class Agent:
    """A runnable agent.

    Attributes:
        spec: the agent's spec (with ``--var`` values merged into ``prompt.vars``).
        client: the model client (``complete``, ``capabilities``, ``count_tokens``, ``model``).
        toolbox: the agent's tools (plus ``remember_fact`` when long-term memory keeps user facts).
        short_term: the short-term memory policy (a ``thinkflow.memory.ShortTermMemory``).
        long_term: the long-term store (``thinkflow.memory.LongTermMemory``), or None when none is declared.
        notice: the one-line note from model resolution ("using the embedded local model ..."), or None.
        secrets: every secret value to redact from traces (agent, tool and model secrets, the API key).
    """

    spec: AgentSpec
    client: ModelClient
    toolbox: ToolboxPort
    short_term: ShortTerm | None
    long_term: LongTerm | None = None
    notice: str | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.spec.name


def agent_secrets(spec: AgentSpec, model: ModelSpec | None = None) -> tuple[str, ...]:
    """All secret values of an agent: its own, its tools', its model's API key (and a resolved model's key),
    sub-agents' included, and the environment's credentials (:func:`thinkflow.redaction.environment_secrets`)."""
    from thinkflow.redaction import environment_secrets

    values: list[str] = list(spec.secrets)
    for tool in spec.tool_specs.values():
        values.extend(tool.secrets)
    for m in (spec.model, model):
        if m is not None and m.api_key:
            values.append(m.api_key)
    for sub in spec.agents:
        values.extend(agent_secrets(sub.spec))
    values.extend(environment_secrets())
    return tuple(dict.fromkeys(v for v in values if v))


def with_prompt_vars(spec: AgentSpec, prompt_vars: dict[str, Any] | None, *,
                     task_from: str = "the command's argument", given_as: str = "--var ") -> AgentSpec:
    """``spec`` with ``prompt_vars`` merged over ``prompt.vars`` (the ``--var key=value`` options, or a request's
    ``vars``: ``given_as`` is how the message names a key's place, ``"--var "`` or ``"vars."``).

    Raises:
        PromptError: a key the agent's prompt does not use, or one the runner sets (``task``: the message says to
            give the task as ``task_from``; see :func:`thinkflow.prompting.templates.check_prompt_vars`).
    """
    if not prompt_vars:
        return spec
    check_prompt_vars(spec.prompt, prompt_vars, task_from=task_from, given_as=given_as)
    given = {k: valid_unicode(v) if isinstance(v, str) else v for k, v in prompt_vars.items()}  # argv's bad bytes
    prompt = dataclasses.replace(spec.prompt, vars={**spec.prompt.vars, **given})
    return dataclasses.replace(spec, prompt=prompt)


class Summarizer:
    """``summarize(messages) -> str`` for short-term memory: one call of ``client`` over a plain transcript.

    Args:
        client: the model that writes the summary (``memory.short_term.summary_model``, else the agent's).
    """

    def __init__(self, client: ModelClient):
        self.client = client

    def __call__(self, messages: Sequence[Message]) -> str:
        lines = []
        for m in messages:
            text = m.content
            if m.tool_calls:
                calls = "; ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
                text = f"{text}\n[called {calls}]".strip()
            lines.append(f"{m.role}: {text}")
        request = [Message("system", SUMMARY_INSTRUCTION), Message("user", "\n\n".join(lines))]
        return self.client.complete(request).text

    def call_limit(self) -> float | None:
        """The most seconds one summary may take (the client's ``call_limit()``), or None when it has none."""
        return call_limit_of(self.client)


def build(
    spec: AgentSpec,
    *,
    model: str | None = None,
    approver: Approver | None = None,
    on_progress: Callable[[str], None] | None = None,
    prompt_vars: dict[str, Any] | None = None,
    memory_dir: Path | None = None,
    client: ModelClient | None = None,
    share_client: bool = False,
) -> Agent:
    """Build the agent ``spec`` describes. Each of ``spec.agents`` becomes a tool taking a ``task``
    (:class:`thinkflow.run.delegation.SubAgentTool`; the sub-agent itself is built on its first call).

    Args:
        spec: the loaded agent.
        model: a model string overriding ``spec.model.name`` for this run (``--model``), its sub-agents' too; or
            None.
        approver: ``(tool_spec, arguments) -> bool`` for ``confirm`` tools; None denies them.
        on_progress: receives progress lines while the embedded local model is assembled and loaded.
        prompt_vars: extra template variables (``--var``), merged over ``prompt.vars``.
        memory_dir: base directory of the embedded long-term store (default: the current directory).
        client: a ready model client to use instead of building one (tests, sub-agents).
        share_client: the sub-agents use ``client`` too (``thinkflow test``: one cassette answers the whole run).
    Raises:
        ToolError: a tool cannot be built. MemoryStoreError: the long-term store cannot be opened.
        ModelError: the model cannot be set up (e.g. the embedded model's files are missing).
    """
    spec = with_prompt_vars(spec, prompt_vars)
    notice = None
    resolved = None
    if client is None:
        resolved, notice = resolve_model(spec.model, override=model)
        client = build_client(spec.model, override=model, on_progress=on_progress)
    toolbox = Toolbox.from_agent(spec, approver=approver)  # the prompt's data file: its columns become enums
    if spec.agents:
        add_subagents(toolbox, spec, build=build, approver=approver, on_progress=on_progress,
                      memory_dir=memory_dir, model=model, client=client if share_client else None)

    summary_client = client
    st = spec.memory.short_term
    if st.summarize_after is not None and st.summary_model:
        summary_client = build_client(dataclasses.replace(spec.model, name=st.summary_model, fallbacks=()))
    short_term = ShortTermMemory(
        st,
        count_tokens=getattr(client, "count_tokens", None),
        summarize=Summarizer(summary_client) if st.summarize_after is not None else None,
    )

    long_term = None
    lt = spec.memory.long_term
    if lt is not None:
        long_term = LongTermMemory.open(lt, base_dir=memory_dir, secrets=agent_secrets(spec, resolved))
        if "user_facts" in lt.remember and "remember_fact" not in toolbox:
            toolbox.add(RememberFactTool(long_term, agent=spec.name))
    return Agent(
        spec=spec,
        client=client,
        toolbox=toolbox,
        short_term=short_term,
        long_term=long_term,
        notice=notice,
        secrets=agent_secrets(spec, resolved),
    )
