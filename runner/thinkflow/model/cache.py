"""The response cache: LiteLLM's own cache (``litellm.Cache``), switched on by ``model.cache`` or ``--cache``.

LiteLLM keys a completion by its request (model, messages, tools, temperature, ...) and, on a hit, returns the
stored reply with ``_hidden_params["cache_hit"] = True`` (LiteLLM ``caching/caching.py``, ``caching_handler.py``).
This module only configures it:

* ``type: disk`` (the default): LiteLLM 1.110 dropped its ``diskcache`` backend (``disk_cache_dir`` is ignored with a
  warning), so :class:`DiskBackend`, a directory of JSON files written atomically, is handed to
  ``litellm.Cache(_backend=...)``; lookup, keys and hit marking stay LiteLLM's.
  Directory: ``cache.dir``, else ``$THINKFLOW_CACHE_DIR/responses``, else ``$XDG_CACHE_HOME/thinkflow/responses``,
  else ``~/.cache/thinkflow/responses``.
* ``type: redis``: ``litellm.Cache(type="redis", host, port, password, namespace)`` (needs the ``redis`` package;
  LiteLLM also reads ``REDIS_HOST``/``REDIS_PORT``/``REDIS_PASSWORD``).
* The cache runs in LiteLLM's ``default_off`` mode and each cached request opts in with ``cache={"use-cache": True}``,
  so a model without ``cache`` is never served from it. ``max_messages=None``: LiteLLM's default (4) would skip
  every agent request after the first tool call.
* ``ttl`` (seconds) bounds an entry's life; None keeps it until ``thinkflow cache clear``.
* LiteLLM 1.110's cache-hit path imports proxy-only modules (``fastapi``) to ask whether the hit is a replayed
  Anthropic Messages stream, so the first hit crashes a plain install (BerriAI/litellm#42195, fix proposed in
  #42198). :func:`_tolerate_proxy_import` wraps that one check so a failed import means "not such a stream", as
  the proposed fix does; remove it when LiteLLM ships the fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from thinkflow.atomic import atomic_write_bytes
from thinkflow.model import stored

CACHE_TYPES = ("disk", "redis")
_LOCK = threading.Lock()
_ACTIVE: dict[str, Any] = {"key": None}


def default_cache_dir() -> Path:
    """``responses`` under :func:`thinkflow.paths.cache_home` (``$THINKFLOW_CACHE_DIR``, ``$XDG_CACHE_HOME/thinkflow``
    or ``~/.cache/thinkflow``)."""
    from thinkflow.paths import cache_home

    return cache_home() / "responses"


def cache_settings(value: bool | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``model.cache`` as a settings dict (``{"type": "disk", ...}``), or None when off. ``True`` -> disk."""
    if value is None or value is False:
        return None
    if value is True:
        return {"type": "disk"}
    settings = {"type": "disk", **dict(value)}
    return settings if settings.get("enabled", True) else None


class DiskBackend:
    """A LiteLLM cache backend (``BaseCache`` methods) over a directory: one JSON file per key, named by the
    key's SHA-256, replaced atomically, so a crash never leaves half an entry and concurrent runs share entries.

    Args:
        directory: where entries live (created on first write).
    Values are what LiteLLM stores (``{"timestamp", "response": <JSON text>}``); a value that is not JSON is not
    cached. Expired entries (``ttl`` seconds) read as a miss and are removed. An entry file that is no entry (not
    UTF-8, not JSON, nested deeper than :data:`thinkflow.model.stored.MAX_DEPTH` levels, ``NaN``, another shape, an
    ``expires`` that is no number) reads as a miss and is left as it is (the next write of that key replaces it):
    :meth:`get_cache` never raises.
    """

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self.default_ttl = None

    def _path(self, key: Any) -> Path:
        return self.directory / (hashlib.sha256(str(key).encode("utf-8")).hexdigest() + ".json")

    def set_cache(self, key: Any, value: Any, **kwargs: Any) -> None:
        ttl = kwargs.get("ttl")
        try:
            data = json.dumps({"key": str(key), "expires": time.time() + float(ttl) if ttl else None,
                               "value": value}, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError):
            return
        try:
            atomic_write_bytes(self._path(key), data)
        except OSError:
            pass  # a cache that cannot be written is a miss next time, never a failed run

    def get_cache(self, key: Any, **kwargs: Any) -> Any:
        """The value stored for ``key``, or None for a miss (no entry, an expired one, or a file that is no entry:
        see the class doc)."""
        path = self._path(key)
        try:
            entry = stored.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # unreadable, not UTF-8, not JSON, NaN, too deep (NestingError)
            return None
        if not isinstance(entry, dict) or entry.get("key") != str(key):
            return None
        expires = entry.get("expires")
        if expires is not None:
            if isinstance(expires, bool) or not isinstance(expires, (int, float)):
                return None
            if time.time() > expires:
                path.unlink(missing_ok=True)
                return None
        return entry.get("value")

    def batch_get_cache(self, keys: list[Any], **kwargs: Any) -> list[Any]:
        return [self.get_cache(k, **kwargs) for k in keys]

    async def async_set_cache(self, key: Any, value: Any, **kwargs: Any) -> None:
        self.set_cache(key, value, **kwargs)

    async def async_get_cache(self, key: Any, **kwargs: Any) -> Any:
        return self.get_cache(key, **kwargs)

    async def async_batch_get_cache(self, keys: list[Any], **kwargs: Any) -> list[Any]:
        return self.batch_get_cache(keys, **kwargs)

    async def async_set_cache_pipeline(self, cache_list: list[tuple[Any, Any]], **kwargs: Any) -> None:
        for key, value in cache_list:
            self.set_cache(key, value, **kwargs)

    async def batch_cache_write(self, key: Any, value: Any, **kwargs: Any) -> None:
        self.set_cache(key, value, **kwargs)

    def delete_cache(self, key: Any) -> None:
        self._path(key).unlink(missing_ok=True)

    def flush_cache(self) -> int:
        """Remove every entry; returns how many were removed."""
        return clear_disk_cache(self.directory)

    async def disconnect(self) -> None:
        return None

    def get_ttl(self, **kwargs: Any) -> int | None:
        ttl = kwargs.get("ttl")
        return int(ttl) if ttl is not None else None


