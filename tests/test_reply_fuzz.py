"""Property tests (hypothesis) for issue 13: the reply parser, the argument decoder, the config loader and
``validate`` take any input -- random text, mutations of valid replies and configs, long runs, deep nesting --
and answer with an action or ThinkFlow's typed errors, never anything else.

The example budget is small and fixed for CI (``THINKFLOW_FUZZ_EXAMPLES``, default 150 per test);
``bench/bench_fuzz.py`` (``make fuzz``) runs the same tests with thousands of examples and times 1 MB replies.
No test here asserts time.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkflow.cli import main
from thinkflow.config import loader, validation
from thinkflow.errors import ThinkFlowError
from thinkflow.model import json_limits
from thinkflow.model.messages import ArgumentsError, ToolCall, decode_arguments
from thinkflow.model.replies import normalise_tool_calls
from thinkflow.reply.actions import FinalAnswer, ParseFailure, ToolAction
from thinkflow.reply.parsing import parse_reply
from thinkflow.text import valid_unicode

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = int(os.environ.get("THINKFLOW_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 150,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SEARCH = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
TOOLS = {"search": SEARCH, "now": {"type": "object", "properties": {}}, "none": None}
# a regression to backtracking or quadratic code hangs rather than fails: the timeout turns that into a failure
pytestmark = pytest.mark.timeout(max(600, EXAMPLES // 2))
STYLES = st.sampled_from(["native", "json", "react"])

TOKENS = [
    "Thought:", "Action:", "Action Input:", "Observation:", "Final Answer:", "**Action:**", "action_input:",
    "```", "~~~", "```json", "````", "<tool_call>", "</tool_call>", "<think>", "</think>", "<function=",
    "{", "}", "[", "]", '"', "'", ":", "：", ",", "\n", "\r\n", "\t", " ", "\\", "\\u12", "None", "N/A", "",
    "search", "now", "none", "final_answer", '"action"', '"action_input"', '"name"', '"arguments"', '"thought"',
    '"tool_calls"', '"function"', "**", "__", "null", "true", "1e999", "-1.5", "NaN", "-", "#", ">", "*", "_", "`",
    "~", "é", "\x00", "\ud7ff", "😀", "\\ud83d", "\\ude00", "\\udc00",
]
VALID = [
    'Thought: t\nAction: search\nAction Input: {"query": "q"}',
    "Thought: done\nFinal Answer: 42",
    '{"thought": "t", "action": "search", "action_input": {"query": "q"}}',
    '```json\n{"action": "final_answer", "action_input": {"answer": "yes"}}\n```',
    '<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>',
    '{"tool_calls": [{"function": {"name": "now", "arguments": "{}"}}]}',
    "{'action': 'search', 'action_input': {'query': 'q',},}",
    "Action: None\nFinal Answer: 1",
    "Example:\n```\nAction: now\n```\nAction: search\nAction Input: {\"query\": \"x\"}",
    "The answer is 4.",
]
RUN_CHARS = list("-#*_`~>{}[\"' \n:")

token_text = st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=6)), max_size=60).map("".join)


@st.composite
def mutated(draw, corpus=VALID):
    """A valid text with a few random edits: delete, insert, duplicate or replace a slice."""
    text = draw(st.sampled_from(corpus))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "replace"]))
        piece = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=4)))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + piece + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] * draw(st.integers(1, 30)) + text[j:]
        else:
            text = text[:i] + piece + text[j:]
    return text


@st.composite
def long_runs(draw):
    """A run of one hostile character (hundreds to thousands long) around or inside a valid reply."""
    run = draw(st.sampled_from(RUN_CHARS)) * draw(st.integers(26, 5000))
    valid = draw(st.sampled_from(VALID))
    where = draw(st.sampled_from(["before", "after", "inside", "alone", "lines"]))
    if where == "before":
        return run + valid
    if where == "after":
        return valid + run
    if where == "inside":
        cut = draw(st.integers(0, len(valid)))
        return valid[:cut] + run + valid[cut:]
    if where == "lines":
        return (run[:40] + "\n") * draw(st.integers(1, 200)) + valid
    return run


@st.composite
def deep(draw):
    """JSON-like text nested hundreds to thousands of levels, closed or not, bare, in an action or a label."""
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}"), ("{'a':", "}"), ('[{"b":', "}]"),
                                           ("{", "}")]))
    depth = draw(st.integers(90, 2500))
    body = opener * depth
    if draw(st.booleans()):
        body += "1" + closer * depth
    frame = draw(st.sampled_from([
        "{}", '{{"action": "search", "action_input": {{"query": {}}}}}', "Action: search\nAction Input: {}",
        "```json\n{}\n```", "<tool_call>{}</tool_call>", "Final Answer: {}"]))
    return frame.replace("{}", body, 1) if frame != "{}" else body


any_reply = st.one_of(token_text, mutated(), long_runs(), deep(), st.text(max_size=300))


def check(action) -> None:
    """What every action must satisfy, whatever the input."""
    assert isinstance(action, (ToolAction, FinalAnswer, ParseFailure))
    json.dumps(action.to_dict(), ensure_ascii=False).encode("utf-8")  # the trace can always record it
    if isinstance(action, ToolAction):
        ids = [c.id for c in action.calls]
        assert action.calls and len(set(ids)) == len(ids)
        assert set(action.errors) <= set(ids)
        for call in action.calls:
            assert isinstance(call.name, str) and isinstance(call.arguments, dict)
            assert not json_limits.too_deep(call.arguments)
    elif isinstance(action, ParseFailure):
        assert action.kind in ("empty", "format", "arguments")
        assert action.message.startswith("Your last reply")
    else:
        assert isinstance(action.text, str)
        assert not json_limits.too_deep(action.data)


@FUZZ
@given(reply=any_reply, style=STYLES)
def test_parse_reply_never_raises(reply, style):
    check(parse_reply(reply, style=style, tools=TOOLS))


@FUZZ
@given(raw=st.one_of(token_text, mutated(), deep(), st.text(max_size=200)), style=STYLES)
def test_native_arguments_decode_or_are_reported(raw, style):
    try:
        value = decode_arguments(raw)
    except ArgumentsError as error:
        assert str(error).startswith("arguments ")
    else:
        assert isinstance(value, dict) and not json_limits.too_deep(value)
    calls, errors = normalise_tool_calls([{"id": "c1", "function": {"name": "search", "arguments": raw}}])
    action = parse_reply("", calls, style=style, tools=TOOLS, argument_errors=errors)
    check(action)
    assert isinstance(action, ToolAction) and set(action.errors) <= {"c1"}


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=10,
)


@FUZZ
@given(args=st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=4), data=st.data(),
       ascii_only=st.booleans())
def test_every_cut_off_argument_string_is_refused_as_truncated(args, data, ascii_only):
    encoded = json.dumps(args, ensure_ascii=ascii_only)
    cut = data.draw(st.integers(1, len(encoded) - 1))
    prefix = encoded[:cut]
    with pytest.raises(ArgumentsError) as caught:
        decode_arguments(prefix)
    assert str(caught.value).startswith("arguments are truncated JSON: ")
    assert str(caught.value).endswith("; the call was cut off, send the complete call")
    assert decode_arguments(encoded) == json.loads(encoded)


NON_FINITE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-2.5E+400", "1" * 4301])


@FUZZ
@given(args=st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=4), number=NON_FINITE,
       data=st.data(), style=STYLES)
def test_a_number_json_cannot_carry_never_reaches_a_tool(args, number, data, style):
    """NaN, Infinity, a float past 1.8e308 or a 4301-digit integer anywhere in the arguments, native or written
    as text in any style: the call is refused (native) or not taken as a call, and no non-finite float or
    over-long integer is in any argument that is passed on."""
    key = data.draw(st.sampled_from(sorted(args)))
    encoded = json.dumps({**args, key: "@N@"}).replace('"@N@"', number)
    with pytest.raises(ArgumentsError) as caught:
        decode_arguments(encoded)
    assert "number JSON cannot carry" in str(caught.value)
    action = parse_reply(f'{{"action": "search", "action_input": {encoded}}}', style=style, tools=TOOLS)
    if isinstance(action, ToolAction):
        assert not any(json_limits.non_finite(c.arguments) for c in action.calls)
        assert all(_no_huge_int(c.arguments) for c in action.calls)


def _no_huge_int(value) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return len(str(abs(value))) <= json_limits.MAX_INT_DIGITS
    if isinstance(value, dict):
        return all(_no_huge_int(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_huge_int(v) for v in value)
    return True


CALL_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@FUZZ
@given(args=st.dictionaries(st.sampled_from(["query", "limit", "page"]), CALL_VALUES, min_size=1, max_size=3),
       answer=st.text(max_size=40), spelling=st.sampled_from(["json", "python"]), style=STYLES)
def test_python_style_calls_carry_exactly_their_arguments(args, answer, spelling, style):
    """A reply that is one call ``search(...)`` (JSON or Python keywords) runs search with exactly those
    arguments; ``final_answer("...")`` is exactly that answer."""
    args = {"query": "q", **args}
    inner = json.dumps(args) if spelling == "json" else ", ".join(f"{k}={v!r}" for k, v in args.items())
    action = parse_reply(f"search({inner})", style=style, tools=TOOLS)
    assert isinstance(action, ToolAction) and [(c.name, c.arguments) for c in action.calls] == [("search", args)]
    final = parse_reply(f"final_answer({json.dumps(answer)})", style=style, tools=TOOLS)
    assert isinstance(final, (FinalAnswer, ParseFailure))
    if answer.strip():
        assert isinstance(final, FinalAnswer) and final.text == answer.strip()


@FUZZ
@given(args=st.dictionaries(st.sampled_from(["query", "limit", "page"]), CALL_VALUES, min_size=1, max_size=3),
       comma=st.sampled_from([",}", "}"]), quote=st.booleans(), style=st.sampled_from(["native", "json"]))
def test_near_json_calls_carry_exactly_their_arguments_or_are_refused(args, comma, quote, style):
    """A call in near-JSON (a trailing comma, single-quoted names) -- a native reply's ``<tool_call>`` tag, a json
    style action -- is repaired into a call with exactly the arguments written, or refused; never other values."""
    args = {"query": "q", **args}
    name = "'search'" if quote else '"search"'
    if style == "native":
        text = f'<tool_call>{{"name": {name}, "arguments": {json.dumps(args)}{comma}</tool_call>'
    else:
        text = f'{{"action": {name}, "action_input": {json.dumps(args)}{comma}'
    action = parse_reply(text, style=style, tools=TOOLS)
    if isinstance(action, ToolAction):
        assert [(c.name, c.arguments) for c in action.calls] == [("search", args)]
    else:
        assert isinstance(action, ParseFailure), action


ESCAPED_FRAMES = [
    '<tool_call>{"name": "search", "arguments": {"query": "%s"}}</tool_call>',
    '<tool_call>{"name": "search", "arguments": {"query": "%s",}}</tool_call>',  # repaired
    '{"action": "search", "action_input": {"query": "%s"}}',
    "{'action': 'search', 'action_input': {'query': '%s',},}",  # repaired
    'Action: search\nAction Input: {"query": "%s"}',
]


@FUZZ
@given(units=st.lists(st.integers(0xD800, 0xDFFF) | st.integers(0x20, 0x7E) | st.sampled_from([0xE9, 0x1F600]),
                      min_size=1, max_size=6),
       frame=st.sampled_from(ESCAPED_FRAMES), style=STYLES)
def test_escaped_surrogates_decode_to_valid_unicode(units, frame, style):
    """``\\uXXXX`` escapes in JSON the parser decodes itself: a pair is its one character, a lone surrogate is
    U+FFFD (as a reply's own text is read), never a string UTF-8 cannot carry (it failed the trace and the session)."""
    escaped = "".join(f"\\u{u:04x}" if u < 0x10000 else f"\\u{0xD7C0 + (u >> 10):04x}\\u{0xDC00 + (u & 0x3FF):04x}"
                      for u in units)
    expected = valid_unicode("".join(map(chr, units)))
    action = parse_reply(frame % escaped, style=style, tools=TOOLS)
    check(action)
    if isinstance(action, ToolAction):
        assert [(c.name, c.arguments) for c in action.calls] == [("search", {"query": expected})]


@FUZZ
@given(head=st.sampled_from(["f()", "calculator(expression=\"2\")", "search", "final_answer\n{}", "```\nf()"]),
       pad=st.sampled_from([" ", "\n", "\t", " ;", "`"]), count=st.integers(1_000, 19_000),
       tail=st.sampled_from(["x", ")", "}", "```", ""]), style=STYLES)
def test_a_call_head_then_a_long_run_of_whitespace_parses_in_linear_time(head, pad, count, tail, style):
    """The Python-style call reading of a reply is linear: a call, 19k blanks, then text (a pattern with adjacent
    ``\\s*`` once took cubic time here). The module's timeout turns a regression into a failure."""
    check(parse_reply(head + pad * count + tail, style=style, tools=TOOLS))


@FUZZ
@given(reply=any_reply, style=STYLES, names=st.lists(st.sampled_from(TOKENS + ["None", "search"]), max_size=3))
def test_parse_reply_with_native_calls_never_raises(reply, style, names):
    calls = [ToolCall(f"c{i}", name, {}) for i, name in enumerate(names)]
    check(parse_reply(reply, calls, style=style, tools=TOOLS))


# ------------------------------------------------------------------------------ the config loader and validate

_tree = tempfile.TemporaryDirectory(prefix="thinkflow-fuzz-")
TREE = Path(_tree.name)
shutil.copytree(ROOT / "prompts", TREE / "prompts")
shutil.copytree(ROOT / "tools.d", TREE / "tools.d")
(TREE / "agents.d").mkdir()
CONFIGS = [(ROOT / "agents.d" / name).read_text() for name in ("calculator_agent.yaml", "data_analyst.yaml",
                                                                "assistant.yaml")]
TOOL_CONFIGS = [(ROOT / "tools.d" / "run_command.yaml").read_text()]
YAML_TOKENS = [": ", "- ", "{", "}", "[", "]", ",", "&a ", "*a", "<<: *a", "!!python/object ", "!x ", "|", ">",
               "'", '"', "#", "\n", "\n  ", "\t", "${X}", "${", "version: 1", "name: x", "tools:", "loop:",
               "style: react", "max_steps: -1", "yes", "no", "~", "null", "1e9", "0x1F", "---", "...", "? ", "%YAML",
               "\ufeff", "\x00"]
yaml_text = st.one_of(
    st.lists(st.one_of(st.sampled_from(YAML_TOKENS), st.text(max_size=6)), max_size=50).map("".join),
    mutated(CONFIGS),
    mutated(TOOL_CONFIGS),
    st.builds(lambda opener, n, closed: "x: " + opener * n + ("]" * n if closed and opener == "[" else ""),
              st.sampled_from(["[", "{a: ", "- "]), st.integers(50, 1500), st.booleans()),
    st.builds(lambda n: "version: 1\nname: a\n" + "".join(" " * (i + 1) + "k:\n" for i in range(n)),
              st.integers(90, 400)),
)


@FUZZ
@given(text=yaml_text, kind=st.sampled_from(["agents.d", "tools.d"]))
def test_loader_and_validate_raise_only_typed_errors(text, kind):
    path = TREE / kind / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        if kind == "agents.d":
            loader.load_agent(path, env={})
        else:
            loader.load_tools(path, env={})
    except ThinkFlowError:
        pass
    result = validation.validate_paths([path], env={})
    assert result.files == [path]
    for issue in result.issues:
        assert issue.file and isinstance(issue.message, str)
    path.unlink()


@settings(max_examples=max(EXAMPLES // 5, 20), deadline=None, derandomize=EXAMPLES <= 150,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=yaml_text)
def test_validate_command_exits_with_a_status_never_a_traceback(text):
    path = TREE / "agents.d" / "cli.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1, 2)
    path.unlink()


_NAMES = st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(thought=st.text(max_size=400), names=st.lists(_NAMES, max_size=4),
       intent=st.sampled_from(["", "I will use the ", "let me call ", "I'll first use "]))
def test_announced_tool_names_only_an_offered_tool(thought, names, intent):
    from thinkflow.run.answer_checks import announced_tool

    found = announced_tool(thought, names)
    assert found is None or found in names
    if names and intent:  # an announcement of the first tool, after any text ending a sentence, is read
        assert announced_tool(f"{thought}.\n{intent}{names[0]} now", names) in names


@settings(max_examples=200, deadline=None)
@given(answer=st.text(max_size=600), tail=st.text(min_size=1, max_size=200), names=st.lists(_NAMES, max_size=4))
def test_the_answer_text_checks_read_only_the_head_of_an_answer(answer, tail, names):
    """Any answer: the text checks return their types, name only offered tools, and read only the first
    SCAN_CHARS characters (text past them changes nothing, however long the answer)."""
    from thinkflow.run import answer_checks as ac

    base = answer or "x"
    head = (base * (ac.SCAN_CHARS // len(base) + 1))[:ac.SCAN_CHARS]  # exactly SCAN_CHARS characters
    for check in (ac.says_data_missing, ac.works_by_hand, ac.talks_of_failure, ac.points_at_tools):
        assert check(head) is check(head + tail)
        assert isinstance(check(answer), bool)
    assert set(ac.tools_named_in(answer, names)) <= set(names)
    assert ac.tools_named_in(head, names) == ac.tools_named_in(head + tail, names)


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=300), names=st.lists(_NAMES, min_size=1, max_size=4, unique=True))
def test_a_nested_call_hint_names_only_other_offered_tools(value, names):
    from thinkflow.model.messages import ToolCall
    from thinkflow.run.tool_calls import nested_call_hint

    call = ToolCall(id="c1", name=names[0], arguments={"expression": value})
    hint = nested_call_hint(call, names)
    assert hint == "" or hint.startswith("\n") and any(f"call {n} first" in hint for n in names[1:])
    if len(names) > 1:  # another tool called inside the argument is always named
        nested = ToolCall(id="c2", name=names[0], arguments={"expression": f"{value} {names[1]}(1)"})
        assert f"{names[1]} " in nested_call_hint(nested, names) or "call " in nested_call_hint(nested, names)


_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                          max_size=3), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(expression=st.text(max_size=80), result=_JSON_VALUES, raw=st.text(max_size=80))
def test_a_field_value_hint_names_a_key_the_earlier_result_holds(expression, result, raw):
    import json

    from thinkflow.model.messages import ToolCall
    from thinkflow.run.step import CallOutcome
    from thinkflow.run.tool_calls import field_value_hint

    call = ToolCall(id="c", name="calculator", arguments={"expression": expression})
    for observation in (json.dumps(result), raw):
        hint = field_value_hint(call, [CallOutcome(ToolCall(id="r", name="read_file", arguments={}), "ok", observation)])
        if hint:
            key = hint[1:].split(" is ", 1)[0]
            assert json.dumps(key)[1:-1] in observation or key in observation


json_value = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(question=st.text(max_size=300) | st.lists(st.sampled_from(["Oslo", "and", "Bergen", ",", "or", "vs.", "a.txt",
                                                                   "Mouse", "in", ".", " ", "\n"]),
                                                  max_size=60).map(" ".join),
       arguments=st.dictionaries(st.text(max_size=8) | st.sampled_from(["city", "path", "product"]),
                                 json_value | st.sampled_from(["Oslo", "a.txt", "Mouse"]), max_size=5),
       params=st.dictionaries(st.sampled_from(["t", "u"]), json_value | st.just(
           {"properties": {"product": {"enum": ["all", "Mouse", "Laptop", 3, None]}, 7: {"enum": "x"}}}), max_size=2))
def test_unused_values_takes_any_question_arguments_and_schema(question, arguments, params):
    """The unused_value check reads what the model and the tool schemas hold, whatever that is: it never raises,
    and every value it names is one the question holds (its words, spaced as a list item: "A  A" -> "A A")."""
    from thinkflow.model.messages import ToolCall
    from thinkflow.run.question_values import unused_values
    from thinkflow.run.step import CallOutcome

    calls = [CallOutcome(ToolCall("c1", name, arguments), "ok", "") for name in ("t", "u")]
    for tool, param, value in unused_values(question, calls, params):
        assert tool in ("t", "u") and isinstance(param, str)
        assert " ".join(value.lower().split()) in " ".join(question.lower().split())  # up to spacing


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(["Oslo", "oslo", "and", "Bergen", "in", ".", "OSLO"]), max_size=12),
       target=st.lists(st.sampled_from(["Oslo", "oslo", "and", "Bergen", "bergen"]), min_size=1, max_size=3),
       case_sensitive=st.booleans())
def test_occurrences_finds_every_start_of_the_word_sequence(words, target, case_sensitive):
    """The question scan's word-sequence search against the plain definition: every i where the words from i on
    are the target (as written, or lowercased against a lowercase target)."""
    from thinkflow.run.question_values import _occurrences

    same = (lambda a, b: a == b) if case_sensitive else (lambda a, b: a.lower() == b)
    expected = [i for i in range(len(words) - len(target) + 1)
                if all(same(words[i + k], target[k]) for k in range(len(target)))]
    assert _occurrences(words, target, case_sensitive=case_sensitive) == expected
