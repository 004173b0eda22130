"""Which variables a prompt template reads: the config check that every one of them is provided.

The runner always provides :data:`RUNTIME_PROMPT_VARS`; every other variable a template reads must come from the
agent's ``prompt.vars``. The loader checks this with Jinja's static analysis (:func:`template_variables`), which
only parses the template; rendering (sandboxed) is :mod:`thinkflow.prompting.templates`' job.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any, Callable

from thinkflow.errors import PromptError

RUNTIME_PROMPT_VARS = frozenset({"tools", "memories", "agent_name", "task"})
"""Variables the runner passes to every agent prompt: the tool list, recalled memories, the agent's name, the task.
Their values replace ``prompt.vars`` of the same name, so the loader refuses those names there."""

RUNTIME_PROMPT_VAR_MEANINGS = {"task": "the run's task", "tools": "the tools the model may call",
                               "memories": "the memories recalled for the task", "agent_name": "the agent's name"}
"""What the runner passes under each name of :data:`RUNTIME_PROMPT_VARS` (for messages)."""

JINJA_CONSTANTS = {"true": "True", "True": "True", "false": "False", "False": "False", "none": "None",
                   "None": "None"}
"""Names Jinja's parser reads as constants (name -> the constant): ``{{ true }}`` is True whatever the variables,
so a prompt variable of that name can never be read and the loader refuses it (``null`` is not among them: Jinja
reads it as a variable)."""

TEMPLATE_NAME = "<template>"
"""The name a template without a file goes by in messages."""


def syntax_error(exc: Any, name: str) -> PromptError:
    """A ``jinja2.TemplateSyntaxError`` as ``PromptError("<name>:<line>: template syntax error: <message>")``."""
    return PromptError(f"{name}:{exc.lineno}: template syntax error: {exc.message}")


@cache
def _parser() -> Any:
    from jinja2.sandbox import SandboxedEnvironment  # only parses here; prompting/ renders in its own sandbox

    return SandboxedEnvironment(autoescape=False, keep_trailing_newline=True)


def template_variables(source: str, *, name: str = TEMPLATE_NAME) -> set[str]:
    """Names the template reads but does not define itself (``jinja2.meta.find_undeclared_variables``).

    Raises:
        PromptError: on a syntax error, as ``"<name>:<line>: template syntax error: <message>"``.
    """
    return set(_undeclared(source, name))


@lru_cache(maxsize=256)
def _undeclared(source: str, name: str) -> frozenset[str]:
    from jinja2 import TemplateSyntaxError, meta

    try:
        ast = _parser().parse(source)
        return frozenset(meta.find_undeclared_variables(ast))  # its code generator checks filter names too
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, name) from None


def optional_variables(source: str, *, name: str = TEMPLATE_NAME) -> set[str]:
    """Names the template guards itself -- read through ``| default(...)`` (or ``| d``), or tested with
    ``is defined`` / ``is undefined`` -- so they may be left out of ``prompt.vars``.

    Raises:
        PromptError: on a syntax error (as :func:`template_variables`).
    """
    return set(_guarded(source, name))


@lru_cache(maxsize=256)
def _guarded(source: str, name: str) -> frozenset[str]:
    from jinja2 import TemplateSyntaxError, nodes

    try:
        ast = _parser().parse(source)
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, name) from None
    found = set()
    for node in ast.find_all((nodes.Filter, nodes.Test)):
        guard = ("default", "d") if isinstance(node, nodes.Filter) else ("defined", "undefined")
        if node.name in guard and isinstance(node.node, nodes.Name):
            found.add(node.node.name)
    return frozenset(found)


PLACEHOLDER_MEMORY = {"id": "memory-1", "content": "(a recalled memory)", "score": 0.9, "kind": "user_fact",
                      "time": "2026-01-01T00:00:00+00:00", "metadata": {}}
"""A memory shaped like those the runner passes (``thinkflow.memory.format_memories``), for validate."""


def placeholder_runtimes(agent_name: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runtime variables ``thinkflow validate`` renders an agent's prompt with: the agent's real tool list
    (``[{"name", "description", "parameters"}]``), its name, a placeholder task, and once no memories and once one
    placeholder memory (so templates are rendered down both branches of ``{% if memories %}``)."""
    base = {"tools": tools, "agent_name": agent_name, "task": "(the task)"}
    return [{**base, "memories": []}, {**base, "memories": [dict(PLACEHOLDER_MEMORY)]}]



_RENDERERS: list[Callable[..., str]] = []


def use_renderer(render: Callable[..., str]) -> None:
    """Give the loader the sandboxed renderer (``render(source, variables, name=...)`` raising PromptError), so
    that loading and ``thinkflow validate`` render each agent's prompt as a run would. The prompting layer
    registers :func:`thinkflow.prompting.templates.render` when imported (config may not import it)."""
    _RENDERERS[:] = [render]


def renderer() -> Callable[..., str] | None:
    """The registered renderer, or None (then only the static checks run)."""
    return _RENDERERS[0] if _RENDERERS else None
