"""Provider failures as typed errors, and when and how long to wait before retrying a call.

:func:`map_error` turns a LiteLLM/OpenAI/httpx exception into the :class:`~thinkflow.errors.ModelError` subclass
that names the fix, telling errors apart by ``isinstance`` on LiteLLM's exception classes (which LiteLLM maps every
provider's errors to; they subclass the OpenAI SDK's) and httpx's, and by the HTTP status where a class says
nothing more (a 5xx ``APIError``), save a connection that could not be made, which LiteLLM often reports as a
500 and which the cause it chains tells apart; :func:`retryable` says whether a retry can help (429, 5xx,
connection errors -- never a timeout, a context-window overflow, an auth or a bad-request error);
:func:`retry_delay` waits ``Retry-After`` (capped at 60 s) when the provider sends it, else exponential backoff
with jitter.
"""

from __future__ import annotations

import email.utils
import os
import random
import re
import time
from functools import cache
from types import SimpleNamespace
from typing import Mapping, Sequence

from thinkflow.errors import (
    AuthenticationError,
    ContextWindowError,
    ModelError,
    ModelNotFoundError,
    ModelTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
)
from thinkflow.model.providers import OLLAMA_PROVIDERS, key_env_var, load_litellm
from thinkflow.redaction import redact

OLLAMA_DEFAULT_BASE = "http://localhost:11434"
MAX_RETRY_AFTER = 60.0


def bare_message(exc: ModelError) -> str:
    """The error's message without the " (hint)" that ModelError appends."""
    text = str(exc)
    suffix = f" ({exc.hint})" if exc.hint else ""
    return text[: -len(suffix)] if suffix and text.endswith(suffix) else text


@cache
def _classes() -> SimpleNamespace:
    """LiteLLM's exception classes (and the OpenAI SDK and httpx bases they or a raw transport error share),
    grouped by what they mean for a retry and a hint. Imported on first use (LiteLLM is heavy)."""
    litellm = load_litellm()
    import httpx
    import openai

    return SimpleNamespace(
        provider=(openai.OpenAIError, httpx.HTTPError),
        timeout=(litellm.Timeout, openai.APITimeoutError, httpx.TimeoutException),
        connection=(litellm.APIConnectionError, openai.APIConnectionError, httpx.TransportError),
        context_window=(litellm.ContextWindowExceededError,),
        auth=(litellm.AuthenticationError, litellm.PermissionDeniedError, openai.AuthenticationError,
              openai.PermissionDeniedError),
        not_found=(litellm.NotFoundError, openai.NotFoundError),
        rate_limit=(litellm.RateLimitError, openai.RateLimitError),
        final=(litellm.BadRequestError, litellm.UnprocessableEntityError, openai.BadRequestError,
               openai.UnprocessableEntityError),
    )


def is_provider_error(exc: Exception) -> bool:
    """True for an exception raised by the provider stack (LiteLLM and the OpenAI SDK it builds on, httpx) or
    the network."""
    return isinstance(exc, (*_classes().provider, ConnectionError, TimeoutError))


def _is_timeout(exc: Exception) -> bool:
    return isinstance(exc, (*_classes().timeout, TimeoutError))


def _is_connection(exc: Exception) -> bool:
    return not _is_timeout(exc) and isinstance(exc, (*_classes().connection, ConnectionError))


def _connect_failure(exc: BaseException) -> tuple[str, str | None] | None:
    """Why no connection to the server could be made, when that is what ``exc`` comes from: ``(reason,
    address)``, reason "connection refused" or "could not connect (<the socket's error>)", address the URL's
    ``scheme://host:port`` when the failed request is known. None for any other failure (a timeout included).

    LiteLLM reports a refused connection as an ``InternalServerError`` with status 500 ("Connection error.") for
    OpenAI-compatible and most other providers, as an ``APIConnectionError`` for some: the cause it chains
    (``__cause__``/``__context__``: the OpenAI SDK's ``APIConnectionError``, httpx's ``ConnectError``, the socket's
    ``ConnectionRefusedError``) tells them apart from a server that answered 500."""
    import httpx

    chain: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and len(chain) < 16 and all(node is not seen for seen in chain):
        chain.append(node)
        node = node.__cause__ or node.__context__
    connect = next((e for e in chain if isinstance(e, httpx.ConnectError)), None)
    if connect is None and not any(isinstance(e, ConnectionRefusedError) for e in chain):
        return None
    address = None
    try:
        url = connect.request.url if connect is not None else None  # RuntimeError when the error has no request
        address = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}" if url is not None else None
    except (RuntimeError, AttributeError):
        pass
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "connection refused", address
    root = str(chain[-1]).strip() or (str(connect).strip() if connect is not None else "")
    return (f"could not connect ({root})" if root else "could not connect"), address


