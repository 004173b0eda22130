"""The tools shipped with ThinkFlow (kind "builtin"): the class that runs them.

Their names, descriptions and parameter schemas are data in :mod:`thinkflow.config.builtin_tools` (re-exported here);
pandas and matplotlib are imported lazily inside the data tools (``tools/data.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from thinkflow.config.builtin_tools import BUILTIN_NAMES, PARAMETERS, builtin_specs
from thinkflow.config.spec import ToolSpec
from thinkflow.errors import ToolError
from thinkflow.tools.base import ToolResult
from thinkflow.tools import data, files
from thinkflow.tools.calculator import CalculatorError, calculator
from thinkflow.tools.data import DataToolError
from thinkflow.tools.python import run_with_timeout

__all__ = ["BUILTIN_NAMES", "BuiltinTool", "builtin_specs", "is_builtin"]


def is_builtin(name: str) -> bool:
    """True when ``name`` is a built-in tool."""
    return name in BUILTIN_NAMES


class BuiltinTool:
    """A built-in tool bound to a workspace root. Runs in a worker thread with the spec's timeout (see
    :func:`~.python.run_with_timeout`); a bad argument (unknown column, forbidden expression) is an error
    observation with a plain message."""

    def __init__(self, spec: ToolSpec, workspace: Path | None = None):
        if spec.name not in BUILTIN_NAMES:
            raise ToolError(f"no built-in tool {spec.name!r}; built-ins are: {', '.join(BUILTIN_NAMES)}")
        self.spec = spec
        self.root = Path(workspace if workspace is not None else Path.cwd())

    def parameters(self) -> dict[str, Any]:
        """The built-in's schema (the spec's, which may have been overridden by config)."""
        return self.spec.parameters or PARAMETERS[self.spec.name]

    def _function(self) -> Callable[..., Any]:
        root, name, cap = self.root, self.spec.name, self.spec.max_output
        if name == "calculator":
            return calculator
        if name in ("read_file", "list_dir", "write_file"):
            if name == "read_file":
                return lambda path: files.read_file(root, path, cap)
            return lambda **kw: getattr(files, name)(root, **kw)
        return lambda **kw: getattr(data, name)(root, **kw)

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the built-in once."""
        func = self._function()

        def guarded(**kwargs: Any) -> Any:
            try:
                return func(**kwargs)
            except (CalculatorError, DataToolError) as exc:
                return ToolResult("error", str(exc))

        return run_with_timeout(guarded, dict(arguments), self.spec.timeout, self.spec.max_output)
