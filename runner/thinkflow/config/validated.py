"""A record of config documents that passed their schema, so that the next start skips jsonschema for them.

Checking an agent and its tools against the bundled schemas costs ``thinkflow-run`` about 0.05 to 0.1 s before
its first model request (importing jsonschema, compiling the validators, the metaschema check of every tool's
parameters), on every start, for files that have not changed. A document that passed is recorded as an empty
file named by the SHA-256 of (the bundled schemas' text, the check's kind, the document as canonical JSON) under
``validated/`` in :func:`thinkflow.paths.cache_home`. The next check of the same document against the same schemas
finds the file and returns "no issues" without importing jsonschema. Documents with issues are never recorded:
they are checked, and their issues reported, every time.

The document is the parsed and interpolated data, so a changed file, a changed environment variable it reads, or
a new ThinkFlow release with other schemas gives another key. Only digests are stored, never a document's text.
``THINKFLOW_VALIDATION_CACHE=0`` turns the record off; an unwritable cache directory only means no record.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any


def _enabled() -> bool:
    return os.environ.get("THINKFLOW_VALIDATION_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def _folder() -> Path:
    from thinkflow.paths import cache_home

    return cache_home() / "validated"


@cache
def _schemas_digest() -> bytes:
    """SHA-256 over the text of every bundled schema (read once per process)."""
    from importlib.resources import files

    digest = hashlib.sha256()
    for entry in sorted((files("thinkflow.config") / "schemas").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            digest.update(entry.name.encode() + b"\0" + entry.read_bytes() + b"\0")
    return digest.digest()


def _typed(value: Any) -> str:
    """Any non-JSON value (a YAML date, say) by its type and repr, so it never collides with a string."""
    return f"<{type(value).__module__}.{type(value).__qualname__}:{value!r}>"


def _string_keys(value: Any) -> bool:
    """True when every mapping in ``value`` has only string keys (``json.dumps`` would turn ``{1: x}`` into
    ``{"1": x}``, which the schema may judge otherwise)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


def key(kind: str, document: Any) -> str | None:
    """The record's key for ``document`` checked as ``kind`` (64 hex digits), or None when the record is off or the
    document cannot be encoded (it is then always checked)."""
    if not _enabled() or not _string_keys(document):
        return None
    try:
        text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_typed)
    except (TypeError, ValueError, RecursionError):  # keys that are not strings, cycles, depth
        return None
    digest = hashlib.sha256(_schemas_digest())
    digest.update(kind.encode() + b"\0" + text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def passed(record_key: str | None) -> bool:
    """True when the document of ``record_key`` passed its check before (False for None or an unreadable cache)."""
    if record_key is None:
        return False
    try:
        return (_folder() / record_key[:2] / record_key).is_file()
    except OSError:
        return False


def remember(record_key: str | None) -> None:
    """Record that the document of ``record_key`` passed (nothing for None; a cache that cannot be written is
    skipped silently: the record only saves time)."""
    if record_key is None:
        return
    target = _folder() / record_key[:2] / record_key
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    except OSError:
        pass
