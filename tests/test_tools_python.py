"""Python tools: entry points, the @tool registry, derived schemas, errors, timeouts, output conversion."""

import enum
import textwrap
from typing import Literal, Optional

import pytest

from thinkflow.errors import ToolError
from thinkflow.config.spec import ToolSpec
from thinkflow.tools import Toolbox, derive_parameters, tool
from thinkflow.tools.output import cap_text, format_size
from thinkflow.tools.python import PythonTool
from thinkflow.tools.registry import registered_specs, unregister


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


def forecast(city: str, days: int = 3, unit: Unit = Unit.CELSIUS, detail: Literal["short", "long"] = "short",
             hours: Optional[list[int]] = None, tags: dict[str, str] | None = None, ratio: float = 0.5,
             alerts: bool = False) -> dict:
    """Forecast the weather.

    Args:
        city: Name of the city,
            for example "Paris".
        days: How many days ahead.
        unit: Temperature unit.
    """
    return {"city": city, "days": days, "unit": unit.name, "detail": detail, "hours": hours}


def test_derived_schema_covers_types_enums_defaults_and_docs():
    assert derive_parameters(forecast) == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": 'Name of the city, for example "Paris".'},
            "days": {"type": "integer", "description": "How many days ahead.", "default": 3},
            "unit": {"type": "string", "enum": ["c", "f"], "description": "Temperature unit.", "default": "c"},
            "detail": {"type": "string", "enum": ["short", "long"], "default": "short"},
            "hours": {"type": ["array", "null"], "items": {"type": "integer"}},
            "tags": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "ratio": {"type": "number", "default": 0.5},
            "alerts": {"type": "boolean", "default": False},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def numpy_style(x: int, names: list[str]):
    """Numpy style.

    Parameters
    ----------
    x : int
        The x value.
    names : list of str
        Names to use.
    """


def sphinx_style(path: str, limit: int = 10):
    """Sphinx style.

    :param path: Where to look.
    :param int limit: At most this many.
    :returns: nothing
    """


def test_numpy_and_sphinx_docstrings():
    n = derive_parameters(numpy_style)["properties"]
    assert n == {"x": {"type": "integer", "description": "The x value."},
                 "names": {"type": "array", "items": {"type": "string"}, "description": "Names to use."}}
    s = derive_parameters(sphinx_style)["properties"]
    assert s == {"path": {"type": "string", "description": "Where to look."},
                 "limit": {"type": "integer", "description": "At most this many.", "default": 10}}


def test_registered_tool_runs_through_the_toolbox_with_enum_conversion():
    @tool(description="Forecast.", timeout=5)
    def weather(city: str, unit: Unit = Unit.CELSIUS) -> dict:
        return {"city": city, "unit": unit.name}

    try:
        spec = registered_specs()["weather"]
        assert spec.kind == "python" and spec.timeout == 5 and spec.description == "Forecast."
        box = Toolbox({"weather": PythonTool(ToolSpec(name="weather", description="", kind="python"))})
        result = box.call("weather", {"city": "Oslo", "unit": "f"})
        assert (result.status, result.text) == ("ok", '{"city": "Oslo", "unit": "FAHRENHEIT"}')
        bad = box.call("weather", {"city": "Oslo", "unit": "kelvin"})
        assert bad.status == "invalid"
    finally:
        unregister("weather")