def clear_disk_cache(directory: str | os.PathLike[str] | None = None) -> int:
    """Delete every entry of the disk cache in ``directory`` (default :func:`default_cache_dir`); returns how many
    entries were removed. A missing directory is an empty cache."""
    folder = Path(directory) if directory is not None else default_cache_dir()
    removed = 0
    if not folder.is_dir():
        return 0
    for path in folder.glob("*.json"):
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def _key(settings: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in settings.items()))


def _tolerate_proxy_import() -> None:
    """Make LiteLLM's cache-hit check survive a missing ``fastapi`` (see the module doc; idempotent)."""
    try:
        from litellm.caching import caching_handler as handler
    except ImportError:
        return
    original = getattr(handler, "_should_defer_streaming_cache_hit_callbacks", None)
    if original is None or getattr(original, "thinkflow_shim", False):
        return

    def should_defer(*, cached_result: object) -> bool:
        try:
            return original(cached_result=cached_result)
        except ImportError:  # the Anthropic Messages replay type needs the proxy extra: not such a stream
            from litellm.responses.streaming_iterator import BaseResponsesAPIStreamingIterator

            return isinstance(cached_result, (handler.CustomStreamWrapper, BaseResponsesAPIStreamingIterator))

    should_defer.thinkflow_shim = True  # type: ignore[attr-defined]
    handler._should_defer_streaming_cache_hit_callbacks = should_defer


def enable_cache(settings: Mapping[str, Any]) -> Any:
    """Install ``litellm.cache`` for ``settings`` (``type`` disk or redis, ``dir``, ``ttl``, ``host``, ``port``,
    ``password``, ``namespace``) unless the same settings are already active; returns the ``litellm.Cache``.

    Raises:
        ValueError: an unknown cache type. ImportError: Redis without the ``redis`` package.
    """
    from thinkflow.model.providers import load_litellm

    key = _key(settings)
    with _LOCK:
        litellm = load_litellm()
        if _ACTIVE["key"] == key and litellm.cache is not None:
            return litellm.cache
        kind = settings.get("type", "disk")
        ttl = settings.get("ttl")
        from litellm.caching.caching import Cache, CacheMode

        if kind == "disk":
            directory = Path(settings["dir"]).expanduser() if settings.get("dir") else default_cache_dir()
            cache = Cache(mode=CacheMode.default_off, ttl=ttl, max_messages=None, _backend=DiskBackend(directory))
        elif kind == "redis":
            cache = Cache(type="redis", mode=CacheMode.default_off, ttl=ttl, max_messages=None,
                          host=settings.get("host"), port=str(settings["port"]) if settings.get("port") else None,
                          password=settings.get("password"), namespace=settings.get("namespace"))
        else:
            raise ValueError(f"unknown cache type {kind!r}; one of {', '.join(CACHE_TYPES)}")
        _tolerate_proxy_import()
        litellm.cache = cache
        _ACTIVE["key"] = key
        return cache


def request_options(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``litellm.completion`` keyword arguments that opt one request into the cache (empty when off)."""
    if not settings:
        return {}
    enable_cache(settings)
    return {"caching": True, "cache": {"use-cache": True}}


def served_from_cache(response: Any) -> bool:
    """True when LiteLLM answered ``response`` from its cache (``_hidden_params["cache_hit"]``)."""
    hidden = getattr(response, "_hidden_params", None) or {}
    try:
        return hidden.get("cache_hit") is True
    except AttributeError:
        return False
