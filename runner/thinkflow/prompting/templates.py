"""System prompt templates: a sandboxed Jinja environment with strict undefined variables and bounded rendering.

Templates are rendered once, in a ``jinja2.sandbox.SandboxedEnvironment`` with ``StrictUndefined`` (an undefined
variable is an error, not an empty string), autoescape off and the trailing newline kept. Variable values are
data: they are inserted as text and never rendered as templates themselves.

Rendering is bounded: all ``{% for %}`` loops of one render share a budget of :data:`MAX_LOOP_ITERATIONS`
iterations (nested loops multiply, the budget does not), ``range()`` gives at most :data:`MAX_RANGE` numbers,
``*`` may not build a string or list longer than :data:`MAX_OUTPUT_CHARS` nor ``**`` an integer over
:data:`MAX_INT_BITS` bits, and the output stops at :data:`MAX_OUTPUT_CHARS` characters. Every failure -- a
syntax error, an undefined variable, a sandbox violation, a limit, any Python error inside the template
(``1/0``, a recursion) -- is a :class:`~thinkflow.errors.PromptError` ``"<template>:<line>: <message>"``.

The runner always provides :data:`RUNTIME_PROMPT_VARS`; every other variable a template uses must come from the
agent's ``prompt.vars`` (the loader checks this with Jinja's static analysis, :func:`template_variables`).
"""

from __future__ import annotations

import contextvars
import sys
from functools import cache, lru_cache
from typing import Any, Callable, Iterable, Iterator

from thinkflow.errors import PromptError
from thinkflow.text import did_you_mean
from thinkflow.config.prompt_vars import RUNTIME_PROMPT_VAR_MEANINGS, RUNTIME_PROMPT_VARS, TEMPLATE_NAME, \
    syntax_error, template_variables, use_renderer
from thinkflow.config.spec import PromptSpec

__all__ = ["RUNTIME_PROMPT_VARS", "check_prompt_vars", "environment", "prompt_var_checker", "render",
           "render_agent_prompt", "prompt_variables", "render_builtin", "template_variables"]

_NAME = TEMPLATE_NAME

MAX_LOOP_ITERATIONS = 100_000
"""Iterations of all ``{% for %}`` loops of one render together."""
MAX_RANGE = 100_000
"""Numbers one ``range()`` may give."""
MAX_OUTPUT_CHARS = 1_000_000
"""Characters one render may produce (also the longest string or list ``*`` may build)."""
MAX_INT_BITS = 4096
"""Bits of an integer ``**`` may produce."""

_BUDGET: contextvars.ContextVar[list[int]] = contextvars.ContextVar("thinkflow_prompt_loop_budget")


def _limit(message: str) -> Exception:
    from jinja2.exceptions import SecurityError

    return SecurityError(message)


def bounded_iter(iterable: Iterable[Any]) -> Iterator[Any]:
    """``iterable``, charging each item to the current render's loop budget (every ``{% for %}`` goes through
    this). Raises SecurityError when the budget is spent."""
    budget = _BUDGET.get(None)
    if budget is None:
        budget = [MAX_LOOP_ITERATIONS]
    for item in iterable:
        budget[0] -= 1
        if budget[0] < 0:
            raise _limit(f"the template's loops ran more than {MAX_LOOP_ITERATIONS} iterations")
        yield item


def _range(*args: Any) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise _limit(f"range() of {len(numbers)} numbers is longer than the limit of {MAX_RANGE}")
    return numbers


