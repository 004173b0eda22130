"""The agents a server offers: every agent file under the given paths, validated, loaded and built once at start.

:func:`load_catalog` checks the paths exactly as ``thinkflow validate`` does and refuses (SpecError with the same
issues) when anything is invalid, so a server never starts half-configured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from thinkflow.config.spec import AgentSpec
from thinkflow.errors import ConfigIssue, SpecError


@dataclass
class ServedAgent:
    """One agent the server runs.

    Attributes:
        name: the agent's name (unique in the catalog; the URL path element and the OpenAI model name).
        spec: the loaded spec.
        agent: the built agent (:class:`thinkflow.agent.Agent`), shared by its runs (each run gets its own model
            client wrapper and, with vars, its own spec).
        path: the agent's YAML file.
    """

    name: str
    spec: AgentSpec
    agent: Any
    path: Path

    def describe(self) -> dict[str, Any]:
        """``{"name", "description", "model", "tools": [{"name", "description"}], "path"}`` for clients."""
        tools = []
        try:
            described = self.agent.toolbox.describe()
        except Exception:  # noqa: BLE001 - a listing must not fail on one tool
            described = []
        for d in described:
            tools.append({"name": d.get("name", ""), "description": d.get("description", "")})
        return {
            "name": self.name,
            "description": self.spec.description,
            "model": str(getattr(self.agent.client, "model", "") or self.spec.model.name or ""),
            "tools": tools,
            "path": str(self.path),
        }


class Catalog:
    """The served agents by name. ``catalog[name]`` raises KeyError for an unknown agent."""

    def __init__(self, agents: Iterable[ServedAgent]):
        self.agents: dict[str, ServedAgent] = {a.name: a for a in agents}

    def __getitem__(self, name: str) -> ServedAgent:
        return self.agents[name]

    def __contains__(self, name: object) -> bool:
        return name in self.agents

    def __iter__(self):
        return iter(self.agents.values())

    def __len__(self) -> int:
        return len(self.agents)

    def names(self) -> list[str]:
        """Agent names, sorted."""
        return sorted(self.agents)


def load_catalog(paths: Iterable[str | os.PathLike[str]], *, approver: Any = None, builder: Any = None,
                 warm: bool = True) -> Catalog:
    """Validate every file under ``paths`` (as ``thinkflow validate``), then load and build each agent file.

    Args:
        paths: agent files or directories (tool files among them are validated, not served).
        approver: the approver for ``confirm`` tools (None denies them); see :mod:`thinkflow.tools.approval`.
        builder: ``build(spec, approver=...) -> Agent`` (default :func:`thinkflow.agent.build`; tests).
        warm: import LiteLLM now, so the first run does not wait for it.
    Returns:
        The catalog (possibly empty when the paths hold no agent).
    Raises:
        SpecError: any file is invalid (the issues ``validate`` reports), or two agents share a name.
        ToolError, PromptError, MemoryStoreError, ModelError: an agent cannot be built.
    """
    from thinkflow.config.loader import load_agent
    from thinkflow.config.validation import config_kind, validate_paths

    if builder is None:
        from thinkflow.agent import build as builder
    issues, files = validate_paths(list(paths))
    if issues:
        raise SpecError(issues)
    served: dict[str, ServedAgent] = {}
    for path in files:
        if config_kind(path) != "agent":
            continue
        spec = load_agent(path)
        if spec.name in served:
            raise SpecError([ConfigIssue(str(path), 1, 1, "name",
                                         f"agent name {spec.name!r} is also used by {served[spec.name].path}",
                                         "give each served agent its own name")])
        served[spec.name] = ServedAgent(spec.name, spec, builder(spec, approver=approver), Path(path))
    if served and warm:
        from thinkflow.model.providers import load_litellm

        load_litellm()  # seconds of imports: paid at start, not by the first request
    return Catalog(served.values())
