"""Hiding secret values (API keys, tokens interpolated from the environment) wherever text is shown or stored:
config errors, tool requests and approvals, provider error messages, the live view and traces. One rule for all."""

from __future__ import annotations

from typing import Any, Iterable

REDACTED = "***"
#: secrets shorter than this are not redacted: they would mangle ordinary words, and a 1-3 character key is no secret.
MIN_SECRET_LENGTH = 4


class Redactor:
    """Replaces every secret value with ``***`` in strings and, recursively, in lists, tuples and dicts (keys too).

    Longer secrets are replaced first, so a secret that contains another is fully hidden.
    """

    def __init__(self, secrets: Iterable[str | None] = ()):
        values = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
        self.secrets = sorted(values, key=len, reverse=True)

    def text(self, value: str) -> str:
        """``value`` with every secret replaced."""
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def __call__(self, value: Any) -> Any:
        """A copy of ``value`` (any JSON-ready structure) with secrets replaced in every string."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else k: self(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value


def redact(value: Any, secrets: Iterable[str | None]) -> Any:
    """``value`` (a string or a JSON-ready structure) with every secret in ``secrets`` replaced by ``***``."""
    return Redactor(secrets)(value)
