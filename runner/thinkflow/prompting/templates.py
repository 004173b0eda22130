"""System prompt templates: a sandboxed Jinja environment with strict undefined variables.

Templates are rendered once, in ``jinja2.sandbox.SandboxedEnvironment`` with ``StrictUndefined`` (an undefined
variable is an error, not an empty string), autoescape off and the trailing newline kept. Variable values are
data: they are inserted as text and never rendered as templates themselves.

The runner always provides :data:`RUNTIME_PROMPT_VARS`; every other variable a template uses must come from the
agent's ``prompt.vars`` (the loader checks this with Jinja's static analysis, :func:`template_variables`).
"""

from __future__ import annotations

import sys
from functools import cache, lru_cache
from typing import Any

from thinkflow.errors import PromptError
from thinkflow.text import did_you_mean
from thinkflow.config.prompt_vars import RUNTIME_PROMPT_VARS, TEMPLATE_NAME, syntax_error, template_variables
from thinkflow.config.spec import PromptSpec

__all__ = ["RUNTIME_PROMPT_VARS", "check_prompt_vars", "environment", "render", "render_agent_prompt",
           "prompt_variables", "render_builtin", "template_variables"]

_NAME = TEMPLATE_NAME


@cache
def environment() -> Any:
    """The shared sandboxed Jinja environment (StrictUndefined, no autoescape, trailing newline kept)."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


def prompt_variables(prompt: PromptSpec) -> set[str]:
    """The variables an agent's prompt takes from outside: declared under ``prompt.vars`` or read by its template
    (runtime variables excluded).

    Raises:
        PromptError: the template cannot be read or parsed.
    """
    source, name = _agent_template(prompt)
    return (template_variables(source, name=name) | set(prompt.vars)) - RUNTIME_PROMPT_VARS


def check_prompt_vars(prompt: PromptSpec, names: Any) -> None:
    """Check that every name in ``names`` (the ``--var key=value`` keys) is a variable of the agent's prompt:
    declared under ``prompt.vars`` or read by the template (:func:`template_variables`; a variable read only by an
    included template must be declared under ``prompt.vars``).

    Raises:
        PromptError: a name the prompt does not use, with the variables it does use (and a did-you-mean), or the
            template cannot be read or parsed.
    """
    known = prompt_variables(prompt)
    name = _agent_template(prompt)[1]
    for key in names:
        if key not in known:
            uses = f"it uses {', '.join(sorted(known))}" if known else "it uses no variables"
            hint = did_you_mean(key, sorted(known))
            raise PromptError(f"--var {key}: the agent's prompt ({name}) has no variable {key!r}; {uses}"
                              + (f" ({hint})" if hint else ""))


def _template_line(tb: Any) -> int:
    line = 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _NAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


@lru_cache(maxsize=64)
def _compiled(source: str, name: str) -> Any:
    """``source`` compiled once per process (a run renders its prompts at every step)."""
    from jinja2 import TemplateSyntaxError

    try:
        return environment().from_string(source)
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, name) from None


def render(source: str, variables: dict[str, Any], *, name: str = _NAME) -> str:
    """Render ``source`` once with ``variables``.

    Raises:
        PromptError: syntax error, undefined variable or a sandbox violation, as ``"<name>:<line>: <message>"``.
    """
    from jinja2 import TemplateError

    template = _compiled(source, name)
    try:
        return template.render(**variables)
    except TemplateError as exc:
        line = _template_line(sys.exc_info()[2])
        raise PromptError(f"{name}:{line}: {exc.message or exc}") from None


def render_agent_prompt(prompt: PromptSpec, runtime: dict[str, Any]) -> str:
    """Render the agent's own template (``prompt.system`` file or ``prompt.text``) with ``prompt.vars`` and the
    runtime variables (runtime wins on a clash). An agent with no template renders to ``""``.

    Raises:
        PromptError: the file cannot be read, or rendering fails.
    """
    if prompt.system is None and prompt.text is None:
        return ""
    source, name = _agent_template(prompt)
    return render(source, {**prompt.vars, **runtime}, name=name)


def _agent_template(prompt: PromptSpec) -> tuple[str, str]:
    """(source, name) of the agent's template: the ``prompt.system`` file, else ``prompt.text`` ("" if none)."""
    if prompt.system is None:
        return prompt.text or "", "prompt.text"
    try:
        return prompt.system.read_text(encoding="utf-8"), str(prompt.system)
    except OSError as exc:
        raise PromptError(f"cannot read prompt template {prompt.system}: {exc.strerror or exc}") from None


def render_builtin(name: str, variables: dict[str, Any]) -> str:
    """Render the built-in template ``<name>.j2`` shipped in ``thinkflow/prompts``.

    Raises:
        PromptError: no such template, or rendering fails.
    """
    from importlib.resources import files

    resource = files("thinkflow.prompting") / "builtin" / f"{name}.j2"
    try:
        source = resource.read_text(encoding="utf-8")
    except (OSError, FileNotFoundError):
        raise PromptError(f"no built-in prompt template {name!r}") from None
    return render(source, variables, name=f"{name}.j2")
