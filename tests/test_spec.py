"""spec.py: the dataclasses stay in step with the schemas, and the builders apply the schema's defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from thinkflow.config import spec as S
from thinkflow.config import specbuild as B
from thinkflow.config.schemas import load_schema

# Dataclass fields filled by the loader rather than written in a file.
DERIVED = {
    S.AgentSpec: {"tool_specs", "source", "secrets"},
    S.ToolSpec: {"source", "secrets", "response_json_path"},
}
# Schema keys that are not a field of their own.
NOT_FIELDS = {"$schema", "version"}


def fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} - DERIVED.get(cls, set())


def props(schema) -> set[str]:
    return set(schema["properties"]) - NOT_FIELDS


def tool_props() -> set[str]:
    schema = load_schema("tool")
    keys = props(schema)
    for branch in schema["allOf"]:
        keys |= {k for k, v in branch["then"]["properties"].items() if v is not True}
    return keys - {"response"}


PAIRS = [
    (S.AgentSpec, lambda: props(load_schema("agent"))),
    (S.ModelSpec, lambda: props(load_schema("model"))),
    (S.PromptSpec, lambda: props(load_schema("prompt"))),
    (S.LoopSpec, lambda: props(load_schema("loop"))),
    (S.MemorySpec, lambda: props(load_schema("memory"))),
    (S.ShortTermSpec, lambda: props(load_schema("memory")["properties"]["short_term"])),
    (S.LongTermSpec, lambda: props(load_schema("memory")["properties"]["long_term"])),
    (S.RecallSpec, lambda: props(load_schema("memory")["properties"]["long_term"]["properties"]["recall"])),
    (S.RetentionSpec, lambda: props(load_schema("memory")["properties"]["long_term"]["properties"]["retention"])),
    (S.PlannerSpec, lambda: props(load_schema("agent")["properties"]["planner"])),
    (S.ToolRef, lambda: props(load_schema("agent")["properties"]["tools"]["items"])),
    (S.ToolSpec, tool_props),
    (S.HttpRequestSpec, lambda: props(load_schema("tool")["allOf"][2]["then"]["properties"]["request"])),
]


@pytest.mark.parametrize("cls, schema_keys", PAIRS, ids=[c.__name__ for c, _ in PAIRS])
def test_schema_and_dataclass_in_step(cls, schema_keys):
    assert schema_keys() == fields(cls)


def test_tool_response_json_path_maps_to_the_response_mapping():
    then = load_schema("tool")["allOf"][2]["then"]["properties"]
    assert set(then["response"]["properties"]) == {"json_path"}
    assert "response_json_path" in {f.name for f in dataclasses.fields(S.ToolSpec)}


def schema_defaults(schema):
    return {k: v["default"] for k, v in schema["properties"].items() if isinstance(v, dict) and "default" in v}


@pytest.mark.parametrize("cls, schema", [
    (S.ModelSpec, lambda: load_schema("model")),
    (S.LoopSpec, lambda: load_schema("loop")),
    (S.PlannerSpec, lambda: load_schema("agent")["properties"]["planner"]),
    (S.RecallSpec, lambda: load_schema("memory")["properties"]["long_term"]["properties"]["recall"]),
    (S.LongTermSpec, lambda: load_schema("memory")["properties"]["long_term"]),
])
def test_schema_defaults_match_dataclass_defaults(cls, schema):
    built = cls(**({"collection": "c"} if cls is S.LongTermSpec else {}))
    for key, default in schema_defaults(schema()).items():
        value = getattr(built, key)
        assert (list(value) if isinstance(value, tuple) else value) == default, key


def test_agent_defaults_match_schema():
    built = B.agent_from_dict({"version": 1, "name": "a"})
    assert (built.description, built.max_depth, built.workspace, built.tools) == ("", 3, Path("."), ())
    assert built.model == S.ModelSpec() and built.loop == S.LoopSpec() and built.memory == S.MemorySpec()


def test_model_from_string_and_mapping():
    assert B.model_from_dict("ollama_chat/qwen2.5:7b") == S.ModelSpec(name="ollama_chat/qwen2.5:7b")
    m = B.model_from_dict({"name": "x", "fallbacks": ["y"], "stop": ["END"], "timeout": 5, "extra": {"num_ctx": 8}})
    assert (m.fallbacks, m.stop, m.timeout, m.extra) == (("y",), ("END",), 5.0, {"num_ctx": 8})


def test_tool_from_dict_splits_shell_string_and_resolves_cwd(tmp_path):
    t = B.tool_from_dict({"name": "t", "description": "d", "kind": "shell", "command": "echo '{a b}' x",
                          "cwd": "sub/../w", "parameters": {"type": "object"}}, base_dir=tmp_path)
    assert t.command == ("echo", "{a b}", "x") and t.cwd == tmp_path / "w"
    h = B.tool_from_dict({"name": "h", "description": "d", "kind": "http", "request": {"url": "https://x/{q}",
                          "method": "post"}, "response": {"json_path": "a.b"}})
    assert (h.request.method, h.request.url, h.response_json_path) == ("POST", "https://x/{q}", "a.b")


def test_memory_paths_resolve_against_the_agent_folder(tmp_path):
    m = B.memory_from_dict({"long_term": {"collection": "c", "path": "../mem", "remember": ["tool_results"]}},
                           base_dir=tmp_path / "agents.d")
    assert m.long_term.path == tmp_path / "mem" and m.long_term.remember == ("tool_results",)


def test_tool_ref_rules_become_tuples():
    ref = B.tool_ref_from_dict({"name": "read_file", "allow": {"path": ["^data/"]}, "confirm": False})
    assert ref == S.ToolRef(name="read_file", confirm=False, allow={"path": ("^data/",)})
