"""OpenTelemetry GenAI spans of runs: structure and attributes with the SDK's in-memory exporter, and the real OTLP
export of ``thinkflow-run`` decoded by an OTLP/HTTP receiver on 127.0.0.1 -- for a run with a tool call, a failing
tool and a sub-agent. Telemetry is off by default, and then the SDK is never imported."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from scripted_servers import text, tool_calls
from thinkflow.agent import build
from thinkflow.config.spec import AgentSpec, LoopSpec, ModelSpec, PromptSpec, SubAgentRef, TelemetrySpec, ToolRef
from thinkflow.run.loop import run
from thinkflow.run.telemetry import Telemetry, TelemetrySettings, provider_name, settings_from

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

KEY = "sk-otel-secret-0123456789"
BIN = Path(sys.executable).parent


def _spec(server, tmp_path, name, *, tools=(), agents=()) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.",
                     model=ModelSpec(name="openai/test-model", api_base=server.url, api_key=KEY, num_retries=0),
                     prompt=PromptSpec(text=f"You are {name}."), tools=tuple(ToolRef(t) for t in tools),
                     workspace=tmp_path, loop=LoopSpec(style="native", max_steps=5), agents=tuple(agents))


def _script(server) -> None:
    server.push(
        tool_calls([("calculator", {"expression": "2+3"}, "c_ok"), ("read_file", {"path": "missing.txt"}, "c_bad")]),
        tool_calls([("helper", {"task": "say hi"}, "c_sub")]),
        text("hi from the helper", usage=(7, 3)),  # the helper's one step
        text(f"done: 5 (key {KEY})", usage=(20, 4)),
    )


def _run_with_spans(server, tmp_path, capture: bool = False):
    helper = _spec(server, tmp_path, "helper")
    boss = _spec(server, tmp_path, "boss", tools=("calculator", "read_file"),
                 agents=(SubAgentRef(name="helper", description="Says hi.", spec=helper),))
    _script(server)
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(TelemetrySettings(capture_content=capture), exporter=exporter)
    agent = build(boss)
    result = run(agent, "add 2 and 3, read missing.txt, ask the helper", on_event=telemetry.recorder(
        secrets=agent.secrets), trace_dir=tmp_path / "runs")
    telemetry.shutdown()
    return result, exporter.get_finished_spans()


def test_spans_follow_the_genai_conventions_and_nest_the_sub_agent(openai_server, tmp_path):
    result, spans = _run_with_spans(openai_server, tmp_path)
    assert result.status == "completed"
    by_name: dict[str, list] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert sorted(by_name) == ["chat test-model", "execute_tool calculator", "execute_tool helper",
                               "execute_tool read_file", "invoke_agent boss", "invoke_agent helper"]
    root, = by_name["invoke_agent boss"]
    assert root.parent is None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "boss"
    assert root.attributes["gen_ai.provider.name"] == "openai"
    assert root.attributes["gen_ai.request.model"] == "test-model"
    assert root.attributes["thinkflow.run.id"] == result.run_id
    assert root.attributes["thinkflow.run.status"] == "completed"
    assert root.attributes["gen_ai.usage.input_tokens"] == 10 + 10 + 7 + 20
    assert root.status.status_code != StatusCode.ERROR

    chats = by_name["chat test-model"]
    assert len(chats) == 4  # three for boss, one for helper
    boss_chats = [c for c in chats if c.parent.span_id == root.context.span_id]
    assert [c.attributes["thinkflow.step"] for c in boss_chats] == [1, 2, 3]
    last = boss_chats[-1]
    assert last.attributes["gen_ai.operation.name"] == "chat"
    assert last.attributes["gen_ai.usage.input_tokens"] == 20
    assert last.attributes["gen_ai.usage.output_tokens"] == 4
    assert last.attributes["gen_ai.response.model"] == "test-model"
    assert tuple(last.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert "gen_ai.input.messages" not in last.attributes  # content capture is off by default

    calc, = by_name["execute_tool calculator"]
    assert calc.parent.span_id == root.context.span_id
    assert calc.attributes["gen_ai.tool.name"] == "calculator"
    assert calc.attributes["gen_ai.tool.call.id"] == "c_ok"
    assert calc.attributes["thinkflow.step"] == 1
    assert calc.status.status_code != StatusCode.ERROR and "error.type" not in calc.attributes
    bad, = by_name["execute_tool read_file"]
    assert bad.attributes["error.type"] == "error"
    assert bad.status.status_code == StatusCode.ERROR

    tool_span, = by_name["execute_tool helper"]
    sub_run, = by_name["invoke_agent helper"]
    assert sub_run.parent.span_id == tool_span.context.span_id  # the sub-agent's run nests under its tool call
    assert sub_run.context.trace_id == root.context.trace_id
    sub_chat, = [c for c in chats if c.parent.span_id == sub_run.context.span_id]
    assert sub_chat.attributes["gen_ai.usage.input_tokens"] == 7
    for child in (calc, bad, tool_span, *boss_chats):  # children lie inside their parent's time
        assert root.start_time <= child.start_time <= child.end_time <= root.end_time


def test_content_is_captured_only_when_asked_and_secrets_are_redacted(openai_server, tmp_path):
    _, spans = _run_with_spans(openai_server, tmp_path, capture=True)
    chats = [s for s in spans if s.name == "chat test-model"]
    first_in = json.loads(chats[0].attributes["gen_ai.input.messages"])
    assert first_in[-1] == {"role": "user", "parts": [{"type": "text", "content":
                                                        "add 2 and 3, read missing.txt, ask the helper"}]}
    outputs = [s.attributes["gen_ai.output.messages"] for s in chats]
    assert any("done: 5 (key ***)" in o for o in outputs)
    assert not any(KEY in str(s.attributes) for s in spans)
    calc = next(s for s in spans if s.name == "execute_tool calculator")
    assert json.loads(calc.attributes["gen_ai.tool.call.arguments"]) == {"expression": "2+3"}
    assert calc.attributes["gen_ai.tool.call.result"].strip() == "5"


def test_settings_from_the_environment_flag_and_block():
    assert settings_from({}) is None
    assert settings_from({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == TelemetrySettings()
    assert settings_from({}, flag=True) == TelemetrySettings()
    assert settings_from({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                          OTEL_CAPTURE: "true"}, flag=True) == TelemetrySettings(protocol="grpc", capture_content=True)
    block = TelemetrySpec(enabled=True, endpoint="http://collector:4318", headers={"x-api-key": "k"},
                          service_name="svc")
    assert settings_from({}, block) == TelemetrySettings(endpoint="http://collector:4318", headers=(("x-api-key", "k"),),
                                                         service_name="svc")
    assert settings_from({"OTEL_SDK_DISABLED": "true"}, block, flag=True) is None
    assert settings_from({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}) is None
    assert settings_from({}, TelemetrySpec(enabled=False)) is None


OTEL_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def test_shared_telemetry_is_one_per_settings():
    from thinkflow.run.telemetry import shared

    settings = TelemetrySettings(endpoint="http://127.0.0.1:9", headers=(("a", "b"),))
    assert shared(settings) is shared(TelemetrySettings(endpoint="http://127.0.0.1:9", headers=(("a", "b"),)))


@pytest.mark.parametrize("model, provider", [("openai/gpt-4o", "openai"), ("ollama_chat/qwen2.5:7b", "ollama"),
                                             ("anthropic/claude", "anthropic"), ("gemini/g", "gcp.gemini"),
                                             ("local/qwen2.5-coder-1.5b", "llama.cpp"), ("gpt-4o", "openai"),
                                             ("newprov/x", "newprov")])
def test_provider_names(model, provider):
    assert provider_name(model) == provider


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: decodes each POST /v1/traces body (protobuf) into the server's list."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.received.append((self.path, dict(self.headers), request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind)


def test_thinkflow_run_exports_over_otlp_http_to_a_real_receiver(openai_server, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (tmp_path / "helper.yaml").write_text(
        "version: 1\nname: helper\ndescription: Says hi.\n"
        f"model: {{name: openai/test-model, api_base: '{openai_server.url}', api_key: '${{TF_KEY}}', num_retries: 0}}\n"
        "loop: {style: native}\n", encoding="utf-8")
    agent = tmp_path / "boss.yaml"
    agent.write_text(
        "version: 1\nname: boss\n"
        f"model: {{name: openai/test-model, api_base: '{openai_server.url}', api_key: '${{TF_KEY}}', num_retries: 0}}\n"
        "tools: [calculator, read_file]\nagents: [{agent: helper.yaml}]\nloop: {style: native, max_steps: 5}\n"
        "telemetry: {enabled: true, headers: {x-collector-key: '${TF_KEY}'}, service_name: tf-test}\n",
        encoding="utf-8")
    _script(openai_server)
    env = {**os.environ, "TF_KEY": KEY, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
           OTEL_CAPTURE: "true"}
    try:
        done = subprocess.run([str(BIN / "thinkflow-run"), str(agent), "add 2 and 3, then ask the helper", "-q"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("done: 5 (key ")
    assert server.received, "nothing was exported"
    path, headers, _ = server.received[0]
    assert path == "/v1/traces"
    assert headers.get("x-collector-key") == KEY  # the header reaches the collector; it is never in a span
    spans, resources = [], []
    for _, _, request in server.received:
        for rs in request.resource_spans:
            resources.append({a.key: _value(a.value) for a in rs.resource.attributes})
            for ss in rs.scope_spans:
                assert ss.scope.name == "thinkflow"
                spans += list(ss.spans)
    assert all(r["service.name"] == "tf-test" for r in resources)
    names = sorted(s.name for s in spans)
    assert names == sorted(["invoke_agent boss", "chat test-model", "chat test-model", "chat test-model",
                            "execute_tool calculator", "execute_tool read_file", "execute_tool helper",
                            "invoke_agent helper", "chat test-model"])
    ids = {s.span_id: s for s in spans}
    sub_run = next(s for s in spans if s.name == "invoke_agent helper")
    assert ids[sub_run.parent_span_id].name == "execute_tool helper"
    bad = next(s for s in spans if s.name == "execute_tool read_file")
    attrs = {a.key: _value(a.value) for a in bad.attributes}
    assert attrs["error.type"] == "error" and attrs["gen_ai.tool.call.id"] == "c_bad"
    assert bad.status.code == 2  # STATUS_CODE_ERROR
    root = next(s for s in spans if s.name == "invoke_agent boss")
    assert {a.key: _value(a.value) for a in root.attributes}["thinkflow.run.status"] == "completed"
    assert KEY not in str(spans)


def test_telemetry_is_off_by_default_and_the_sdk_is_not_imported(openai_server, tmp_path):
    openai_server.push(text("fine"))
    agent = tmp_path / "a.yaml"
    agent.write_text("version: 1\nname: a\n"
                     f"model: {{name: openai/test-model, api_base: '{openai_server.url}', api_key: sk-x, "
                     "num_retries: 0}\nloop: {style: native}\n", encoding="utf-8")
    code = ("import sys\nfrom thinkflow.cli import main\n"
            f"try:\n    main(['run', {str(agent)!r}, 'hi', '-q'])\nexcept SystemExit as e:\n    print('exit', e.code)\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split("\n")[-3:] == ["exit 0", "[]", ""], done.stdout + done.stderr
