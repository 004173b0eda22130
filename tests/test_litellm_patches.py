"""The start-up shim for LiteLLM's file-id rewrite (thinkflow.model.litellm_patches): a request without files skips
it (and the import of ``litellm.proxy._types`` it makes); a request with a list content still goes through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thinkflow.model.litellm_patches import _skipping, holds_file_parts, skip_file_ids_without_files

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
