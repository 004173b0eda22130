"""``thinkflow validate`` and ``thinkflow schema``: output formats, exit codes, no heavy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from thinkflow.cli import main
from thinkflow.cli.run_cmd import run

FIXTURES = Path(__file__).parent / "fixtures" / "project"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def project(tmp_path: Path) -> None:
    write(tmp_path / "agents.d" / "ok.yaml", "version: 1\nname: ok\ntools: [calculator]\n")
    write(tmp_path / "agents.d" / "bad.yaml", "version: 1\nname: bad\ntools: [calculater]\n")
    write(tmp_path / "tools.d" / "t.yaml", "version: 1\nname: t\ndescription: T.\nkind: python\nentrypont: m:f\n")


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_valid_files_exit_0_with_a_summary():
    result = invoke("validate", str(FIXTURES / "agents.d"), str(FIXTURES / "tools.d"))
    assert (result.exit_code, result.output) == (0, "4 files valid\n")


def test_text_format_defaults_to_agents_and_tools_dirs(tmp_path, monkeypatch):
    project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = invoke("validate")
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "agents.d/bad.yaml:3:9: tools[0]: unknown tool 'calculater' (did you mean 'calculator'?)",
        "tools.d/t.yaml:4:1: <root>: missing required key 'entrypoint' (a python tool needs 'entrypoint')",
        "tools.d/t.yaml:5:1: entrypont: unknown key 'entrypont' (did you mean 'entrypoint'?)",
        "2 of 3 files invalid, 3 issues",
    ]


def test_a_timeout_no_timer_can_hold_is_refused(tmp_path, monkeypatch):
    """loop.timeout: 1e10 used to pass and crash the run with OverflowError from signal.setitimer."""
    write(tmp_path / "agents.d" / "long.yaml",
          "version: 1\nname: long\nmodel: {name: openai/x, timeout: .nan}\nloop: {timeout: 1.0e+10}\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "agents.d")
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "agents.d/long.yaml:3:34: model.timeout: expected a number, got .nan (not a number)",
        "agents.d/long.yaml:4:17: loop.timeout: must be at most 604800, got 10000000000.0 "
        "(a timeout is at most one week (604800 s))",
        "1 of 1 file invalid, 2 issues",
    ]


def test_json_format(tmp_path, monkeypatch):
    project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "--format", "json", "agents.d")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["valid"] is False
    assert report["files"] == ["agents.d/bad.yaml", "agents.d/ok.yaml"]
    assert report["invalid_files"] == ["agents.d/bad.yaml"]
    assert report["issues"] == [{"file": "agents.d/bad.yaml", "line": 3, "column": 9, "path": "tools[0]",
                                 "message": "unknown tool 'calculater'", "hint": "did you mean 'calculator'?"}]


def test_github_format(tmp_path, monkeypatch):
    project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "--format", "github", "agents.d/bad.yaml")
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "::error file=agents.d/bad.yaml,line=3,col=9::tools[0]: unknown tool 'calculater' "
        "(did you mean 'calculator'?)",
        "1 of 1 file invalid, 1 issue",
    ]


def test_missing_path_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "nope.yaml")
    assert result.exit_code == 2
    assert "no such file or directory: nope.yaml" in result.output


def test_no_default_dirs_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("validate")
    assert result.exit_code == 2
    assert "no agents.d/ or tools.d/ here" in result.output


def test_schema_command_prints_bundled_schemas():
    agent = json.loads(invoke("schema", "agent").output)
    tool = json.loads(invoke("schema", "tool").output)
    assert agent["$id"].endswith("agent.schema.json") and agent["properties"]["model"]["$ref"] == "#/$defs/model"
    assert tool["title"] == "ThinkFlow tool"
    assert invoke("schema", "workflow").exit_code == 2


def test_validate_imports_no_heavy_library():
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from thinkflow.cli import main\n"
        f"r = CliRunner().invoke(main, ['validate', {str(FIXTURES)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "heavy = ['litellm', 'chromadb', 'sentence_transformers', 'torch', 'xllamacpp', 'pandas', 'matplotlib']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[]\n"


def test_python_entrypoint_modules_must_be_importable_and_names_unique(tmp_path, monkeypatch):
    shell = "version: 1\nname: {n}\ndescription: D.\nkind: shell\ncommand: [date]\nparameters: {{type: object}}\n"
    write(tmp_path / "tools.d" / "a.yaml", shell.format(n="clock"))
    write(tmp_path / "tools.d" / "b.yaml", shell.format(n="clock"))
    write(tmp_path / "tools.d" / "py.yaml",
          "version: 1\nname: ok\ndescription: D.\nkind: python\nentrypoint: json.decoder:JSONDecoder\n---\n"
          "version: 1\nname: local\ndescription: D.\nkind: python\nentrypoint: mine.sub:f\n---\n"
          "version: 1\nname: gone\ndescription: D.\nkind: python\nentrypoint: nomod.x:f\n")
    write(tmp_path / "mine" / "__init__.py", "raise RuntimeError('validate must not run tool code')\n")
    write(tmp_path / "mine" / "sub.py", "def f(): pass\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "tools.d")
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "tools.d/b.yaml:2:7: name: tool 'clock' is also defined in tools.d/a.yaml:2 "
        "(rename one of them: an agent takes the first one it finds)",
        "tools.d/py.yaml:17:13: entrypoint: python module 'nomod.x' not found (install it in this environment, "
        "or put it on sys.path, in the current directory or next to the tools.d folder)",
        "2 of 3 files invalid, 2 issues",
    ]


def _secret_project(tmp_path: Path) -> None:
    write(tmp_path / "agents.d" / "a.yaml",
          "version: 1\nname: a\nmodel:\n  name: openai/gpt-4o-mini\n  api_key: ${TF_UNSET_KEY_FOR_TEST}\n"
          "tools: [calculater]\n")
    write(tmp_path / "agents.d" / "b.yaml",
          "version: 1\nname: b\nmodel:\n  name: openai/gpt-4o-mini\n  api_key: ${TF_UNSET_KEY_FOR_TEST}\n")


def test_an_unset_variable_is_an_error_unless_allowed(tmp_path, monkeypatch):
    _secret_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TF_UNSET_KEY_FOR_TEST", raising=False)
    unset = ("model.api_key: environment variable 'TF_UNSET_KEY_FOR_TEST' is not set "
             "(set TF_UNSET_KEY_FOR_TEST, or give a default: ${TF_UNSET_KEY_FOR_TEST:-value})")
    strict = invoke("validate", "agents.d/b.yaml")
    assert (strict.exit_code, strict.output.splitlines()) == (1, [
        f"agents.d/b.yaml:5:12: {unset}", "1 of 1 file invalid, 1 issue"])
    allowed = invoke("validate", "--allow-missing-env", "agents.d/b.yaml")
    assert (allowed.exit_code, allowed.output.splitlines()) == (0, [
        f"agents.d/b.yaml:5:12: {unset} [warning]", "1 file valid, 1 warning"])
    # other issues stay errors; the warning is still shown beside them
    both = invoke("validate", "--allow-missing-env", "agents.d")
    assert (both.exit_code, both.output.splitlines()) == (1, [
        f"agents.d/a.yaml:5:12: {unset} [warning]",
        "agents.d/a.yaml:6:9: tools[0]: unknown tool 'calculater' (did you mean 'calculator'?)",
        f"agents.d/b.yaml:5:12: {unset} [warning]",
        "1 of 2 files invalid, 1 issue, 2 warnings"])


def test_allow_missing_env_in_json_and_github_formats(tmp_path, monkeypatch):
    _secret_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TF_UNSET_KEY_FOR_TEST", raising=False)
    report = json.loads(invoke("validate", "--allow-missing-env", "--format", "json", "agents.d/b.yaml").output)
    assert report["valid"] is True and report["issues"] == [] and report["invalid_files"] == []
    assert [(w["file"], w["path"], w["message"]) for w in report["warnings"]] == [
        ("agents.d/b.yaml", "model.api_key", "environment variable 'TF_UNSET_KEY_FOR_TEST' is not set")]
    github = invoke("validate", "--allow-missing-env", "--format", "github", "agents.d/b.yaml")
    assert github.exit_code == 0
    assert github.output.splitlines()[0] == (
        "::warning file=agents.d/b.yaml,line=5,col=12::model.api_key: environment variable "
        "'TF_UNSET_KEY_FOR_TEST' is not set (set TF_UNSET_KEY_FOR_TEST, or give a default: "
        "${TF_UNSET_KEY_FOR_TEST:-value})")
    monkeypatch.setenv("TF_UNSET_KEY_FOR_TEST", "sk-set-for-this-test")
    assert invoke("validate", "--allow-missing-env", "agents.d/b.yaml").output == "1 file valid\n"


def test_rules_with_a_bad_regex_or_an_unknown_argument_are_issues(tmp_path):
    agent = write(tmp_path / "r.yaml", "version: 1\nname: r\ntools: [{name: calculator, allow: {expression: "
                  "['(unclosed']}, deny: {expresion: ['y']}}]\n")
    result = invoke("validate", str(agent))
    assert result.exit_code == 1
    assert (f"{agent}:3:49: tools[0].allow.expression[0]: not a valid regular expression: missing ), "
            "unterminated subpattern at position 0") in result.output
    assert (f"{agent}:3:71: tools[0].deny.expresion: tool 'calculator' has no argument 'expresion' "
            "(did you mean 'expression'?)") in result.output


def test_a_folder_with_nothing_to_check_is_a_usage_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "no agent, tool or test files found in" in result.output


LONG = "9" * 4301  # one digit past Python's int() limit (sys.get_int_max_str_digits)


@pytest.mark.parametrize("name, text, place", [
    ("agents.d/a.yaml", f"version: 1\nname: a\nloop: {{max_steps: {LONG}}}\n", "3:19: loop.max_steps"),
    ("agents.d/h.yaml", f"version: 1\nname: h\nloop: {{max_steps: -0x{'f' * 3600}}}\n", "3:19: loop.max_steps"),
    ("tools.d/t.yaml", f"version: 1\nname: t\ndescription: T.\nkind: python\nentrypoint: m:f\ntimeout: {LONG}\n",
     "6:10: timeout"),
    ("agents.d/a.test.yaml", f"version: 1\nagent: a\ncases:\n  - name: c\n    input: hi\n    max_steps: {LONG}\n",
     "6:16: cases[0].max_steps"),
])
def test_an_integer_too_long_for_python_is_a_file_line_issue(tmp_path, monkeypatch, name, text, place):
    """Over 4300 digits (or a 0x integer as large) printed a ValueError traceback from yaml's construct_yaml_int."""
    write(tmp_path / name, text)
    monkeypatch.chdir(tmp_path)
    issue = f"{name}:{place}: integer has more than 4300 digits (use a smaller number, or quote it to make it a string)"
    result = invoke("validate", name)
    assert (result.exit_code, result.output.splitlines()) == (1, [issue, "1 of 1 file invalid, 1 issue"])
    result = invoke("validate", "--format", "json", name)
    assert result.exit_code == 1
    assert [(i["line"], i["message"]) for i in json.loads(result.output)["issues"]] == [
        (int(place.split(":")[0]), "integer has more than 4300 digits")]


