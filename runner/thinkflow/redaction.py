"""Hiding secret values wherever ThinkFlow shows or stores text: config errors, tool requests and approvals, provider
error messages, the live view, the printed answer, traces, session files and long-term memory. One rule for all.

The known secrets of a run are the values interpolated from the environment into its specs (``${VAR}``) and the
values of the environment's credential variables (:func:`environment_secrets`): every name LiteLLM reads a
provider key, token or password from (``OPENAI_API_KEY``, ``AZURE_OPENAI_API_KEY``, ``TOGETHER_AI_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, ``WATSONX_APIKEY``, ...) matches :func:`is_credential_name`, so a key reaches no file
even when the agent never names it (a tool that reads ``.env`` or echoes a request header).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Iterable

REDACTED = "***"
#: secrets shorter than this are not redacted: they would mangle ordinary words, and a 1-3 character key is no secret.
MIN_SECRET_LENGTH = 4
#: an environment credential shorter than this is not redacted (``GITHUB_TOKEN=none``, ``SOME_KEY=true``): too
#: likely an ordinary word, and no provider issues keys this short.
MIN_ENV_SECRET_LENGTH = 8

# the last part of a credential variable's name: ..._API_KEY, ..._APIKEY, ..._KEY, ..._TOKEN, ..._SECRET,
# ..._PASSWORD, ..._PAT, ..._JWT, ..._CREDENTIALS (a trailing _2 or plural allowed), ...APIKEY (WATSONX_ZENAPIKEY);
# plus AWS's key id.
_CREDENTIAL_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|APIKEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PAT|JWT|CREDENTIALS?|ACCESS_KEY_ID"
    r"|SECRET_ID)S?(?:_\d+)?$|APIKEYS?(?:_\d+)?$",
    re.IGNORECASE,
)


def is_credential_name(name: str) -> bool:
    """Whether the environment variable ``name`` holds a credential by its name (see the module docstring):
    ``OPENAI_API_KEY``, ``HF_TOKEN``, ``AZURE_CLIENT_SECRET``, ``WATSONX_APIKEY`` yes; ``OPENAI_API_BASE``,
    ``AWS_WEB_IDENTITY_TOKEN_FILE``, ``TOKENIZERS_PARALLELISM`` no."""
    return bool(_CREDENTIAL_NAME.search(name))


def environment_secrets(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of the credential variables in ``env`` (default ``os.environ``) at least
    :data:`MIN_ENV_SECRET_LENGTH` characters long, in name order, without duplicates."""
    env = os.environ if env is None else env
    values = (env[name] for name in sorted(env) if is_credential_name(name))
    return tuple(dict.fromkeys(v.strip() for v in values if len(v.strip()) >= MIN_ENV_SECRET_LENGTH))


class Redactor:
    """Replaces every secret value with ``***`` in strings and, recursively, in lists, tuples and dicts (keys too).

    Longer secrets are replaced first, so a secret that contains another is fully hidden.
    """

    def __init__(self, secrets: Iterable[str | None] = ()):
        values = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
        self.secrets = sorted(values, key=len, reverse=True)

    @classmethod
    def for_run(cls, secrets: Iterable[str | None] = (), env: Mapping[str, str] | None = None) -> "Redactor":
        """A redactor of ``secrets`` (a spec's interpolated values) plus :func:`environment_secrets` of ``env``."""
        return cls([*secrets, *environment_secrets(env)])

    @property
    def longest(self) -> int:
        """Length of the longest secret (0 when none): how much of a stream to hold back before showing it."""
        return len(self.secrets[0]) if self.secrets else 0

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
