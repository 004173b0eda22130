"""The Toolbox door: unknown tools, argument validation messages, agent rules, approval, definitions."""

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from thinkflow.config.spec import AgentSpec, ToolRef, ToolSpec
from thinkflow.cli.approval import choose_approver, terminal_approver
from thinkflow.tools import Toolbox, auto_approver, builtin_specs
from thinkflow.tools.toolbox import build_tool
from thinkflow.tools.validation import whole_numbers

SHELL_PARAMS = {"type": "object", "properties": {"command": {"type": "string"},
                                                 "files": {"type": "array", "items": {"type": "string"}}},
                "required": ["command"]}


def data_box(tmp_path, **kw):
    specs = builtin_specs(tmp_path)
    return Toolbox({n: build_tool(specs[n], tmp_path) for n in ("calculator", "query_data", "write_file")}, **kw)


def test_unknown_tool_names_known_and_closest(tmp_path):
    result = data_box(tmp_path).call("query", {})
    assert result.status == "invalid"
    assert result.text == ("unknown tool 'query' (did you mean 'query_data'?); "
                           "available tools: calculator, query_data, write_file")


def test_invalid_arguments_name_each_problem_and_the_shape(tmp_path):
    result = data_box(tmp_path).call("query_data", {"group_by": 3, "agg": "average", "top": "5", "colum": "x"})
    assert result.status == "invalid"
    assert result.text == (
        "invalid arguments for tool 'query_data':\n"
        "- missing required argument 'path' (string)\n"
        "- unknown argument 'colum' (did you mean 'column'?)\n"
        "- argument 'agg' must be one of \"sum\", \"mean\", \"count\"; got \"average\"\n"
        "- argument 'group_by' must be a string, got an integer 3\n"
        "- argument 'top' must be an integer, got a string \"5\"\n"
        "expected: query_data(path: string, group_by?: string, column?: string, "
        "agg?: \"sum\"|\"mean\"|\"count\", filter?: string, sort?: \"asc\"|\"desc\", top?: integer)"
    )
    assert result.data == {"duration_s": 0.0, "bytes": 0, "truncated": False}


def test_arguments_not_an_object(tmp_path):
    result = data_box(tmp_path).call("calculator", ["1+1"])
    assert result.status == "invalid"
    assert result.text.splitlines()[1] == '- arguments must be a JSON object, got a list ["1+1"]'


def echo_box(ref):
    spec = ToolSpec(name="run", description="", kind="shell", parameters=SHELL_PARAMS,
                    command=(sys.executable, "-c", "import sys; print(sys.argv[1:])", "{command}", "{files}"))
    return Toolbox({"run": build_tool(spec)}, {"run": ref})


def test_deny_rules_check_text_and_each_list_element():
    box = echo_box(ToolRef(name="run", deny={"command": (r"\brm\b",), "files": (r"^/", r"\.\.")}))
    denied = box.call("run", {"command": "rm -rf x"})
    assert denied.status == "denied"
    assert denied.text == "denied by the agent's rules: argument 'command' matches the deny pattern '\\\\brm\\\\b'"
    element = box.call("run", {"command": "ls", "files": ["a", "../etc"]})
    assert element.status == "denied"
    assert element.text == "denied by the agent's rules: argument 'files' matches the deny pattern '\\\\.\\\\.'"
    ok = box.call("run", {"command": "ls -l", "files": ["a"]})
    assert ok.status == "ok"
    assert ok.text == "['ls -l', 'a']"


def test_deny_rule_on_joined_list_text():
    box = echo_box(ToolRef(name="run", deny={"files": (r"a b",)}))
    assert box.call("run", {"command": "x", "files": ["a", "b"]}).status == "denied"


def test_allow_rules_require_a_match():
    box = echo_box(ToolRef(name="run", allow={"command": (r"^(ls|cat)\b",)}))
    assert box.call("run", {"command": "cat notes"}).status == "ok"
    denied = box.call("run", {"command": "curl evil"})
    assert denied.status == "denied"
    assert denied.text == ("denied by the agent's rules: argument 'command' value \"curl evil\" matches none of the "
                           "allowed patterns '^(ls|cat)\\\\b'")


def test_confirm_without_approver_is_denied_and_nothing_written(tmp_path):
    result = data_box(tmp_path).call("write_file", {"path": "a.txt", "content": "hi"})
    assert result.status == "denied"
    assert result.text == "tool 'write_file' needs approval: run with --yes or in a terminal"
    assert not (tmp_path / "a.txt").exists()


def test_approvers(tmp_path):
    assert data_box(tmp_path, approver=auto_approver(False)).call(
        "write_file", {"path": "a.txt", "content": "hi"}).text == "the user denied this call of tool 'write_file'"
    asked = []

    def answer(prompt):
        asked.append(prompt)
        return "y"

    from rich.console import Console
    import io

    out = io.StringIO()
    box = data_box(tmp_path, approver=terminal_approver(answer, console=Console(file=out, width=200)))
    result = box.call("write_file", {"path": "a.txt", "content": "hi"})
    assert result.status == "ok"
    assert (tmp_path / "a.txt").read_text() == "hi"
    assert asked == ["Run write_file? [y/N] "]
    assert '"path": "a.txt"' in out.getvalue() and '"content": "hi"' in out.getvalue()
    assert choose_approver(yes=False, interactive=False) is None


