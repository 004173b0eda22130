"""Builders: validated config dicts -> the frozen specs of :mod:`thinkflow.config.spec`.

The dicts passed in have already been checked against the schemas (:mod:`thinkflow.config.schemas`); the builders only
apply defaults (which live in the dataclasses), convert lists to tuples and resolve relative paths against
``base_dir`` (the spec file's folder).
"""

from __future__ import annotations

import shlex
from dataclasses import fields
from pathlib import Path
from typing import Any

from thinkflow.config.locate import config_path, expand_user
from thinkflow.config.spec import (
    AgentSpec,
    HttpRequestSpec,
    LongTermSpec,
    LoopSpec,
    MemorySpec,
    ModelSpec,
    PlannerSpec,
    TelemetrySpec,
    PromptSpec,
    RecallSpec,
    RetentionSpec,
    ShortTermSpec,
    SubAgentRef,
    ToolRef,
    ToolSpec,
)


def _path(value: str | None, base_dir: Path | None) -> Path | None:
    if value is None:
        return None
    return expand_user(value) if base_dir is None else config_path(value, base_dir)


def _build(cls: type, value: dict[str, Any], convert: dict[str, Any] | None = None, **resolved: Any) -> Any:
    """``cls(**kwargs)`` from the keys present in ``value`` (defaults live only in the dataclass), each passed through
    its ``convert`` function when one is given; ``resolved`` values (already built by the caller) win."""
    convert = convert or {}
    names = {f.name for f in fields(cls)}
    kwargs = {k: convert.get(k, _same)(v) for k, v in value.items() if k in names and k not in resolved}
    return cls(**kwargs, **resolved)


def _same(value: Any) -> Any:
    return value


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def model_from_dict(value: str | dict[str, Any] | None) -> ModelSpec:
    """A ModelSpec from a model string, a model mapping or None (the default model)."""
    if value is None:
        return ModelSpec()
    if isinstance(value, str):
        return ModelSpec(name=value)
    return _build(ModelSpec, value, {"timeout": float, "fallbacks": tuple, "stop": tuple, "extra": dict,
                                     "cache": _cache})


def _cache(value: Any) -> dict[str, Any] | None:
    """``model.cache``: False -> None, True -> ``{"type": "disk"}``, a mapping -> with ``type`` defaulted."""
    if value is True:
        return {"type": "disk"}
    if not value:
        return None
    return {"type": "disk", **dict(value)}


def prompt_from_dict(value: dict[str, Any] | None, *, system: Path | None = None) -> PromptSpec:
    """A PromptSpec; ``system`` is the template path already resolved by the loader (or None)."""
    return _build(PromptSpec, value or {}, {"vars": dict}, system=system)


def loop_from_dict(value: dict[str, Any] | None) -> LoopSpec:
    """A LoopSpec from the ``loop`` mapping (or None for defaults)."""
    return _build(LoopSpec, value or {}, {"timeout": _float_or_none})


def memory_from_dict(value: dict[str, Any] | None, *, base_dir: Path | None = None) -> MemorySpec:
    """A MemorySpec from the ``memory`` mapping; ``long_term.path`` resolves against ``base_dir``."""
    value = value or {}
    short_term = _build(ShortTermSpec, value.get("short_term") or {})
    long = value.get("long_term")
    if long is None:
        return MemorySpec(short_term=short_term)
    long_term = _build(
        LongTermSpec,
        long,
        {"remember": tuple, "remember_tools": tuple},
        path=_path(long.get("path"), base_dir),
        recall=_build(RecallSpec, long.get("recall") or {}, {"min_score": float}),
        retention=_build(RetentionSpec, long.get("retention") or {}),
    )
    return MemorySpec(short_term=short_term, long_term=long_term)


def telemetry_from_dict(value: dict[str, Any] | None) -> TelemetrySpec:
    """A TelemetrySpec from the ``telemetry`` mapping (or None for off)."""
    return _build(TelemetrySpec, value or {}, {"headers": dict})


def planner_from_dict(value: dict[str, Any] | None) -> PlannerSpec:
    """A PlannerSpec from the ``planner`` mapping (or None for defaults)."""
    return _build(PlannerSpec, value or {})


def _patterns(rules: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {arg: tuple(patterns) for arg, patterns in rules.items()}


def tool_ref_from_dict(value: str | dict[str, Any]) -> ToolRef:
    """A ToolRef from a tool name or a ``{name, confirm, allow, deny}`` mapping."""
    if isinstance(value, str):
        return ToolRef(name=value)
    return _build(ToolRef, value, {"allow": _patterns, "deny": _patterns})


def _server_tools(items: list[str | dict[str, Any]]) -> tuple[ToolRef, ...]:
    return tuple(tool_ref_from_dict(item) for item in items)


def tool_from_dict(
    value: dict[str, Any], *, source: Path | None = None, base_dir: Path | None = None, secrets: tuple[str, ...] = ()
) -> ToolSpec:
    """A ToolSpec from a validated tool document. A shell ``command`` string is split with ``shlex`` (kept whole
    as the script when ``shell: true``, so its quoting survives); ``cwd`` resolves against ``base_dir``; an mcp
    tool's ``tools`` entries become ToolRefs.

    Raises:
        ValueError: a shell command string that ``shlex`` cannot split (unbalanced quotes).
    """
    command = value.get("command", ())
    if isinstance(command, str):
        command = (command,) if value.get("shell") else shlex.split(command)
    request = value.get("request")
    return _build(
        ToolSpec,
        value,
        {"timeout": float, "env": dict, "env_allow": tuple, "allow_hosts": tuple, "headers": dict,
         "startup_timeout": float, "tools": _server_tools},
        command=tuple(command),
        source=source,
        secrets=tuple(secrets),
        cwd=_path(value.get("cwd"), base_dir),
        response_json_path=(value.get("response") or {}).get("json_path"),
        request=None if request is None else _build(
            HttpRequestSpec, request, {"method": str.upper, "params": dict, "headers": dict}
        ),
    )


def agent_from_dict(
    value: dict[str, Any],
    *,
    source: Path | None = None,
    base_dir: Path | None = None,
    prompt: PromptSpec | None = None,
    tool_specs: dict[str, ToolSpec] | None = None,
    agents: tuple[SubAgentRef, ...] = (),
    secrets: tuple[str, ...] = (),
) -> AgentSpec:
    """An AgentSpec from a validated agent document.

    The loader resolves what needs the file system and passes it in: ``prompt`` (with the template path found),
    ``tool_specs`` (every named tool, by name) and ``agents`` (sub-agents, loaded recursively). ``workspace`` and
    ``memory.long_term.path`` resolve against ``base_dir``.
    """
    return _build(
        AgentSpec,
        value,
        {"output_schema": _same},
        model=model_from_dict(value.get("model")),
        prompt=prompt if prompt is not None else prompt_from_dict(value.get("prompt")),
        tools=tuple(tool_ref_from_dict(item) for item in value.get("tools", ())),
        tool_specs=dict(tool_specs or {}),
        workspace=_path(value.get("workspace", "."), base_dir) or Path("."),
        memory=memory_from_dict(value.get("memory"), base_dir=base_dir),
        loop=loop_from_dict(value.get("loop")),
        planner=planner_from_dict(value.get("planner")),
        telemetry=telemetry_from_dict(value.get("telemetry")),
        agents=tuple(agents),
        source=source,
        secrets=tuple(secrets),
        tool_paths=tuple(_path(p, base_dir) for p in value.get("tool_paths", ())),
    )
