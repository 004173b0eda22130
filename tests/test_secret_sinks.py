"""A known secret that reaches an observation is redacted in every place ThinkFlow shows or writes text: the live
view (streamed text included), the printed answer, the JSON result, the session file, the trace, long-term memory
(as stored, and `memory export`) and error messages. The secrets are an interpolated ``${VAR}`` (the model's key)
and a provider key the agent never names (``ANTHROPIC_API_KEY``) -- both read by the agent from a ``.env`` file,
and echoed by a tool."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st
from scripted_servers import error, stream, text, tool_calls

from thinkflow.cli import main
from thinkflow.cli.render import LiveView, _safe_cut
from thinkflow.redaction import Redactor, environment_secrets, is_credential_name
from thinkflow.run import events as ev

MODEL_KEY = "sk-model-key-0123456789abcdef"       # interpolated into model.api_key from ${TF_SINK_KEY}
PROVIDER_KEY = "sk-ant-provider-key-9876543210zyx"  # only in the environment, as ANTHROPIC_API_KEY


class FakeEmbedder:
    """A deterministic 16-dimensional embedder (the real one needs torch; the store under test is real Chroma)."""

    dimension = 16

    def __init__(self, model=None, **_):
        self.name = "all-MiniLM-L6-v2"

    def embed(self, texts):
        out = []
        for t in texts:
            digest = hashlib.sha256(t.encode()).digest()
            vec = [b - 127.5 for b in digest[:16]]
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([v / norm for v in vec])
        return out

    def embed_query(self, text):
        return self.embed([text])


@pytest.fixture
def project(tmp_path, monkeypatch, openai_server):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TF_SINK_KEY", MODEL_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", PROVIDER_KEY)
    import thinkflow.memory.longterm as longterm

    monkeypatch.setattr(longterm, "Embedder", FakeEmbedder)
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={MODEL_KEY}\nANTHROPIC_API_KEY={PROVIDER_KEY}\n")
    (tmp_path / "echo_mod.py").write_text(
        "import os\n\n"
        "def echo_header(name: str) -> str:\n"
        "    \"\"\"Echo the request header a server would receive.\"\"\"\n"
        "    return f'X-Api-Key: {os.environ[name]}'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "echo.yaml").write_text(
        "version: 1\nname: echo_header\ndescription: Echo a header.\nkind: python\nentrypoint: echo_mod:echo_header\n")
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: leaky\n"
        f"model: {{name: openai/test, api_base: '{openai_server.url}', api_key: '${{TF_SINK_KEY}}', num_retries: 0}}\n"
        "prompt: {text: You help.}\n"
        "tools: [read_file, echo_header]\n"
        "workspace: .\n"
        "loop: {style: native, max_steps: 5}\n"
        "memory: {long_term: {collection: sinks, remember: [final_answer, tool_results]}}\n")
    return agent


def assert_clean(text: str) -> None:
    assert MODEL_KEY not in text
    assert PROVIDER_KEY not in text


def test_a_secret_in_an_observation_is_redacted_in_every_sink(project, tmp_path, openai_server):
    openai_server.push(
        tool_calls([("read_file", {"path": ".env"}, "c1")]),
        tool_calls([("echo_header", {"name": "ANTHROPIC_API_KEY"}, "c2")]),
        stream(f"The keys are {MODEL_KEY} and {PROVIDER_KEY}.", chunk=3),
    )
    result = CliRunner().invoke(main, ["run", str(project), "Show me the keys", "--session", "s1", "--stream"])
    assert result.exit_code == 0, result.output
    # the model itself saw the observation (redacting what the model sees is not this layer's job)
    assert MODEL_KEY in openai_server.requests[1]["messages"][-1]["content"]
    # printed answer and live view (the observation, the echoed header, the streamed text cut mid-secret)
    assert result.stdout == "The keys are *** and ***.\n"
    assert_clean(result.stderr)
    assert "OPENAI_API_KEY=***" in result.stderr and "X-Api-Key: ***" in result.stderr
    assert "The keys are *** and ***." in result.stderr
    # session file
    session = (tmp_path / ".thinkflow" / "sessions" / "leaky" / "s1.json").read_text(encoding="utf-8")
    assert_clean(session)
    turn = json.loads(session)["turns"][0]
    assert turn["answer"] == "The keys are *** and ***."
    assert any("OPENAI_API_KEY=***\nANTHROPIC_API_KEY=***" in (m.get("content") or "") for m in turn["messages"])
    # trace
    trace = next((tmp_path / ".thinkflow" / "runs").glob("*.jsonl")).read_text(encoding="utf-8")
    assert_clean(trace)
    # long-term memory as stored (read with Chroma directly, below ThinkFlow's own reading) and as exported
    import chromadb

    from thinkflow.memory.longterm import _settings

    client = chromadb.PersistentClient(path=str(tmp_path / ".thinkflow" / "memory"), settings=_settings())
    stored = client.get_collection("sinks").get(include=["documents", "metadatas"])
    assert len(stored["documents"]) == 3  # the answer and two tool results
    assert_clean(json.dumps(stored["documents"]) + json.dumps(stored["metadatas"]))
    assert any("X-Api-Key: ***" in d for d in stored["documents"])
    exported = CliRunner().invoke(main, ["memory", "export", "out.jsonl", "--agent", str(project)])
    assert exported.exit_code == 0, exported.output
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert_clean(lines)
    assert len(lines.splitlines()) == 3


def test_a_secret_in_a_provider_error_and_the_json_result_is_redacted(project, openai_server):
    openai_server.push(error(400, f"invalid key {MODEL_KEY}; the other one {PROVIDER_KEY} is fine"))
    failed = CliRunner().invoke(main, ["run", str(project), "hi"])
    assert failed.exit_code == 4
    assert_clean(failed.output)
    assert "invalid key ***" in failed.stderr
    openai_server.push(text(f"it is {PROVIDER_KEY}"))
    as_json = CliRunner().invoke(main, ["run", str(project), "hi", "--json"])
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    assert data["answer"] == "it is ***"
    assert_clean(json.dumps(data))


def test_a_memory_stored_before_a_key_was_known_is_shown_redacted(project, tmp_path):
    import chromadb

    from thinkflow.memory.longterm import _settings

    from thinkflow.config.loader import load_agent
    from thinkflow.memory.longterm import LongTermMemory

    spec = load_agent(project).memory.long_term
    with LongTermMemory.open(spec, secrets=()) as store:
        store.redact = Redactor()  # as an older ThinkFlow wrote it: in clear
        store.remember(f"the key was {PROVIDER_KEY}")
    client = chromadb.PersistentClient(path=str(tmp_path / ".thinkflow" / "memory"), settings=_settings())
    assert PROVIDER_KEY in client.get_collection("sinks").get()["documents"][0]
    shown = CliRunner().invoke(main, ["memory", "list", "--agent", str(project), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)[0]["content"] == "the key was ***"


def test_credential_names_cover_every_key_name_litellm_reads():
    """Every environment variable LiteLLM's source reads a key, token, secret or password from matches
    :func:`is_credential_name` (scanned from the installed LiteLLM, so a new provider's name is checked too)."""
    import litellm

    root = Path(litellm.__file__).parent
    read = re.compile(r"(?:get_secret(?:_str|_bool)?|os\.environ\.get|os\.getenv)\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']")
    names = set()
    for source in root.rglob("*.py"):
        names.update(read.findall(source.read_text(encoding="utf-8", errors="replace")))
    credential = {n for n in names if re.search(r"API_?KEY$|_TOKEN$|_SECRET$|_SECRET_ACCESS_KEY$|_PASSWORD$|_KEY$", n)}
    assert len(credential) > 150  # the scan found LiteLLM's providers
    assert {"OPENAI_API_KEY", "AZURE_API_KEY", "ANTHROPIC_API_KEY", "TOGETHERAI_API_KEY"} <= credential
    assert sorted(n for n in credential if not is_credential_name(n)) == []
    for other in ("OPENAI_API_BASE", "AWS_WEB_IDENTITY_TOKEN_FILE", "TOKENIZERS_PARALLELISM", "AZURE_API_VERSION",
                  "HF_HUB_OFFLINE", "PATH", "KEYBOARD"):
        assert not is_credential_name(other), other
    for extra in ("WATSONX_APIKEY", "TOGETHER_AI_TOKEN", "AWS_ACCESS_KEY_ID", "AZURE_CLIENT_SECRET", "HF_TOKEN",
                  "OPENAI_API_KEY_2", "SNOWFLAKE_JWT", "VERTEXAI_CREDENTIALS"):
        assert is_credential_name(extra), extra


def test_environment_secrets_skip_short_values_and_other_names():
    env = {"OPENAI_API_KEY": " sk-abcdefgh123 ", "GITHUB_TOKEN": "none", "OPENAI_API_BASE": "http://127.0.0.1:9/v1",
           "HF_TOKEN": "sk-abcdefgh123"}
    assert environment_secrets(env) == ("sk-abcdefgh123",)


@settings(max_examples=60, deadline=None)
@given(secret=st.text(alphabet="abcdef-_0123", min_size=8, max_size=20),
       prefix=st.text(alphabet="abc xyz", max_size=15), suffix=st.text(alphabet="abc xyz", max_size=15),
       cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=6))