def _sized(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


@cache
def environment() -> Any:
    """The shared sandboxed Jinja environment (StrictUndefined, no autoescape, trailing newline kept), with the
    loop budget on every ``for``, a bounded ``range`` and checked ``*`` and ``**``."""
    from jinja2 import StrictUndefined, nodes
    from jinja2.sandbox import SandboxedEnvironment

    class BoundedEnvironment(SandboxedEnvironment):  # type: ignore[misc]
        intercepted_binops = frozenset({"*", "**"})

        def _parse(self, source: str, name: str | None, filename: str | None) -> Any:
            tree = super()._parse(source, name, filename)
            for loop in tree.find_all(nodes.For):
                loop.iter = nodes.Call(nodes.EnvironmentAttribute("bounded_iter"), [loop.iter], [], None, None,
                                       lineno=loop.lineno)
            return tree

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "*":
                for seq, times in ((left, right), (right, left)):
                    if _sized(seq) and isinstance(times, int) and _sized(seq) * times > MAX_OUTPUT_CHARS:
                        raise _limit(f"'*' would build {_sized(seq) * times} items (limit {MAX_OUTPUT_CHARS})")
                if isinstance(left, int) and isinstance(right, int) and \
                        left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
                    raise _limit(f"'*' would build an integer over {MAX_INT_BITS} bits")
            if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
                if left.bit_length() * right > MAX_INT_BITS + 64:
                    raise _limit(f"'**' would build an integer over {MAX_INT_BITS} bits")
            return super().call_binop(context, operator, left, right)

    env = BoundedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.bounded_iter = bounded_iter
    env.globals["range"] = _range
    env.filters = {name: _bounded_filter(name, f) for name, f in env.filters.items()}
    return env


def _bounded_filter(name: str, func: Any) -> Any:
    """``func`` refusing integer arguments (widths, lengths, counts) above :data:`MAX_OUTPUT_CHARS`, so
    ``center(10**9)`` fails before it builds a gigabyte of spaces."""
    import functools

    first = 2 if getattr(func, "jinja_pass_arg", None) is not None else 1  # the context, then the filtered value

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for value in (*args[first:], *kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_OUTPUT_CHARS:
                raise _limit(f"filter '{name}' got {value}, over the limit of {MAX_OUTPUT_CHARS}")
        return func(*args, **kwargs)

    return checked


def prompt_variables(prompt: PromptSpec) -> set[str]:
    """The variables an agent's prompt takes from outside: declared under ``prompt.vars`` or read by its template
    (runtime variables excluded).

    Raises:
        PromptError: the template cannot be read or parsed.
    """
    source, name = _agent_template(prompt)
    return (template_variables(source, name=name) | set(prompt.vars)) - RUNTIME_PROMPT_VARS


RUNNER_SET_FIXES = {"tools": "the agent's tools list decides it", "memories": "memory.long_term recalls them",
                    "agent_name": "it is the agent's name"}
"""What decides each runner-set variable but ``task`` (whose fix names where the task is given), for messages."""


def prompt_var_checker(prompt: PromptSpec, *, task_from: str = "the command's argument") -> Callable[[str], str]:
    """A function giving what is wrong with passing the template variable ``key`` to the agent from outside its
    file (``--var``, a batch input's ``vars``, a request's ``vars``), or ``""`` when the prompt uses it (declared
    under ``prompt.vars`` or read by the template).

    A name of :data:`RUNTIME_PROMPT_VARS` is set by the runner, whose value would replace the one given: the
    problem says so, and that the task is given as ``task_from``. Any other name the prompt does not use gets
    the variables it does use and a did-you-mean.

    Raises:
        PromptError: the template cannot be read or parsed.
    """
    known = prompt_variables(prompt)
    name = _agent_template(prompt)[1]
    uses = f"it uses {', '.join(sorted(known))}" if known else "it uses no variables"

    def problem(key: str) -> str:
        if key in RUNTIME_PROMPT_VARS:
            fix = f"pass the task as {task_from}" if key == "task" else RUNNER_SET_FIXES[key]
            return f"{key!r} is set by the runner ({RUNTIME_PROMPT_VAR_MEANINGS[key]}): {fix}"
        if key in known:
            return ""
        hint = did_you_mean(key, sorted(known))
        return f"the agent's prompt ({name}) has no variable {key!r}; {uses}" + (f" ({hint})" if hint else "")

    return problem


def check_prompt_vars(prompt: PromptSpec, names: Any, *, task_from: str = "the command's argument",
                      given_as: str = "--var ") -> None:
    """Check that every name in ``names`` (the ``--var key=value`` keys) is a variable of the agent's prompt:
    declared under ``prompt.vars`` or read by the template (:func:`template_variables`; a variable read only by an
    included template must be declared under ``prompt.vars``), and not one the runner sets (``task``, ...).

    Raises:
        PromptError: ``--var <name>: <problem>`` (``given_as`` in place of ``"--var "``: ``"vars."`` for a request's
            vars) for the first name :func:`prompt_var_checker` finds a problem with (``task_from`` says where the
            task is given), or the template cannot be read or parsed.
    """
    problem = prompt_var_checker(prompt, task_from=task_from)
    for key in names:
        found = problem(key)
        if found:
            raise PromptError(f"{given_as}{key}: {found}")


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

    plain = "{" not in source and "\r" not in source  # no Jinja syntax, no newline to normalise: renders as itself
    template = None if plain else _compiled(source, name)
    token = _BUDGET.set([MAX_LOOP_ITERATIONS])
    try:
        parts: list[str] = []
        size = 0
        for chunk in (source,) if template is None else template.generate(variables):  # a dict: any key
            size += len(chunk)
            if size > MAX_OUTPUT_CHARS:
                raise _limit(f"the rendered prompt is longer than {MAX_OUTPUT_CHARS} characters")
            parts.append(chunk)
        return "".join(parts)
    except TemplateError as exc:
        line = _template_line(sys.exc_info()[2])
        raise PromptError(f"{name}:{line}: {exc.message or exc}") from None
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - 1/0, a recursive macro, MemoryError, ...
        line = _template_line(sys.exc_info()[2])
        raise PromptError(f"{name}:{line}: {type(exc).__name__}: {exc}") from None
    finally:
        _BUDGET.reset(token)


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
    return render(_builtin_source(name), variables, name=f"{name}.j2")


@cache
def _builtin_source(name: str) -> str:
    """The text of the built-in template ``<name>.j2``, read once per process (it ships with the package; a run
    renders it at its first step).

    Raises:
        PromptError: no such template.
    """
    from importlib.resources import files

    resource = files("thinkflow.prompting") / "builtin" / f"{name}.j2"
    try:
        return resource.read_text(encoding="utf-8")
    except (OSError, FileNotFoundError):
        raise PromptError(f"no built-in prompt template {name!r}") from None


use_renderer(render)  # the loader renders prompts at validate through this (config cannot import prompting)
