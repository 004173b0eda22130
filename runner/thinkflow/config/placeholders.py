"""``{param}`` placeholders in shell command and HTTP request templates: what one is, and finding them.

A placeholder is ``{name}`` with ``name`` a Python identifier. ``${NAME}`` (a shell variable in a ``shell: true``
script) and ``{{name}}`` are not placeholders, and neither is any other brace text (``awk '{print $1}'``, ``{}``).
The config checks (every placeholder a declared parameter) and the tools that fill them in
(:mod:`thinkflow.tools.templating`) share this one definition.
"""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"(?<![${])\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


def placeholders(template: str) -> list[str]:
    """Names of the placeholders in one template string, in order (repeats kept)."""
    return PLACEHOLDER.findall(template)