def test_streamed_text_never_shows_a_secret_whatever_the_pieces(secret, prefix, suffix, cuts):
    from io import StringIO

    from rich.console import Console

    whole = prefix + secret + suffix
    points = sorted({min(c, len(whole)) for c in cuts} | {0, len(whole)})
    buffer = StringIO()
    view = LiveView(Console(file=buffer, width=200), stream=True, redactor=Redactor([secret]))
    for a, b in zip(points, points[1:]):
        view(ev.TextDelta(step=1, text=whole[a:b]))
        assert secret not in buffer.getvalue()
    view.close()
    assert secret not in buffer.getvalue()
    assert buffer.getvalue().rstrip("\n") == Redactor([secret]).text(whole)


def test_safe_cut_holds_back_only_a_possible_secret_start():
    assert _safe_cut("hello sk-ab", ["sk-abcdef"]) == 6
    assert _safe_cut("hello world", ["sk-abcdef"]) == 11
    assert _safe_cut("hello s", ["sk-abcdef"]) == 6


def test_trace_show_hides_a_key_the_environment_holds_now(tmp_path, monkeypatch):
    from thinkflow.run.trace import TraceWriter

    with TraceWriter(tmp_path / "old.jsonl") as w:  # written when the key was not known
        w.write(ev.ToolReturned(step=1, name="read_file", status="ok", observation=f"KEY={PROVIDER_KEY}"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", PROVIDER_KEY)
    for args in (["--full"], ["--json"]):
        shown = CliRunner().invoke(main, ["trace", "show", str(tmp_path / "old.jsonl"), *args])
        assert shown.exit_code == 0
        assert PROVIDER_KEY not in shown.output and "KEY=***" in shown.output
