"""How a run's deadline bounds one model request: the request's timeout, the request's own bound, and the error
once the time is up.

A run's deadline is held exactly by its caller (:class:`thinkflow.run.model_worker.RunDeadline` abandons the call
at it); the request's timeout only keeps an abandoned request from living on long after it. httpx's timeout bounds
each read, not the request, so a server that trickles its reply holds a request as long as it likes: within a run,
:func:`bounded_request` cuts each request at ``model.timeout`` through the guard the run installs
(:data:`REQUEST_GUARD`), and the cut is a timeout like any other (not retried; the fallbacks are tried).
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar
from typing import Any, Callable

from thinkflow.errors import ModelTimeoutError

MAX_REQUEST_S = 365 * 86400.0
"""The longest timeout (seconds, one year) a request is given: the socket under httpx refuses more than about
9.2e9 s (OverflowError, reported as a failed request), and a spec built in Python skips the schema's one-week cap on
``model.timeout``. The run's own bound on the call (:mod:`thinkflow.run.model_worker`) is not cut."""


def request_timeout(left: float) -> float:
    """``left`` seconds rounded up to a step of a tenth of its leading power of ten (0.1 s from 1 s, 1 s from 10 s,
    10 s from 100 s...): at most 1.1 times ``left``, and one value per step. Below a millisecond and above 10**9 s
    (or not finite), ``left`` itself.

    LiteLLM keys the OpenAI SDK clients it caches on their ``timeout`` (``get_openai_client_cache_key`` in
    ``litellm/llms/openai/common_utils.py``): a timeout that differs on every request (the exact time left before
    a run's deadline) builds a new client, with its own connection pool, for each request (0.6 ms more a request
    against a local server, measured) and churns the cache. Rounded, requests made close together share one.
    """
    if not 1e-3 <= left <= 1e9:  # also NaN
        return left
    power = math.floor(math.log10(left)) - 1
    if power >= 0:
        step = 10 ** power
        return float(math.ceil(left / step) * step)
    scale = 10 ** -power
    return math.ceil(left * scale) / scale


def request_seconds(model: str, timeout: float, deadline: float | None) -> float:
    """The timeout of ``model``'s next request in seconds: ``timeout`` (the model's, cut to :data:`MAX_REQUEST_S`),
    or when less is left before ``deadline`` (a :func:`time.monotonic` instant, None: none), the time left rounded
    up by at most a tenth (:func:`request_timeout`).

    Raises ModelTimeoutError: the deadline has passed (:func:`run_over`)."""
    timeout = min(float(timeout), MAX_REQUEST_S)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise run_over(model)
    return min(timeout, request_timeout(left))


def run_over(model: str) -> ModelTimeoutError:
    """The error of a request the run's deadline ended (the fix is ``loop.timeout``, not ``model.timeout``)."""
    return ModelTimeoutError(f"{model}: the run's time is up", model=model,
                             hint="raise loop.timeout (seconds) in the agent spec")


class RequestCut(TimeoutError):
    """Raised by a request guard when one request outlived its own bound: a timeout (a provider error that is not
    retried, :func:`thinkflow.model.error_map.retryable`), reported as "<model> timed out after <timeout> s"."""


RequestGuard = Callable[[Callable[[], Any], float], Any]
"""``guard(request, seconds) -> request()``: run one request for at most ``seconds``; raise :class:`RequestCut`
when that bound passes first (anything else the request raises propagates)."""

REQUEST_GUARD: ContextVar[RequestGuard | None] = ContextVar("thinkflow_request_guard", default=None)
"""The guard of the model call under way, set by the run around each call
(:meth:`thinkflow.run.model_worker.RunDeadline.call`); None outside a run (the request has only httpx's timeouts)."""


def bounded_request(request: Callable[[], Any], seconds: float) -> Any:
    """``request()``, cut after ``seconds`` by the run's guard when a run is making the call (:data:`REQUEST_GUARD`),
    else called as is.

    Raises RequestCut: the request outlived ``seconds``."""
    guard = REQUEST_GUARD.get()
    return request() if guard is None else guard(request, seconds)
