"""Two shims for LiteLLM: its file-id rewrite skipped for requests that carry no file, and its success logging
skipped for calls no callback would hear of (:func:`completion`).

Every ``litellm.completion`` call passes the messages through
``litellm.litellm_core_utils.prompt_templates.file_id_utils.update_messages_with_model_file_ids``, which maps the
ids of files uploaded through a LiteLLM proxy (``{"type": "file", "file": {"file_id": ...}}`` content parts of user
messages) to the provider's own ids. Its first statement imports ``litellm.proxy.openai_files_endpoints``, and with
it ``litellm.proxy._types``: hundreds of pydantic models, 0.17 s of CPU in the first call of every process on this
project's machines (cProfile of ``thinkflow-run`` up to its first request, bench/RESULTS.md), the largest single
item between ``import litellm`` and the first model request. The function only ever changes a user message whose
content is a list holding a ``file`` part; for any other request it returns the messages as they are.
:func:`skip_file_ids_without_files` wraps it so that such requests skip the call (and the import); a request with a
list content is handed to LiteLLM's function unchanged.
"""

from __future__ import annotations

import functools
from contextvars import ContextVar
from typing import Any, Callable

_NAME = "update_messages_with_model_file_ids"


def holds_file_parts(messages: Any) -> bool:
    """True unless ``messages`` is a list of dicts in which no user message has list content (the only place a
    ``file`` part can be); anything unexpected counts as holding files, so LiteLLM's own code sees it."""
    if not isinstance(messages, list):
        return True
    for message in messages:
        if not isinstance(message, dict):
            return True
        if message.get("role") == "user" and not isinstance(message.get("content"), (str, type(None))):
            return True
    return False


def _skipping(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def update(*args: Any, **kwargs: Any) -> Any:
        messages = kwargs["messages"] if "messages" in kwargs else (args[0] if args else None)
        if holds_file_parts(messages):
            return original(*args, **kwargs)
        return messages

    update.thinkflow_skips_without_files = True  # type: ignore[attr-defined]
    return update


def skip_file_ids_without_files(litellm: Any) -> bool:
    """Wrap ``litellm.main.update_messages_with_model_file_ids`` (see the module doc) once; True when it is wrapped.
    A LiteLLM without that function (another version) is left as it is."""
    main = getattr(litellm, "main", None)
    original = getattr(main, _NAME, None)
    if original is None or not callable(original):
        return False
    if not getattr(original, "thinkflow_skips_without_files", False):
        setattr(main, _NAME, _skipping(original))
    return True


_CALLBACK_LISTS = ("success_callback", "_async_success_callback", "callbacks")


def logging_unheard(litellm: Any) -> bool:
    """True when LiteLLM's success logging of a call would reach no one: no success callback is registered
    (``litellm.success_callback``, ``_async_success_callback``, ``callbacks``: a user's Langfuse, OpenTelemetry or
    custom logger) and no ``litellm.max_budget`` is set (its spend counter is kept by that logging)."""
    return not getattr(litellm, "max_budget", None) and not any(getattr(litellm, name, None) for name in
                                                                 _CALLBACK_LISTS)


@functools.cache
def _internal_call_flag(litellm: Any) -> ContextVar | None:
    """LiteLLM's ``is_internal_call`` context variable (``litellm/_internal_context.py``, private), or None when this
    LiteLLM has none of that type. Looked up once per module (it is asked for on every model call)."""
    context = getattr(litellm, "_internal_context", None)
    flag = getattr(context, "is_internal_call", None)
    return flag if isinstance(flag, ContextVar) else None


def completion(litellm: Any, **kwargs: Any) -> Any:
    """``litellm.completion(**kwargs)``, without LiteLLM's success logging when no one would hear of it
    (:func:`logging_unheard`).

    LiteLLM hands every successful call to a thread pool (``executor.submit(logging_obj.success_handler, ...)`` in
    ``litellm/utils.py``'s wrapper) that builds the logging payload and prices the call again even when no callback
    is registered: about 1.5 ms of CPU a call here, which competes with the loop for the interpreter lock
    (bench/RESULTS.md, the loop). LiteLLM skips that hand-off for its own nested calls, marked by its private
    ``is_internal_call`` context variable; it is set here for the call only. The reply, its usage and its cost
    (``_hidden_params["response_cost"]``, set before the hand-off) are the same. A LiteLLM without that variable,
    or with a callback registered, is called as it is (tests/test_litellm_patches.py checks both against the
    installed LiteLLM)."""
    flag = _internal_call_flag(litellm)
    if flag is None or not logging_unheard(litellm):
        return litellm.completion(**kwargs)
    token = flag.set(True)
    try:
        return litellm.completion(**kwargs)
    finally:
        flag.reset(token)
