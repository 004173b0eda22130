"""A record of config documents that passed their schema, so that the next start skips jsonschema for them.

Checking an agent and its tools against the bundled schemas costs ``thinkflow-run`` about 0.05 to 0.1 s before
its first model request (importing jsonschema, compiling the validators, the metaschema check of every tool's
parameters), on every start, for files that have not changed. A document that passed is recorded as an empty
file named by the SHA-256 of (the bundled schemas' text, the check's kind, the document as canonical JSON) under
``validated/`` in :func:`thinkflow.paths.cache_home`. The next check of the same document against the same schemas
finds the file and returns "no issues" without importing jsonschema. Documents with issues are never recorded:
they are checked, and their issues reported, every time.

The document is the parsed and interpolated data, so a changed file or a changed environment variable it reads
gives another key, and so do other schemas, another version of ThinkFlow, jsonschema or its metaschemas, or an
edit of the validator code (:func:`_schemas_digest`). A document of anything but JSON's own types (only the
Python API can pass one) is always checked. Only digests are stored, never a document's text, in directories of
mode 0700: a digest covers the interpolated values, secrets included, so someone who can read the record and knows
the file could test guesses of a weak secret offline. The record grows with every new document (a file per digest);
``rm -r`` of the folder is always safe. ``THINKFLOW_VALIDATION_CACHE=0`` turns it off; an unwritable cache directory
only means no record.
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
    """SHA-256 over what decides a check: the text of every bundled schema, of the modules that compile and run the
    validators (``schemas.py``, this one), and the versions of ThinkFlow, jsonschema and its metaschemas (read
    once per process)."""
    from importlib import metadata
    from importlib.resources import files

    digest = hashlib.sha256()
    package = files("thinkflow.config")
    entries = sorted((package / "schemas").iterdir(), key=lambda e: e.name)
    for entry in [*entries, package / "schemas.py", package / "validated.py"]:
        if entry.name.endswith((".json", ".py")):
            digest.update(entry.name.encode() + b"\0" + entry.read_bytes() + b"\0")
    for name in ("thinkflow", "jsonschema", "jsonschema-specifications", "referencing"):
        try:
            digest.update(f"{name}={metadata.version(name)}\0".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=?\0".encode())
    return digest.digest()


def _plain(value: Any) -> bool:
    """True when ``value`` is made of JSON's own types only (dict with string keys, list, str, int, float, bool,
    None), which is what YAML gives the loader: ``json.dumps`` would write ``{1: x}`` as ``{"1": x}`` and a tuple
    as a list, which the schema may judge otherwise, so such a document is always checked."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif not (item is None or isinstance(item, (str, int, float, bool))):
            return False
    return True


def key(kind: str, document: Any) -> str | None:
    """The record's key for ``document`` checked as ``kind`` (64 hex digits), or None when the record is off or the
    document cannot be encoded (it is then always checked)."""
    if not _enabled() or not _plain(document):
        return None
    try:
        text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):  # NaN is fine; cycles, depth
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
        target.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # digests of documents: the user's own
        target.parent.mkdir(mode=0o700, exist_ok=True)
        target.touch()
    except OSError:
        pass