@pytest.fixture
def module(tmp_path, monkeypatch):
    (tmp_path / "mytools_mod.py").write_text(textwrap.dedent('''
        import time

        def fail(x: int):
            """Always fails."""
            raise ValueError(f"bad x {x}")

        def slow():
            time.sleep(3)

        def text():
            return "plain"

        def nothing():
            return None

        def listing():
            return [1, "two", {"three": 3}]

        def flood():
            return "y" * 100000

        async def later(n: int):
            return n * 2

        def surrogate():
            return "bad \\ud83d here"

        def surrogate_key():
            return {"\\udc00k": ["v\\udcff"]}
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "mytools_mod"


def ptool(module, func, **kw):
    return PythonTool(ToolSpec(name=func, description="", kind="python", entrypoint=f"{module}:{func}", **kw))


def test_exception_becomes_error_with_traceback_only_in_data(module):
    result = Toolbox({"fail": ptool(module, "fail")}).call("fail", {"x": 3})
    assert result.status == "error"
    assert result.text == "ValueError: bad x 3"
    assert "Traceback" in result.data["traceback"] and 'raise ValueError(f"bad x {x}")' in result.data["traceback"]


def test_return_values_become_text(module):
    box = Toolbox({n: ptool(module, n) for n in ("text", "nothing", "listing", "later")})
    assert box.call("text", {}).text == "plain"
    assert box.call("nothing", {}).text == "(no output)"
    assert box.call("listing", {}).text == '[1, "two", {"three": 3}]'
    assert box.call("later", {"n": 21}).text == "42"


def test_a_lone_surrogate_in_a_result_reaches_the_model_as_u_fffd(module, capfd):
    """A string os.listdir gives for a name that is not UTF-8 crashed the worker in write_frame (UnicodeEncodeError):
    the call failed as "the tool's worker process died during the call", with tracebacks on stderr."""
    box = Toolbox({n: ptool(module, n) for n in ("surrogate", "surrogate_key")})
    plain = box.call("surrogate", {})
    assert (plain.status, plain.text, plain.data["isolation"]) == ("ok", "bad \ufffd here", "process")
    keyed = box.call("surrogate_key", {})
    assert (keyed.status, keyed.text) == ("ok", '{"\ufffdk": ["v\ufffd"]}')
    assert box.call("surrogate", {}).status == "ok"  # the same worker serves the next call
    assert capfd.readouterr().err == ""


def test_an_environment_variable_that_is_not_utf8_does_not_break_the_request_frame(module, monkeypatch):
    monkeypatch.setenv("THINKFLOW_ODD", "\udcff")  # the byte 0xff, as os.environ decodes it (surrogateescape)
    result = ptool(module, "text").run({})
    assert (result.status, result.text, result.data["isolation"]) == ("ok", "plain", "process")


def test_a_working_directory_the_worker_cannot_enter_fails_the_call_rather_than_running_elsewhere(
        module, monkeypatch, tmp_path):
    # a name that is not UTF-8 reaches the worker with U+FFFD in it (frames are JSON); chdir then failed quietly and
    # the tool ran in the worker's own directory
    import os

    tool = ptool(module, "text")
    monkeypatch.setattr(os, "getcwd", lambda: str(tmp_path / "gone\ufffd"))  # what the worker is asked to enter
    result = tool.run({})
    assert result.status == "error" and result.text.startswith("the tool's working directory cannot be entered: ")


def test_timeout_stops_waiting(module):
    result = ptool(module, "slow", timeout=0.2).run({})
    assert (result.status, result.text) == ("timeout", "timed out after 0.2 s")



@pytest.mark.parametrize("timeout", [1e10, float("inf")])
def test_a_timeout_longer_than_select_can_wait_still_runs_the_call(module, timeout):
    # a ToolSpec built in Python skips the schema's one-week cap: select() and threading's waits refuse more than
    # about 9.2e9 s (OverflowError), so the worker's reply is awaited in turns
    result = ptool(module, "text", timeout=timeout).run({})
    assert (result.status, result.text) == ("ok", "plain")

def test_output_is_capped(module):
    result = ptool(module, "flood", max_output=1000).run({})
    assert result.data["bytes"] == 100000 and result.data["truncated"] is True
    assert "[... 99.0 KB truncated ...]" in result.text


def test_bad_entrypoints_raise_tool_error(module):
    with pytest.raises(ToolError, match="has no attribute 'missing'"):
        ptool(module, "missing")
    with pytest.raises(ToolError, match="No module named 'no_such_module_xyz'"):
        PythonTool(ToolSpec(name="x", description="", kind="python", entrypoint="no_such_module_xyz:f"))
    with pytest.raises(ToolError, match="must look like 'package.module:function'"):
        PythonTool(ToolSpec(name="x", description="", kind="python", entrypoint="nocolon"))


def test_cap_text_and_sizes():
    assert cap_text("short", 100) == ("short", 5, False)
    text, total, cut = cap_text("a" * 50 + "b" * 50, 40)
    assert (total, cut) == (100, True)
    assert text == "a" * 30 + "\n[... 60 bytes truncated ...]\n" + "b" * 10
    assert [format_size(n) for n in (1, 999, 1500, 4_500_000)] == ["1 byte", "999 bytes", "1.5 KB", "4.5 MB"]


def test_entry_point_group_tools(module, monkeypatch):
    import importlib.metadata

    from thinkflow.tools.registry import entry_point_names

    eps = [importlib.metadata.EntryPoint(name="fail_tool", value=f"{module}:fail", group="thinkflow.tools")]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: eps if group == "thinkflow.tools" else [])
    assert entry_point_names() == ["fail_tool"]
    found = PythonTool(ToolSpec(name="fail_tool", description="", kind="python"))
    assert found.parameters()["required"] == ["x"]
    assert found.run({"x": 1}).text == "ValueError: bad x 1"


def test_registering_two_functions_under_one_name_is_an_error_naming_both():
    @tool("twin")
    def first(x: int) -> int:
        return x

    try:
        with pytest.raises(ToolError) as caught:
            @tool("twin")
            def second(x: int) -> int:
                return -x
        where = "test_tools_python:test_registering_two_functions_under_one_name_is_an_error_naming_both.<locals>"
        assert str(caught.value) == (f"tool 'twin' is registered twice: by {where}.first and by {where}.second; "
                                     "give one of them another name with @tool(\"other_name\")")
        assert registered_specs()["twin"].entrypoint == f"{where}.first"
        tool("twin")(first)  # the same function again (a module imported twice) is no conflict
    finally:
        unregister("twin")


def test_signature_types_pydantic_knows_keep_their_format_and_limits():
    import dataclasses
    from datetime import datetime
    from pathlib import Path
    from typing import Annotated

    from pydantic import Field

    @dataclasses.dataclass
    class Window:
        start: datetime
        hours: int = 1

    def book(when: datetime, where: Path, window: Window, seats: Annotated[int, Field(ge=0, le=9)] = 1,
             tags: list[Annotated[str, Field(min_length=2)]] | None = None) -> str:
        """Book a room.

        Args:
            when: Start time.
        """
        return (f"{type(when).__name__} {when.isoformat()} {type(where).__name__} {where} "
                f"{type(window).__name__} {window.start.hour} {window.hours} {seats}")

    assert derive_parameters(book) == {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time", "description": "Start time."},
            "where": {"type": "string", "format": "path"},
            "window": {"type": "object", "properties": {"start": {"type": "string", "format": "date-time"},
                                                        "hours": {"type": "integer", "default": 1}},
                       "required": ["start"]},
            "seats": {"type": "integer", "minimum": 0, "maximum": 9, "default": 1},
            "tags": {"type": ["array", "null"], "items": {"type": "string", "minLength": 2}},
        },
        "required": ["when", "where", "window"],
        "additionalProperties": False,
    }
    box = Toolbox({"book": PythonTool(ToolSpec(name="book", description="", kind="python"), func=book)})
    ok = box.call("book", {"when": "2026-12-01T09:30:00", "where": "rooms/a", "window": {"start": "2026-12-01T10:00:00"},
                           "seats": 3})
    assert (ok.status, ok.text) == ("ok", "datetime 2026-12-01T09:30:00 PosixPath rooms/a Window 10 1 3")
    too_many = box.call("book", {"when": "2026-12-01T09:30:00", "where": "a", "window": {"start": "2026-12-01"},
                                 "seats": 12})
    assert too_many.status == "invalid" and "seats" in too_many.text
    bad_date = PythonTool(ToolSpec(name="book", description="", kind="python"), func=book).run(
        {"when": "next tuesday", "where": "a", "window": {"start": "2026-12-01T10:00:00"}})
    assert bad_date.status == "invalid"
    assert bad_date.text.startswith("invalid arguments for tool 'book': argument 'when': Input should be a valid datetime")


def test_an_entry_point_tool_reaches_the_model_with_its_docstring_or_tool_description(tmp_path, monkeypatch):
    import importlib.metadata

    from thinkflow.config import locate
    from thinkflow.config.loader import load_agent

    (tmp_path / "ep_tools_mod.py").write_text(textwrap.dedent('''
        from thinkflow.tools import tool

        def stock_level(sku: str) -> int:
            """How many units of a product are in stock.

            Args:
                sku: The product's stock-keeping unit.
            """
            return 3

        @tool(description="Convert an amount between currencies at today's rate.")
        def convert(amount: float) -> float:
            """Internal docstring the model must not see."""
            return amount
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [importlib.metadata.EntryPoint(name="stock_level", value="ep_tools_mod:stock_level", group="thinkflow.tools"),
           importlib.metadata.EntryPoint(name="fx", value="ep_tools_mod:convert", group="thinkflow.tools")]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: eps if group == "thinkflow.tools" else [])
    locate.entry_point_tools.cache_clear()
    try:
        agent = tmp_path / "a.yaml"
        agent.write_text("version: 1\nname: shop\ntools: [stock_level, fx]\n", encoding="utf-8")
        spec = load_agent(agent)
        box = Toolbox.from_agent(spec)
        described = {t["function"]["name"]: t["function"]["description"] for t in box.definitions()}
        assert described == {"stock_level": "How many units of a product are in stock.",
                             "fx": "Convert an amount between currencies at today's rate."}
        assert box.definitions()[0]["function"]["parameters"]["properties"]["sku"]["description"] == (
            "The product's stock-keeping unit.")
    finally:
        locate.entry_point_tools.cache_clear()
        unregister("convert")

# ------------------------------------------------------------------------------------------------ where a call runs


def _where() -> str:
    import threading

    return threading.current_thread().name


def test_a_quick_tool_runs_inline_and_a_non_importable_one_in_a_reused_thread():
    import threading

    quick = PythonTool(ToolSpec(name="where", description="d", kind="python", quick=True), func=_where)
    plain = PythonTool(ToolSpec(name="where", description="d", kind="python"), func=lambda: _where())
    inline = quick.run({})
    assert inline.text == threading.current_thread().name and inline.data["isolation"] == "inline"
    assert plain.run({}).data["isolation"] == "thread"  # a lambda cannot be imported in a worker process
    names = {plain.run({}).text for _ in range(5)}
    assert len(names) == 1 and names != {threading.current_thread().name}
    assert names.pop().startswith("thinkflow-tool-")


def test_ctrl_c_interrupts_a_quick_tool_and_an_overrun_is_marked():
    import time

    def interrupted():
        raise KeyboardInterrupt

    spec = ToolSpec(name="k", description="d", kind="python", quick=True, timeout=0.01)
    with pytest.raises(KeyboardInterrupt):
        PythonTool(spec, func=interrupted).run({})
    slow = PythonTool(spec, func=lambda: time.sleep(0.05) or "late")
    result = slow.run({})
    assert (result.status, result.text, result.data["overran_timeout"]) == ("ok", "late", True)


def test_an_ordinary_tool_still_times_out_and_its_worker_is_not_reused_while_stuck():
    import threading

    release = threading.Event()
    spec = ToolSpec(name="stuck", description="d", kind="python", timeout=0.1)
    stuck = PythonTool(spec, func=lambda: release.wait(30) and "done")
    result = stuck.run({})
    assert result.status == "timeout" and result.text == "timed out after 0.1 s"
    free = PythonTool(ToolSpec(name="free", description="d", kind="python", timeout=10), func=lambda: "free")
    assert free.run({}).text == "free"  # not queued behind the stuck call
    release.set()