def test_run_refuses_an_agent_with_an_integer_too_long_for_python(tmp_path):
    """``thinkflow-run FILE hi`` (the ``run`` command) printed the same traceback."""
    agent = write(tmp_path / "a.yaml", f"version: 1\nname: a\nloop: {{max_steps: {LONG}}}\n")
    result = CliRunner().invoke(run, [str(agent), "hi"], prog_name="thinkflow-run", catch_exceptions=False)
    assert result.exit_code != 0
    assert f"{agent}:3:19: loop.max_steps: integer has more than 4300 digits" in result.output
    assert "Traceback" not in result.output


# --- URLs: an api_base or a tool's URL without http:// or https:// ---------------------------------------------------

SCHEME = "an api_base must be an http:// or https:// URL with a host, and no spaces or control characters"
API_BASE_HINT = "write the whole URL: http://host:port for Ollama, http://host:port/v1 for an OpenAI-compatible server"


def test_an_api_base_without_a_scheme_is_a_file_line_issue(tmp_path, monkeypatch):
    """model.api_base: 127.0.0.1:1/v1 passed validate, then every run failed with 'HTTP 500: Connection error'."""
    write(tmp_path / "agents.d" / "a.yaml", "version: 1\nname: a\nmodel:\n  name: openai/x\n"
                                            "  api_base: 127.0.0.1:1/v1\n")
    write(tmp_path / "agents.d" / "ok.yaml", "version: 1\nname: ok\nmodel: {name: openai/x, api_base: "
                                             "'HTTPS://example.com/v1'}\n")
    write(tmp_path / "agents.d" / "d.yaml", "version: 1\nname: d\nmodel: {name: ollama_chat/q, api_base: "
                                            "'${TF_TEST_OLLAMA_HOST:-localhost:11434}'}\n")
    write(tmp_path / "agents.d" / "c.test.yaml", "version: 1\nagent: ok\njudge: {model: openai/j, api_base: "
                                                 "'localhost:8000'}\ncases:\n  - {name: c, task: hi}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TF_TEST_OLLAMA_HOST", raising=False)
    result = invoke("validate", "agents.d")
    assert (result.exit_code, result.output.splitlines()) == (1, [
        f"agents.d/a.yaml:5:13: model.api_base: {SCHEME}, got '127.0.0.1:1/v1' ({API_BASE_HINT})",
        f"agents.d/c.test.yaml:3:36: judge.api_base: {SCHEME}, got 'localhost:8000' ({API_BASE_HINT})",
        f"agents.d/d.yaml:3:40: model.api_base: {SCHEME}, got 'localhost:11434' ({API_BASE_HINT})",
        "3 of 4 files invalid, 3 issues"])
    report = json.loads(invoke("validate", "--format", "json", "agents.d/a.yaml").output)
    assert [(i["line"], i["column"], i["path"], i["message"]) for i in report["issues"]] == [
        (5, 13, "model.api_base", f"{SCHEME}, got '127.0.0.1:1/v1'")]