def test_agent_ref_can_lift_confirm_and_parallel_safety(tmp_path):
    specs = builtin_specs(tmp_path)
    agent = AgentSpec(name="a", tools=(ToolRef(name="calculator"), ToolRef(name="write_file", confirm=False)),
                      tool_specs={"calculator": specs["calculator"], "write_file": specs["write_file"]},
                      workspace=tmp_path)
    box = Toolbox.from_agent(agent)
    assert box.names() == ["calculator", "write_file"]
    assert box.call("write_file", {"path": "b.txt", "content": "x"}).status == "ok"
    assert box.parallel_safe("calculator") is True
    assert box.parallel_safe("write_file") is False
    assert box.definitions()[0] == {"type": "function", "function": {
        "name": "calculator", "description": specs["calculator"].description,
        "parameters": {k: v for k, v in specs["calculator"].parameters.items() if k != "additionalProperties"}}}
    assert specs["calculator"].parameters["additionalProperties"] is False  # still validated, just not sent
    assert [d["name"] for d in box.describe()] == ["calculator", "write_file"]


def test_secrets_redacted_and_tool_crash_is_an_observation(tmp_path):
    class Boom:
        spec = ToolSpec(name="boom", description="", kind="python", secrets=("hunter2",))

        def parameters(self):
            return {"type": "object", "properties": {}}

        def run(self, arguments):
            raise RuntimeError("password hunter2 leaked")

    box = Toolbox({})
    box.add(Boom())
    result = box.call("boom", {})
    assert result.status == "error"
    assert result.text == "RuntimeError: password *** leaked"
    assert "hunter2" not in result.data["traceback"]
    assert set(result.data) >= {"duration_s", "bytes", "truncated"}


# --- whole numbers where a parameter says integer -----------------------------------------------------------------

def test_a_whole_float_reaches_a_shell_tool_as_an_integer(tmp_path):
    """JSON Schema counts 10.0 as an integer; the command line must then say 10, not 10.0."""
    params = {"type": "object", "properties": {"count": {"type": "integer"}, "scale": {"type": "number"},
                                               "ids": {"type": "array", "items": {"type": "integer"}}},
              "required": ["count"]}
    spec = ToolSpec(name="echo", description="d", kind="shell", parameters=params,
                    command=(sys.executable, "-c", "import sys; print(' '.join(sys.argv[1:]))", "{count}", "{scale}",
                             "{ids}"))
    box = Toolbox({"echo": build_tool(spec, tmp_path)})
    result = box.call("echo", {"count": 10.0, "scale": 2.0, "ids": [1.0, 2]})
    assert (result.status, result.text.strip()) == ("ok", "10 2.0 1 2")
    assert box.call("echo", {"count": 10.5}).status == "invalid"


_SCHEMA = {"type": "object", "properties": {
    "n": {"type": "integer"}, "x": {"type": "number"}, "either": {"type": ["integer", "null"]},
    "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    "loose": {"anyOf": [{"type": "integer"}, {"type": "number"}]},
    "open": {"anyOf": [{"type": "integer"}, {}]}, "ref": {"oneOf": [{"type": "integer"}, {"$ref": "#/$defs/n"}]},
    "ns": {"type": "array", "items": {"type": "integer"}},
    "maybe_ns": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
    "two_lists": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array"}]},
    "inner": {"type": "object", "properties": {"m": {"type": "integer"}}},
    "maybe_inner": {"oneOf": [{"type": "null"}, {"type": "object", "properties": {"m": {"type": "integer"}}}]}}}
_NUMBER = st.one_of(st.integers(-10**9, 10**9), st.floats(allow_nan=False, allow_infinity=False, width=32))


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={"n": _NUMBER, "x": _NUMBER, "either": st.one_of(st.none(), _NUMBER),
                                           "maybe": st.one_of(st.none(), _NUMBER), "loose": _NUMBER,
                                           "open": _NUMBER, "ref": _NUMBER,
                                           "ns": st.lists(_NUMBER, max_size=4),
                                           "maybe_ns": st.one_of(st.none(), st.lists(_NUMBER, max_size=4)),
                                           "two_lists": st.lists(_NUMBER, max_size=4),
                                           "inner": st.fixed_dictionaries({}, optional={"m": _NUMBER}),
                                           "maybe_inner": st.one_of(st.none(), st.fixed_dictionaries(
                                               {}, optional={"m": _NUMBER})),
                                           "extra": _NUMBER}))
def test_whole_numbers_changes_only_integral_floats_of_integer_parameters(arguments):
    out = whole_numbers(_SCHEMA, arguments)
    assert out == arguments  # equal values: 10.0 == 10
    integer_places = [(out.get("n"), arguments.get("n")), (out.get("either"), arguments.get("either")),
                      (out.get("maybe"), arguments.get("maybe")),
                      *zip(out.get("ns", []), arguments.get("ns", [])),
                      *zip(out.get("maybe_ns") or [], arguments.get("maybe_ns") or []),  # Optional[list[int]]
                      (out.get("inner", {}).get("m"), arguments.get("inner", {}).get("m")),
                      ((out.get("maybe_inner") or {}).get("m"), (arguments.get("maybe_inner") or {}).get("m"))]
    for new, old in integer_places:
        whole = isinstance(old, float) and old.is_integer()
        assert type(new) is (int if whole else type(old))
    for key in ("x", "loose", "open", "ref", "extra"):  # not integer-only parameters: untouched
        assert type(out.get(key)) is type(arguments.get(key))
    # two branches may hold a list, one of them of any numbers: which one the value meant is unknown, so untouched
    assert [type(v) for v in out.get("two_lists", [])] == [type(v) for v in arguments.get("two_lists", [])]