def _status(exc: Exception) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def retryable(exc: Exception) -> bool:
    """True when retrying can help: rate limits, 5xx and connection errors (not timeouts, context overflow,
    auth, not-found or bad requests)."""
    if _is_timeout(exc) or _is_context_window(exc):
        return False
    kinds = _classes()
    if isinstance(exc, (*kinds.auth, *kinds.not_found, *kinds.final)):  # bad requests, content policy, params
        return False
    if isinstance(exc, kinds.rate_limit) or _is_connection(exc):
        return True
    status = _status(exc)
    return status is not None and (status == 429 or status >= 500)


def _is_context_window(exc: Exception) -> bool:
    return isinstance(exc, _classes().context_window)


def _headers(exc: Exception) -> Mapping[str, str]:
    for source in (getattr(exc, "litellm_response_headers", None),
                   getattr(getattr(exc, "response", None), "headers", None)):
        if source:
            try:
                return {str(k).lower(): str(v) for k, v in dict(source).items()}
            except Exception:
                continue
    return {}


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date), or None. Keys lower-case."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_delay(exc: Exception, attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): the provider's Retry-After capped at
    :data:`MAX_RETRY_AFTER`, else 0.5 s * 2**attempt (max 8 s) with up to 25 % jitter."""
    after = retry_after(_headers(exc))
    if after is not None:
        return min(after, MAX_RETRY_AFTER)
    return min(8.0, 0.5 * 2 ** attempt) * random.uniform(1.0, 1.25)


_PREFIX = re.compile(r"^\s*(?:litellm\.)?[A-Za-z_]*(?:Error|Exception)(?::| -)\s*")


_TRACEBACK = "Traceback (most recent call last):"
_RAISED = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b")  # "json.decoder.JSONDecodeError: ..."


def without_traceback(text: str) -> str:
    """``text`` with a Python traceback in it (LiteLLM puts one into some messages, e.g. its "Invalid response
    object" when a reply holds a number Python cannot read) cut to the exception it ended with, in brackets:
    ``"Invalid response object (ValueError: Exceeds the limit (4300 digits) ...)"``."""
    head, found, tail = text.partition(_TRACEBACK)
    if not found:
        return text
    raised = [line.strip() for line in tail.splitlines() if _RAISED.match(line)]
    last = raised[-1] if raised else ""
    return f"{head.strip()} ({last})" if last else head.strip()


def _clean(message: str, secrets_: Sequence[str]) -> str:
    text = without_traceback(str(message))
    for _ in range(5):
        new = _PREFIX.sub("", text, count=1)
        if new == text:
            break
        text = new
    text = text.split("\nReceived Model Group", 1)[0].strip()
    text = redact(text, secrets_)
    return text[:500]


def map_error(exc: Exception, *, model: str, provider: str, api_base: str | None, timeout: float, retries: int,
              secrets: Sequence[str] = (), key_given: bool = False) -> ModelError:
    """Turn a LiteLLM/OpenAI/httpx exception into a typed :class:`ModelError` with the fix in ``hint``.

    ``secrets`` are replaced by ``***`` in the message. ``retries`` is how many retries were made before giving up.
    ``key_given``: the agent's ``model.api_key`` was sent (a refused key then points there, not to the environment).
    """
    detail = _clean(str(exc), secrets)
    kinds = _classes()
    status = _status(exc)
    tried = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    if _is_context_window(exc):
        hint = "shorten the history (memory.short_term.window or max_tokens) or use a model with a larger context"
        if provider in OLLAMA_PROVIDERS:
            hint += "; for Ollama raise model.extra.num_ctx"
        return ContextWindowError(f"the prompt is longer than {model}'s context window: {detail}", model=model,
                                  hint=hint)
    if _is_timeout(exc):
        return ModelTimeoutError(f"{model} timed out after {timeout:g} s", model=model,
                                 hint="raise model.timeout (seconds) in the agent spec, or use a faster model")
    # the OpenAI SDK's "api_key must be set" is a plain OpenAIError: its text is all there is to tell it by
    if isinstance(exc, kinds.auth) or status in (401, 403) or \
            "Missing credentials" in detail or "api_key must be set" in detail:
        var = key_env_var(model) if provider != "local" else None
        if key_given:
            hint = f"the key in model.api_key was refused: check that it is a valid {provider or 'provider'} key"
        elif var:
            hint = f"set {var} in the environment, or model.api_key: ${{{var}}}"
        else:
            hint = "check model.api_key and the provider's credentials"
        return AuthenticationError(f"{provider or model} refused the credentials for {model}: {detail}",
                                   model=model, hint=hint)
    if "LLM Provider NOT provided" in detail:  # a BadRequestError like any other but for this text
        return ModelNotFoundError(
            f"unknown provider in model {model!r}", model=model,
            hint="prefix the model with a LiteLLM provider, e.g. openai/gpt-4o-mini, ollama_chat/llama3.1, "
                 "anthropic/claude-haiku-4-5, or use local/qwen2.5-coder-1.5b")
    if isinstance(exc, kinds.not_found) or status == 404:
        if provider in OLLAMA_PROVIDERS:
            hint = f"pull it with `ollama pull {model.split('/', 1)[1]}`"
        else:
            hint = "check the model name (LiteLLM model strings: https://docs.litellm.ai/docs/providers)"
        return ModelNotFoundError(f"{provider or 'the provider'} does not know the model {model!r}: {detail}",
                                  model=model, hint=hint)
    connect = _connect_failure(exc)
    if _is_connection(exc) or connect is not None:
        if provider in OLLAMA_PROVIDERS:
            address = api_base or os.environ.get("OLLAMA_API_BASE") or OLLAMA_DEFAULT_BASE
            return ProviderUnavailableError(f"Ollama is not running at {address}{tried}", model=model,
                                            hint="start it with `ollama serve` or set model.api_base")
        if connect is not None:  # nothing answered: no HTTP status to report, whatever status LiteLLM gave it
            reason, address = redact(connect[0], secrets), redact(api_base or connect[1] or "", secrets)
            where = f" at {address}" if address else ""
            return ProviderUnavailableError(
                f"could not reach the {provider or 'model'} server{where} for {model}{tried}: {reason}", model=model,
                hint="check that the server is running and that model.api_base points to it, or add model.fallbacks")
        where = f" at {api_base}" if api_base else ""
        return ProviderUnavailableError(f"could not reach {provider or 'the provider'}{where} for {model}{tried}: "
                                        f"{detail}", model=model,
                                        hint="check the network and model.api_base, or add model.fallbacks")
    if isinstance(exc, kinds.rate_limit) or status == 429:
        return RateLimitError(f"{provider or model} kept rate-limiting {model}{tried}: {detail}", model=model,
                              hint="wait and run again, raise model.num_retries, or add model.fallbacks")
    if "Invalid response object" in detail:  # LiteLLM could not read a 200 reply (e.g. a 5,000-digit number in it)
        return ModelError(f"LiteLLM could not read {model}'s reply{tried}: {detail}", model=model,
                          hint="the server answered, but its reply does not fit OpenAI's response format; the same "
                               "request fails the same way, so check the server or the model rather than retrying")
    if status is not None and status >= 500:
        return ProviderUnavailableError(f"{provider or model} failed with HTTP {status}{tried}: {detail}",
                                        model=model, hint="try again later, or add model.fallbacks")
    return ModelError(f"{model} rejected the request: {detail}", model=model,
                      hint="check the model settings (model.extra, max_tokens, tools) for this provider")