def test_an_api_base_from_the_environment_is_checked_once_resolved(tmp_path, monkeypatch):
    """A value taken from the environment is checked (and redacted); a ${VAR} left unset is only the unset issue."""
    write(tmp_path / "a.yaml", "version: 1\nname: a\nmodel: {name: ollama_chat/q, api_base: '${TF_TEST_OLLAMA_HOST}'}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TF_TEST_OLLAMA_HOST", raising=False)
    allowed = invoke("validate", "--allow-missing-env", "a.yaml")
    assert (allowed.exit_code, allowed.output.splitlines()[-1]) == (0, "1 file valid, 1 warning")
    monkeypatch.setenv("TF_TEST_OLLAMA_HOST", "127.0.0.1:11434")
    refused = invoke("validate", "a.yaml")
    assert (refused.exit_code, refused.output.splitlines()) == (1, [
        f"a.yaml:3:40: model.api_base: {SCHEME}, got '***' ({API_BASE_HINT})", "1 of 1 file invalid, 1 issue"])
    monkeypatch.setenv("TF_TEST_OLLAMA_HOST", "http://127.0.0.1:11434")
    assert invoke("validate", "a.yaml").output == "1 file valid\n"


def test_run_refuses_an_api_base_without_a_scheme_before_calling_the_model(tmp_path):
    agent = write(tmp_path / "a.yaml", "version: 1\nname: a\nmodel: {name: openai/x, api_base: '127.0.0.1:1/v1'}\n")
    result = CliRunner().invoke(run, [str(agent), "hi"], prog_name="thinkflow-run", catch_exceptions=False)
    assert result.exit_code != 0
    assert f"{agent}:3:35: model.api_base: {SCHEME}, got '127.0.0.1:1/v1'" in result.output
    assert "Connection error" not in result.output


