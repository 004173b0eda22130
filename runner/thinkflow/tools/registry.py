"""Tools registered from Python code with the :func:`tool` decorator, and tools published by installed packages
in the entry-point group ``thinkflow.tools``. Both are found by name like built-ins."""

from __future__ import annotations

from typing import Any, Callable

from thinkflow.errors import ToolError
from thinkflow.config.spec import ToolSpec
from thinkflow.tools.schema import derive_parameters, describe_function

ENTRY_POINT_GROUP = "thinkflow.tools"

_REGISTRY: dict[str, tuple[Callable[..., Any], ToolSpec]] = {}


def _spec_for(func: Callable[..., Any], name: str | None, description: str | None, confirm: bool,
              timeout: float, quick: bool = False) -> ToolSpec:
    tool_name = name or func.__name__
    return ToolSpec(
        name=tool_name,
        description=description or describe_function(func) or tool_name,
        kind="python",
        parameters=derive_parameters(func),
        timeout=float(timeout),
        confirm=confirm,
        entrypoint=f"{func.__module__}:{func.__qualname__}",
        quick=quick,
    )


def tool(name: str | Callable[..., Any] | None = None, *, description: str | None = None, confirm: bool = False,
         timeout: float = 30, quick: bool = False) -> Any:
    """Register a Python function as a tool (usable bare, ``@tool``, or ``@tool("name", confirm=True)``).

    ``quick=True`` declares that the function returns at once: it then runs in a thread of the runner rather than
    in a worker process (see :mod:`thinkflow.tools.python`).

    The schema is derived from the signature and docstring (:func:`derive_parameters`); the description
    defaults to the docstring's first paragraph. The function is returned unchanged, with the spec attached as
    ``func.__thinkflow_tool__``.

    Raises:
        ToolError: another function is already registered under the name; the message names both sources
            (``module:qualname``). Registering the same function again (a module imported twice) replaces it.
    """
    if callable(name):
        return tool()(name)

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        spec = _spec_for(func, name, description, confirm, timeout, quick)
        taken = _REGISTRY.get(spec.name)
        if taken is not None and taken[1].entrypoint != spec.entrypoint:
            raise ToolError(f"tool {spec.name!r} is registered twice: by {taken[1].entrypoint} and by "
                            f"{spec.entrypoint}; give one of them another name with @tool(\"other_name\")")
        _REGISTRY[spec.name] = (func, spec)
        func.__thinkflow_tool__ = spec  # type: ignore[attr-defined]
        return func

    return decorator


def registered(name: str) -> tuple[Callable[..., Any], ToolSpec] | None:
    """The ``(function, spec)`` registered under ``name``, or None."""
    return _REGISTRY.get(name)


def registered_specs() -> dict[str, ToolSpec]:
    """Specs of every tool registered with :func:`tool`, by name."""
    return {name: spec for name, (_, spec) in _REGISTRY.items()}


def unregister(name: str) -> None:
    """Forget a registered tool (for tests)."""
    _REGISTRY.pop(name, None)


def _entry_points() -> list[Any]:
    import importlib.metadata

    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def entry_point_names() -> list[str]:
    """Names of the tools installed packages publish in the ``thinkflow.tools`` group (nothing is imported)."""
    return sorted({ep.name for ep in _entry_points()})


def load_entry_point(name: str) -> tuple[Callable[..., Any], ToolSpec]:
    """Import the function published as ``name`` in ``thinkflow.tools`` and derive its spec.

    Raises:
        ToolError: no such entry point, or it failed to import.
    """
    for ep in _entry_points():
        if ep.name == name:
            try:
                func = ep.load()
            except Exception as exc:  # import errors of a third-party package
                raise ToolError(f"tool {name!r}: cannot load entry point {ep.value!r}: "
                                f"{type(exc).__name__}: {exc}") from exc
            spec = getattr(func, "__thinkflow_tool__", None)
            if spec is None:
                spec = _spec_for(func, name, None, False, 30)
            else:
                spec = ToolSpec(**{**spec.__dict__, "name": name})
            if spec.entrypoint != ep.value:
                spec = ToolSpec(**{**spec.__dict__, "entrypoint": ep.value})
            return func, spec
    raise ToolError(f"no tool {name!r} in the entry-point group {ENTRY_POINT_GROUP!r}")
