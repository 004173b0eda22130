"""Environment interpolation of parsed config data: ``${VAR}`` and ``${VAR:-default}`` inside string values.

Interpolation runs after YAML parsing, on string values only (never keys), and inserts the variable's value byte
for byte: a value such as ``!abc: "x`` is never parsed as YAML nor re-scanned for placeholders. ``$${`` writes a
literal ``${``. Every value taken from the environment is a secret: it is collected so callers can redact it from
error messages, logs and traces (:func:`redact`). Defaults written in the file are not secrets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from thinkflow.errors import ConfigIssue
from thinkflow.redaction import redact
from thinkflow.config.yamlread import Marks, PathKey, dotted

_PATTERN = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_UNSET = "environment variable '{}' is not set"
_UNSET_PATTERN = re.compile(r"^environment variable '([A-Za-z_][A-Za-z0-9_]*)' is not set$")


def unset_variable(issue: ConfigIssue) -> str | None:
    """The variable's name when ``issue`` says a ``${VAR}`` without a default is unset (what
    ``thinkflow validate --allow-missing-env`` reports as a warning), else None."""
    match = _UNSET_PATTERN.match(issue.message)
    return match.group(1) if match else None


def interpolate(
    data: Any, env: Mapping[str, str], *, file: str, marks: Marks
) -> tuple[Any, list[str], list[ConfigIssue]]:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string value of ``data``.

    Args:
        data: parsed document (dicts, lists, scalars); not modified.
        env: the environment to read (usually ``os.environ``).
        file, marks: where issues point.

    Returns:
        ``(new_data, secrets, issues)``: secrets are the non-empty values taken from ``env``; an unset variable
        without a default gives an issue naming the key path and the variable, and leaves the text as written.
    """
    secrets: list[str] = []
    issues: list[ConfigIssue] = []

    def text(value: str, path: PathKey) -> str:
        if "${" not in value:
            return value

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:
                return "${"
            found = env.get(name)
            if found is not None and (found != "" or match.group(2) is None):
                if found:
                    secrets.append(found)
                return found
            if match.group(2) is not None:
                return match.group(2)
            line, col = marks.at(path, key=False)
            issues.append(
                ConfigIssue(
                    file, line, col, dotted(path),
                    _UNSET.format(name),
                    f"set {name}, or give a default: ${{{name}:-value}}",
                )
            )
            return match.group(0)

        return _PATTERN.sub(replace, value)

    def walk(value: Any, path: PathKey) -> Any:
        if isinstance(value, str):
            return text(value, path)
        if isinstance(value, dict):
            return {key: walk(item, path + (key,)) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, path + (i,)) for i, item in enumerate(value)]
        return value

    result = walk(data, ())
    return result, list(dict.fromkeys(secrets)), issues


def redact_issue(issue: ConfigIssue, secrets: tuple[str, ...] | list[str]) -> ConfigIssue:
    """The issue with secrets removed from its message and hint."""
    if not secrets:
        return issue
    message, hint = redact(issue.message, secrets), redact(issue.hint, secrets)
    if message == issue.message and hint == issue.hint:
        return issue
    return ConfigIssue(issue.file, issue.line, issue.column, issue.path, message, hint)