@pytest.mark.parametrize("text, place, hint", [
    ("kind: http\nrequest: {url: 'api.example.com/{q}'}\nparameters: {type: object, properties: {q: {type: string}}}\n",
     "5:16: request.url", "https://api.example.com/items/{id}"),
    ("kind: mcp\nurl: 127.0.0.1:8000/mcp\n", "5:6: url", "http://127.0.0.1:8000/mcp"),
])
def test_a_tool_url_without_a_scheme_says_what_a_url_needs(tmp_path, text, place, hint):
    tool = write(tmp_path / "tools.d" / "t.yaml", "version: 1\nname: t\ndescription: T.\n" + text)
    value = "api.example.com/{q}" if "http" in text else "127.0.0.1:8000/mcp"
    result = invoke("validate", str(tool))
    assert (result.exit_code, result.output.splitlines()[0]) == (
        1, f"{tool}:{place}: a URL must start with http:// or https://, got '{value}' (write the whole URL, e.g. {hint})")


def test_a_number_in_exponent_form_yaml_reads_as_a_string_gets_a_hint(tmp_path, monkeypatch):
    """YAML 1.1 reads 1e10 (no dot, no sign in the exponent) as a string: 'expected a number, got a string' alone
    left the reader puzzled by a value that is plainly a number."""
    write(tmp_path / "agents.d" / "e.yaml", "version: 1\nname: e\nmodel: {name: openai/x, temperature: 5e-1}\n"
                                            "loop: {timeout: 1e3, max_steps: 1E1}\n")
    write(tmp_path / "agents.d" / "q.yaml", "version: 1\nname: q\nloop: {timeout: '1e3'}\n")  # quoted: a string
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "agents.d")
    assert (result.exit_code, result.output.splitlines()) == (1, [
        "agents.d/e.yaml:3:38: model.temperature: expected a number, got a string "
        "(YAML reads 5e-1 as a string; write 5.0e-1)",
        "agents.d/e.yaml:4:17: loop.timeout: expected a number, got a string (YAML reads 1e3 as a string; write "
        "1.0e+3)",
        "agents.d/e.yaml:4:33: loop.max_steps: expected an integer, got a string (YAML reads 1E1 as a string; write "
        "10)",
        "agents.d/q.yaml:3:17: loop.timeout: expected a number, got a string",
        "2 of 2 files invalid, 4 issues"])
