"""`thinkflow run` / `thinkflow-run`: output modes, exit codes, sessions across processes, Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from scripted_servers import error, hang, text, tool_calls

from thinkflow.cli import main
from thinkflow.cli.run_cmd import EXIT_BY_STATUS, exit_code
from thinkflow.run.base import STATUSES

KEY = "sk-cli-test-0123456789"
BIN = Path(sys.executable).parent


def agent_yaml(tmp_path: Path, server, *, extra: str = "", name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        "version: 1\n"
        "name: tester\n"
        "model:\n"
        "  name: openai/test\n"
        f"  api_base: {server.url}\n"
        "  api_key: ${TF_TEST_KEY}\n"
        "  num_retries: 0\n"
        "prompt:\n"
        "  text: You are a tester for {{ who }}.\n"
        "  vars: {who: nobody}\n"
        "tools: [calculator]\n"
        "loop: {style: native, max_steps: 4}\n" + extra,
        encoding="utf-8",
    )
    return path


@pytest.fixture
def cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TF_TEST_KEY", KEY)
    return CliRunner()


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["TF_TEST_KEY"] = KEY
    out["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return out


def test_every_status_has_an_exit_code():
    assert set(EXIT_BY_STATUS) == set(STATUSES)
    assert [exit_code(s) for s in STATUSES] == [0, 1, 1, 1, 1, 1, 4, 130]


def test_run_prints_answer_and_writes_trace(cli, tmp_path, openai_server):
    openai_server.push(tool_calls([("calculator", {"expression": "2+2"}, "c")]), text("It is 4."))
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "What", "is", "2+2?",
                               "--var", "who=Ada"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "It is 4."
    assert "→ calculator" in result.stderr
    assert openai_server.requests[0]["messages"][0]["content"].startswith("You are a tester for Ada.")
    assert openai_server.requests[0]["messages"][1]["content"] == "What is 2+2?"
    traces = list((tmp_path / ".thinkflow" / "runs").glob("*.jsonl"))
    assert len(traces) == 1
    assert KEY not in traces[0].read_text(encoding="utf-8")


def test_a_var_the_prompt_does_not_use_is_a_config_error(cli, tmp_path, openai_server):
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "x", "--var", "woh=Ada"])
    assert result.exit_code == 3, result.output
    assert result.stderr.strip() == ("--var woh: the agent's prompt (prompt.text) has no variable 'woh'; "
                                     "it uses who (did you mean 'who'?)")
    assert openai_server.requests == []


RUNNER_SET = [
    ("task", "'task' is set by the runner (the run's task): pass the task as the command's argument"),
    ("tools", "'tools' is set by the runner (the tools the model may call): the agent's tools list decides it"),
    ("memories", "'memories' is set by the runner (the memories recalled for the task): memory.long_term recalls them"),
    ("agent_name", "'agent_name' is set by the runner (the agent's name): it is the agent's name"),
]


@pytest.mark.parametrize("name, says", RUNNER_SET, ids=[r[0] for r in RUNNER_SET])
def test_a_var_the_runner_sets_says_so(cli, tmp_path, openai_server, name, says):
    """--var task=X said "the agent's prompt has no variable 'task'; it uses who": misleading, the runner sets it."""
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "x", "--var", f"{name}=X"])
    assert result.exit_code == 3, result.output
    assert result.stderr.strip() == f"--var {name}: {says}"
    assert openai_server.requests == []


def test_an_unwritable_trace_dir_or_an_empty_model_is_a_usage_error(cli, tmp_path, openai_server):
    (tmp_path / "afile").write_text("x")
    agent = str(agent_yaml(tmp_path, openai_server))
    blocked = cli.invoke(main, ["run", agent, "x", "--trace-dir", str(tmp_path / "afile" / "runs")])
    assert blocked.exit_code == 2, blocked.output
    assert blocked.stderr.startswith(f"cannot write the trace {tmp_path / 'afile' / 'runs'}")
    assert blocked.stderr.rstrip().endswith("(choose another directory with --trace-dir)")
    empty = cli.invoke(main, ["run", agent, "x", "--model", " "])
    assert empty.exit_code == 2
    assert "Invalid value for --model: is empty: give a LiteLLM model string" in empty.stderr
    assert openai_server.requests == []


def test_quiet_prints_only_the_answer(cli, tmp_path, openai_server):
    openai_server.push(text("42"))
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "answer?", "--quiet"])
    assert result.exit_code == 0
    assert result.stdout == "42\n"
    assert result.stderr == ""


QUIET_ENDINGS = [
    ("model_error", [error(500, "server exploded")], "", 4, [],
     "model_error: openai failed with HTTP 500: server exploded (try again later, or add model.fallbacks)"),
    ("timeout", [hang()], "", 1, [],
     "timeout: the run timed out after 1 s (model calls * s, tools * s, ThinkFlow * s) while waiting for the model"),
    ("max_steps", [tool_calls([("calculator", {"expression": "1+1"})])],
     "No final answer was reached. Last result (calculator): 2\n", 1, ["--max-steps", "1"],
     "max_steps: reached max_steps (1) without a final answer"),
    ("max_steps_no_answer", [tool_calls([("nope", {"a": 1})])], "", 1, ["--max-steps", "1"],
     "max_steps: reached max_steps (1) without a final answer"),
]


@pytest.mark.parametrize("ending, replies, stdout, code, args, says", QUIET_ENDINGS, ids=[q[0] for q in QUIET_ENDINGS])
def test_quiet_still_says_why_a_run_did_not_complete(cli, tmp_path, openai_server, ending, replies, stdout, code,
                                                     args, says):
    # --quiet printed nothing at all for a run that ended with a model error (exit 4) or any other non-zero ending
    openai_server.push(*replies)
    path = agent_yaml(tmp_path, openai_server)
    if ending == "timeout":
        path.write_text(path.read_text().replace("max_steps: 4}", "max_steps: 4, timeout: 1}"))
    result = cli.invoke(main, ["run", str(path), "x", "--quiet", *args])
    assert result.exit_code == code, result.output
    assert result.stdout == stdout  # the (partial) answer alone
    pattern = r"\d+\.\d".join(re.escape(part) for part in says.split("*"))  # the timeout's split of its time
    assert re.fullmatch(pattern + "\n", result.stderr), result.stderr  # one line, the live view still off


def test_quiet_config_errors_are_printed(cli, tmp_path, openai_server):
    path = agent_yaml(tmp_path, openai_server, extra="temperatur: 3\n")
    result = cli.invoke(main, ["run", str(path), "x", "--quiet"])
    assert result.exit_code == 3
    assert f"{path}:13:1: temperatur: unknown key 'temperatur'" in result.stderr


def test_thinkflow_run_quiet_prints_a_model_error_and_a_ctrl_c(tmp_path, openai_server):
    path = str(agent_yaml(tmp_path, openai_server))
    openai_server.push(error(500, "server exploded"))
    proc = _run_proc(tmp_path, path, "x", "--quiet", entry="thinkflow-run")
    out, err = proc.communicate(timeout=240)
    assert (proc.returncode, out) == (4, "")
    assert err == "model_error: openai failed with HTTP 500: server exploded (try again later, or add model.fallbacks)\n"
    openai_server.push(hang())
    proc = _run_proc(tmp_path, path, "wait", "--quiet", entry="thinkflow-run")
    deadline = time.monotonic() + 240
    while len(openai_server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (130, "", "interrupted by the user\n")


def test_json_result(cli, tmp_path, openai_server):
    openai_server.push(text("42"))
    trace_dir = tmp_path / "traces"
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "answer?", "--json",
                               "--trace-dir", str(trace_dir)])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["status"] == "completed"
    assert data["answer"] == "42"
    assert data["steps"] == 1
    assert data["usage"]["total_tokens"] == 15
    assert data["trace"] == str(trace_dir / f"{data['run_id']}.jsonl")
    assert Path(data["trace"]).is_file()


def test_max_steps_exit_1(cli, tmp_path, openai_server):
    openai_server.push(tool_calls([("calculator", {"expression": "1+1"})]))
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "x", "--max-steps", "1", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["status"] == "max_steps"


def test_model_error_exit_4(cli, tmp_path, openai_server):
    openai_server.push(error(500, "server exploded"))
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "x"])
    assert result.exit_code == 4
    assert "model_error" in result.stderr


def test_config_error_exit_3_lists_issues(cli, tmp_path, openai_server):
    path = agent_yaml(tmp_path, openai_server, extra="temperatur: 3\n")
    result = cli.invoke(main, ["run", str(path), "x"])
    assert result.exit_code == 3
    assert f"{path}: 1 issue" in result.stderr
    assert f"{path}:13:1: temperatur: unknown key 'temperatur'" in result.stderr
    assert openai_server.requests == []


def test_config_error_json(cli, tmp_path, openai_server):
    path = agent_yaml(tmp_path, openai_server, extra="temperatur: 3\n")
    result = cli.invoke(main, ["run", str(path), "x", "--json"])
    assert result.exit_code == 3
    data = json.loads(result.stdout)
    assert data["status"] == "config_error"
    assert len(data["issues"]) == 1


@pytest.mark.parametrize(
    "args",
    [["run", "missing.yaml", "x"], ["run", "AGENT", "x", "--var", "novalue"], ["run", "AGENT", "x", "--session", "../x"],
     ["run", "AGENT", "--json"], ["run", "AGENT", "x", "--max-steps", "0"]],
)
def test_usage_errors_exit_2(cli, tmp_path, openai_server, args):
    path = str(agent_yaml(tmp_path, openai_server))
    result = cli.invoke(main, [path if a == "AGENT" else a for a in args])
    assert result.exit_code == 2, result.output
    assert openai_server.requests == []


def test_chat_mode_keeps_history_in_a_session(cli, tmp_path, openai_server):
    openai_server.push(text("Hello Ada."), text("You are Ada."))
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server))],
                        input="I am Ada.\n\nWho am I?\n/exit\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == ["Hello Ada.", "You are Ada."]
    second = openai_server.requests[1]["messages"]
    assert [m["content"] for m in second[1:]] == ["I am Ada.", "Hello Ada.", "Who am I?"]
    sessions = list((tmp_path / ".thinkflow" / "sessions" / "tester").glob("chat-*.json"))
    assert len(sessions) == 1
    assert len(json.loads(sessions[0].read_text(encoding="utf-8"))["turns"]) == 2


def test_ctrl_c_while_a_chat_turn_waits_for_the_model_client_skips_that_turn_only(cli, tmp_path, openai_server,
                                                                                 monkeypatch):
    """Ctrl-C while the first turn waits for the client's start (LiteLLM's import, the embedded model) used to end
    the chat with 130; it drops that turn, nothing sent, and the chat goes on."""
    from thinkflow.model.client import LiteLLMClient

    starts = []
    real_warm_up = LiteLLMClient.warm_up

    def warm_up(self):
        starts.append(1)
        if len(starts) == 1:
            raise KeyboardInterrupt
        return real_warm_up(self)

    monkeypatch.setattr(LiteLLMClient, "warm_up", warm_up)
    openai_server.push(text("Hello Ada."))
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server))], input="first\nI am Ada.\n/exit\n")
    assert result.exit_code == 0, result.output
    assert "(interrupted; /exit to leave)" in result.output
    assert result.stdout.splitlines()[-1:] == ["Hello Ada."]
    assert len(openai_server.requests) == 1
    assert [m["content"] for m in openai_server.requests[0]["messages"][1:]] == ["I am Ada."]


# ------------------------------------------------------------------------------------------------ processes


def test_thinkflow_run_is_thinkflow_run():
    direct = subprocess.run([str(BIN / "thinkflow-run"), "--help"], capture_output=True, text=True, timeout=60)
    via = subprocess.run([str(BIN / "thinkflow"), "run", "--help"], capture_output=True, text=True, timeout=60)
    assert direct.returncode == via.returncode == 0
    assert direct.stdout.replace("thinkflow-run", "thinkflow run") == via.stdout
    assert "130  interrupted" in via.stdout


def _default_sigint() -> None:
    # A shell starts a background job (`cmd &`) with SIGINT ignored, and Python then installs no Ctrl-C handler;
    # the child must see Ctrl-C as a terminal user would, however this suite was started.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_proc(tmp_path: Path, *args: str, entry: str = "thinkflow run") -> subprocess.Popen:
    command = [str(BIN / "thinkflow"), "run"] if entry == "thinkflow run" else [str(BIN / "thinkflow-run")]
    return subprocess.Popen([*command, *args], cwd=tmp_path, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8", preexec_fn=_default_sigint)


def test_two_processes_share_a_session_then_a_third_resumes_it(tmp_path, openai_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = str(agent_yaml(tmp_path, openai_server))
    openai_server.push(text("first answer"), text("second answer"), text("third answer"))
    procs = [_run_proc(tmp_path, path, f"task {i}", "--session", "shared", "--quiet") for i in (1, 2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    session_file = tmp_path / ".thinkflow" / "sessions" / "tester" / "shared.json"
    turns = json.loads(session_file.read_text(encoding="utf-8"))["turns"]
    assert sorted(t["task"] for t in turns) == ["task 1", "task 2"]
    assert sorted(t["answer"] for t in turns) == ["first answer", "second answer"]

    # this test's own process resumes the session the two others wrote
    third = CliRunner().invoke(main, ["run", path, "task 3", "--session", "shared", "--quiet"], env={"TF_TEST_KEY": KEY})
    assert third.exit_code == 0, third.output
    assert third.stdout == "third answer\n"
    sent = openai_server.requests[2]["messages"]
    history = [(m["role"], m["content"]) for m in sent[1:]]
    assert history == [
        ("user", turns[0]["task"]), ("assistant", turns[0]["answer"]),
        ("user", turns[1]["task"]), ("assistant", turns[1]["answer"]),
        ("user", "task 3"),
    ]


@pytest.mark.parametrize("entry", ["thinkflow run", "thinkflow-run"])  # thinkflow-run ends with os._exit
def test_ctrl_c_exits_130_with_session_and_trace_saved(tmp_path, openai_server, entry):
    path = str(agent_yaml(tmp_path, openai_server))
    openai_server.push(hang())
    proc = _run_proc(tmp_path, path, "wait forever", "--session", "s", entry=entry)
    deadline = time.monotonic() + 240
    while not openai_server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert openai_server.requests, "the run never reached the model"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    turns = json.loads((tmp_path / ".thinkflow" / "sessions" / "tester" / "s.json").read_text(encoding="utf-8"))["turns"]
    assert [(t["task"], t["status"]) for t in turns] == [("wait forever", "interrupted")]
    trace = next((tmp_path / ".thinkflow" / "runs").glob("*.jsonl"))
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events[-1]["type"] == "run_finished"
    assert events[-1]["status"] == "interrupted"


@pytest.mark.parametrize("ending", ["completed", "max_steps"])
def test_thinkflow_run_skips_teardown_but_writes_everything(tmp_path, openai_server, ending):
    # thinkflow-run ends with os._exit once the command is done: the answer, the trace (to its last event), the
    # session and the exit code must all be there as with an ordinary exit
    path = agent_yaml(tmp_path, openai_server)
    if ending == "completed":
        openai_server.push(tool_calls([("calculator", {"expression": "6*7"}, "c1")]), text("It is 42."))
    else:
        openai_server.push(*[tool_calls([("calculator", {"expression": f"{i}+1"}, f"c{i}")]) for i in range(4)])
    proc = _run_proc(tmp_path, str(path), "compute", "--session", "fast", "--quiet", entry="thinkflow-run")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == (0 if ending == "completed" else 1), err
    if ending == "completed":
        assert out == "It is 42.\n"
    else:
        assert out.startswith("No final answer was reached. Last result (calculator): 4")
    turns = json.loads((tmp_path / ".thinkflow" / "sessions" / "tester" / "fast.json").read_text(encoding="utf-8"))
    assert [(t["task"], t["status"]) for t in turns["turns"]] == [("compute", ending)]
    trace = next((tmp_path / ".thinkflow" / "runs").glob("*.jsonl"))
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events[0]["type"] == "run_started"
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == ending
    assert [e["type"] for e in events].count("tool_returned") == (1 if ending == "completed" else 4)


def test_model_override(cli, tmp_path, openai_server):
    openai_server.push(text("from the other model"))
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "x", "--model", "openai/other-model"])
    assert result.exit_code == 0, result.output
    assert openai_server.requests[0]["model"] == "other-model"


@pytest.mark.parametrize("yes", [False, True])
def test_confirm_tool_needs_yes_without_a_terminal(cli, tmp_path, openai_server, yes):
    openai_server.push(tool_calls([("write_file", {"path": "out.txt", "content": "hello"}, "w")]), text("done"))
    path = agent_yaml(tmp_path, openai_server, name="writer.yaml")
    path.write_text(path.read_text(encoding="utf-8").replace("tools: [calculator]", "tools: [write_file]"),
                    encoding="utf-8")
    result = cli.invoke(main, ["run", str(path), "write it", *(["--yes"] if yes else [])])
    assert result.exit_code == 0, result.output
    observation = openai_server.requests[1]["messages"][-1]["content"]
    if yes:
        assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "hello"
    else:
        assert not (tmp_path / "out.txt").exists()
        assert "write_file" in observation and "approv" in observation


def test_an_explicitly_empty_task_is_a_usage_error(cli, tmp_path, openai_server):
    result = cli.invoke(main, ["run", str(agent_yaml(tmp_path, openai_server)), "  "])
    assert result.exit_code == 2 and "the TASK is empty" in result.output
    assert openai_server.requests == []
