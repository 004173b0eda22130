"""Which variables a prompt template reads: the config check that every one of them is provided.

The runner always provides :data:`RUNTIME_PROMPT_VARS`; every other variable a template reads must come from the
agent's ``prompt.vars``. The loader checks this with Jinja's static analysis (:func:`template_variables`), which
only parses the template; rendering (sandboxed) is :mod:`thinkflow.prompting.templates`' job.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

from thinkflow.errors import PromptError

RUNTIME_PROMPT_VARS = frozenset({"tools", "memories", "agent_name", "task"})
"""Variables the runner passes to every agent prompt: the tool list, recalled memories, the agent's name, the task."""

TEMPLATE_NAME = "<template>"
"""The name a template without a file goes by in messages."""


def syntax_error(exc: Any, name: str) -> PromptError:
    """A ``jinja2.TemplateSyntaxError`` as ``PromptError("<name>:<line>: template syntax error: <message>")``."""
    return PromptError(f"{name}:{exc.lineno}: template syntax error: {exc.message}")


@cache
def _parser() -> Any:
    from jinja2 import Environment  # the parser only: the sandbox changes rendering, not the syntax

    return Environment(autoescape=False, keep_trailing_newline=True)


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
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, name) from None
    return frozenset(meta.find_undeclared_variables(ast))
