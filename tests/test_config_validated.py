"""The record of configs that passed their schema (thinkflow.config.validated): a document that passed is not
checked again; a changed document, another kind, a document with issues and an unwritable cache are checked."""

from __future__ import annotations

import datetime
import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from thinkflow.config import schemas, validated
from thinkflow.config.loader import load_agent
from thinkflow.errors import SpecError


@pytest.fixture
def record(tmp_path, monkeypatch):
    """The record on, in a fresh cache directory; returns that directory."""
    monkeypatch.setenv("THINKFLOW_VALIDATION_CACHE", "1")
    monkeypatch.setenv("THINKFLOW_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "validated"


@pytest.fixture
def checks(monkeypatch):
    """Counts the jsonschema checks that really run (validator and metaschema iter_errors)."""
    counted = {"agent": 0, "metaschema": 0}
    real_validator, real_meta = schemas.validator, schemas._metaschema_validator

    class Counting:
        def __init__(self, inner, name):
            self.inner, self.name = inner, name

        def iter_errors(self, data):
            counted[self.name] += 1
            return self.inner.iter_errors(data)

    monkeypatch.setattr(schemas, "validator", lambda kind: Counting(real_validator(kind), "agent"))
    monkeypatch.setattr(schemas, "_metaschema_validator", lambda: Counting(real_meta(), "metaschema"))
    return counted


AGENT = "version: 1\nname: a\nmodel: openai/gpt-4o-mini\ntools: [calculator]\n"


def test_a_valid_agent_is_checked_once_then_found_in_the_record(tmp_path, record, checks):
    agent = tmp_path / "a.yaml"
    agent.write_text(AGENT, encoding="utf-8")
    first = load_agent(agent)
    assert checks["agent"] == 1
    assert stat.S_IMODE(record.stat().st_mode) == 0o700  # digests of the user's documents
    assert len([p for p in record.rglob("*") if p.is_file()]) == 1  # one digest file, empty
    assert all(p.stat().st_size == 0 for p in record.rglob("*") if p.is_file())
    second = load_agent(agent)
    assert checks["agent"] == 1  # not checked again
    assert (second.name, second.model.name, [t.name for t in second.tools]) == (
        first.name, first.model.name, [t.name for t in first.tools])


def test_a_changed_agent_is_checked_again_and_its_issues_are_reported_every_time(tmp_path, record, checks):
    agent = tmp_path / "a.yaml"
    agent.write_text(AGENT, encoding="utf-8")
    load_agent(agent)
    agent.write_text(AGENT + "loop: {max_stepz: 3}\n", encoding="utf-8")
    for expected_checks in (2, 3):
        with pytest.raises(SpecError) as info:
            load_agent(agent)
        assert "unknown key 'max_stepz'" in str(info.value.issues[0])
        assert checks["agent"] == expected_checks  # a document with issues is never recorded


def test_an_environment_variable_the_agent_reads_is_part_of_the_document(tmp_path, record, checks, monkeypatch):
    agent = tmp_path / "a.yaml"
    agent.write_text("version: 1\nname: ${AGENT_NAME}\nmodel: openai/x\n", encoding="utf-8")
    monkeypatch.setenv("AGENT_NAME", "fine")
    load_agent(agent)
    monkeypatch.setenv("AGENT_NAME", "not fine!")  # breaks the name's pattern: must be checked, not found
    with pytest.raises(SpecError) as info:
        load_agent(agent)
    assert checks["agent"] == 2 and "name" in str(info.value.issues[0])


def test_tool_parameter_schemas_are_recorded_too(tmp_path, record, checks):
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "t.yaml").write_text(
        "version: 1\nname: shout\ndescription: Shout.\nkind: shell\ncommand: [echo, '{text}']\n"
        "parameters:\n  type: object\n  properties: {text: {type: string}}\n  required: [text]\n", encoding="utf-8")
    agent = tmp_path / "a.yaml"
    agent.write_text("version: 1\nname: a\nmodel: openai/x\ntools: [shout]\n", encoding="utf-8")
    load_agent(agent)
    assert checks["metaschema"] == 1
    load_agent(agent)
    assert checks["metaschema"] == 1


def test_the_record_is_off_by_environment_and_then_writes_nothing(tmp_path, record, checks, monkeypatch):
    monkeypatch.setenv("THINKFLOW_VALIDATION_CACHE", "0")
    agent = tmp_path / "a.yaml"
    agent.write_text(AGENT, encoding="utf-8")
    load_agent(agent)
    load_agent(agent)
    assert checks["agent"] == 2 and not record.exists()


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_cache_only_means_no_record(tmp_path, monkeypatch, checks):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setenv("THINKFLOW_VALIDATION_CACHE", "1")
    monkeypatch.setenv("THINKFLOW_CACHE_DIR", str(locked))
    agent = tmp_path / "a.yaml"
    agent.write_text(AGENT, encoding="utf-8")
    load_agent(agent)
    load_agent(agent)
    assert checks["agent"] == 2


def test_an_unwritable_cache_directory_is_skipped(tmp_path, monkeypatch, checks):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("THINKFLOW_VALIDATION_CACHE", "1")
    monkeypatch.setenv("THINKFLOW_CACHE_DIR", str(blocker))  # mkdir under a file fails for root too
    agent = tmp_path / "a.yaml"
    agent.write_text(AGENT, encoding="utf-8")
    assert load_agent(agent).name == "a"
    load_agent(agent)
    assert checks["agent"] == 2


def test_keys_tell_types_and_kinds_apart(record):
    assert validated.key("agent", {"a": True}) != validated.key("agent", {"a": "true"})
    assert validated.key("agent", {"a": 1}) != validated.key("agent", {"a": 1.0})
    assert validated.key("agent", {"a": datetime.date(2026, 1, 2)}) is None  # not JSON's own type: always checked
    assert validated.key("agent", {"tools": ("calculator",)}) is None  # a tuple would encode as a list
    assert validated.key("agent", {"a": 1}) != validated.key("tool", {"a": 1})
    assert validated.key("agent", {"b": 2, "a": 1}) == validated.key("agent", {"a": 1, "b": 2})
    assert validated.key("agent", {1: "not a string key"}) is None  # not encodable as JSON: always checked


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                           max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(data=json_values)
def test_the_record_never_changes_a_result(data):
    """For any document: a recorded document has no issues, and the check with the record gives what it gives
    without it."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        env = {"THINKFLOW_VALIDATION_CACHE": "1", "THINKFLOW_CACHE_DIR": folder}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            first = schemas.validate(data, "tool")
            second = schemas.validate(data, "tool")
            recorded = validated.passed(validated.key("tool", data))
        finally:
            for k, v in old.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        os.environ["THINKFLOW_VALIDATION_CACHE"] = "0"
        assert [str(i) for i in schemas.validate(data, "tool")] == [str(i) for i in first] == [
            str(i) for i in second]
        assert recorded == (first == [])
