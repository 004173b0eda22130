"""The shims for LiteLLM (thinkflow.model.litellm_patches): a request without files skips its file-id rewrite (and the
import of ``litellm.proxy._types`` it makes), a request with a list content still goes through it; a call no
callback would hear of skips LiteLLM's success logging, checked against the installed LiteLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thinkflow.model.litellm_patches import (_skipping, completion, holds_file_parts, logging_unheard,
                                            skip_file_ids_without_files)

RUNNER = Path(__file__).resolve().parent.parent / "runner"

FILE_PART = {"type": "file", "file": {"file_id": "file-abc"}}


@pytest.mark.parametrize("messages, holds", [
    ([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], False),
    ([{"role": "user", "content": None}, {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
      {"role": "tool", "content": "42", "tool_call_id": "c"}], False),  # only user turns can carry a file
    ([{"role": "user", "content": [{"type": "text", "text": "hi"}, FILE_PART]}], True),
    ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], True),  # a list: LiteLLM decides
    ([("user", "hi")], True),  # not a dict: LiteLLM decides
    ("not a list", True),
])
def test_holds_file_parts(messages, holds):
    assert holds_file_parts(messages) is holds


def test_the_wrapper_hands_files_to_litellm_and_returns_the_rest_as_is():
    seen = []

    def original(messages, model_id, model_file_id_mapping):
        seen.append(messages)
        return ["rewritten"]

    update = _skipping(original)
    plain = [{"role": "user", "content": "hi"}]
    assert update(messages=plain, model_id=None, model_file_id_mapping={}) is plain and seen == []
    with_file = [{"role": "user", "content": [FILE_PART]}]
    assert update(messages=with_file, model_id="m", model_file_id_mapping={}) == ["rewritten"]
    assert update(with_file, "m", {}) == ["rewritten"]  # positional, as another LiteLLM might call it
    assert seen == [with_file, with_file]
    assert update.__name__ == "original" and update.thinkflow_skips_without_files


def test_a_litellm_without_the_function_is_left_alone():
    class Main:
        pass

    class Lite:
        main = Main()

    assert skip_file_ids_without_files(Lite()) is False
    assert not hasattr(Lite.main, "update_messages_with_model_file_ids")


SCRIPT = """
import json, sys
from thinkflow.model.providers import load_litellm
litellm = load_litellm()
load_litellm()  # idempotent: wrapped once
fn = litellm.main.update_messages_with_model_file_ids
plain = [{"role": "user", "content": "hi"}]
out = {"wrapped": fn.thinkflow_skips_without_files, "once": not hasattr(fn.__wrapped__, "__wrapped__"),
       "same": fn(messages=plain, model_id=None, model_file_id_mapping={}) is plain,
       "proxy_types_before": "litellm.proxy._types" in sys.modules}
with_file = [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}]
fn(messages=with_file, model_id=None, model_file_id_mapping={})
out["proxy_types_after_a_file"] = "litellm.proxy._types" in sys.modules
print(json.dumps(out))
"""


def test_the_real_litellm_is_wrapped_once_and_skips_its_proxy_import():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(RUNNER), os.environ.get("PYTHONPATH", "")]),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"wrapped": True, "once": True, "same": True, "proxy_types_before": False,
                   "proxy_types_after_a_file": True}


# --- success logging ----------------------------------------------------------------------------------------------

@pytest.fixture
def logging_submits(monkeypatch):
    """The success-logging jobs LiteLLM hands to its thread pool, counted (and still run)."""
    from litellm.litellm_core_utils import thread_pool_executor

    submitted = []
    real = thread_pool_executor.executor.submit

    def submit(fn, *args, **kwargs):
        submitted.append(getattr(args[0], "__name__", fn) if args else fn)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(thread_pool_executor.executor, "submit", submit)
    return submitted


def _ask(litellm, server, **extra):
    return completion(litellm, model="openai/gpt-4o-mini", api_base=server.url, api_key="sk-test",
                      messages=[{"role": "user", "content": "hi"}], **extra)


def test_a_call_no_callback_hears_of_hands_nothing_to_litellms_logging(openai_server, logging_submits):
    from scripted_servers import text

    from thinkflow.model.providers import load_litellm

    litellm = load_litellm()
    assert logging_unheard(litellm)
    openai_server.push(text("hello", usage=(12, 3)))
    reply = _ask(litellm, openai_server)
    assert reply.choices[0].message.content == "hello"
    assert reply._hidden_params["response_cost"] > 0  # priced all the same (gpt-4o-mini is in the price map)
    assert logging_submits == []
    openai_server.push(text("again"))
    litellm.completion(model="openai/gpt-4o-mini", api_base=openai_server.url, api_key="sk-test",
                       messages=[{"role": "user", "content": "hi"}])
    assert len(logging_submits) == 1  # LiteLLM called directly still logs: the flag was set for the call only


def test_a_registered_callback_still_hears_of_every_call(openai_server, logging_submits, monkeypatch):
    import threading

    from scripted_servers import text

    from thinkflow.model.providers import load_litellm

    litellm = load_litellm()
    heard = threading.Event()
    monkeypatch.setattr(litellm, "success_callback", [lambda kwargs, response, start, end: heard.set()])
    assert not logging_unheard(litellm)
    openai_server.push(text("hello"))
    assert _ask(litellm, openai_server).choices[0].message.content == "hello"
    assert heard.wait(10) and len(logging_submits) == 1


@pytest.mark.parametrize("setting, value", [("callbacks", ["langfuse"]), ("_async_success_callback", [print]),
                                            ("max_budget", 1.0)])
def test_any_callback_or_budget_keeps_the_logging(setting, value, monkeypatch):
    from thinkflow.model.providers import load_litellm

    litellm = load_litellm()
    assert logging_unheard(litellm)
    monkeypatch.setattr(litellm, setting, value)
    assert not logging_unheard(litellm)


def test_a_litellm_without_the_flag_is_called_as_it_is():
    class Bare:
        success_callback: list = []

        def completion(self, **kwargs):
            return ("called", kwargs)

    assert completion(Bare(), model="m") == ("called", {"model": "m"})
