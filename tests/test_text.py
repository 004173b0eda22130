"""text.py: the one place that cuts text and suggests a close name."""

import re

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from thinkflow.text import clip, closest, cut_middle, did_you_mean, valid_unicode, valid_unicode_in

MARK = re.compile(r"\[\.\.\. (\d+) characters cut(?: [^.]*)? \.\.\.\]")


def test_cut_middle_examples():
    assert cut_middle("short", 10) == "short"
    assert cut_middle("a" * 10 + "b" * 10, 6) == "aaaa [... 14 characters cut ...] bb"
    assert cut_middle("a" * 30 + "b" * 30, 12, reason="to fit", newline=True) == (
        "a" * 8 + "\n[... 48 characters cut to fit ...]\n" + "b" * 4)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=0, max_value=200), st.booleans())
def test_cut_middle_keeps_head_and_tail_and_counts_the_cut(text, limit, newline):
    out = cut_middle(text, limit, newline=newline)
    keep = max(limit, 2)
    if len(text) <= keep:
        assert out == text
        return
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    assert out.startswith(text[:head]) and out.endswith(text[len(text) - tail:])
    cut = MARK.search(out[head:])
    assert cut is not None and int(cut.group(1)) == len(text) - head - tail


def test_did_you_mean_and_closest():
    assert did_you_mean("methd", ["method", "url", "headers"]) == "did you mean 'method'?"
    assert did_you_mean("zzz", ["method", "url"]) == ""
    assert closest("calculater", ["calculator", "read_file"], cutoff=0.5) == "calculator"
    assert closest(3, [1, 2, 33]) == "33"


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=20), st.lists(st.text(max_size=20), max_size=8))
def test_a_suggestion_is_always_one_of_the_choices(word, choices):
    hint = did_you_mean(word, choices)
    assert hint == "" or hint[len("did you mean '"):-len("'?")] in choices


def test_clip_cuts_lines_then_characters():
    assert clip("a\nb\nc\n", 100, 2) == "a\nb\n… (1 more lines)"
    assert clip("x" * 10, 4, 5) == "xxxx …"
    assert clip("fine  ", 10, 3) == "fine"


@pytest.mark.parametrize("arguments, error, found", [
    ({"item": "widgets"}, """HTTP 404\n{"error": "unknown /stock key 'widgets'; known: ['gadget', 'widget']"}""",
     [("item", "widgets", "widget")]),
    ({"city": "Olso", "days": 3}, 'unknown city "Olso"; one of "Oslo", "Bergen"', [("city", "Olso", "Oslo")]),
    ({"expression": "2 * shop.port"}, "'shop.port' is not a number", []),  # a part of the value: no hint
    ({"region": "north"}, "unknown region 'north'; known: 'North', 'South'", []),  # only case differs: no hint
    ({"item": "widget"}, "server error", []),  # nothing quoted
    ({"item": "widgets"}, "item 'widgets' doesn't exist; known: 'gadget', 'widget'", [("item", "widgets", "widget")]),
    ({"src": "notes1.txt", "dst": "notes2.txt"}, "cannot copy: 'notes2.txt' already exists", []),  # its own value
    ({"city": "Oslo"}, "no weather station in 'Osl'", []),  # the error does not quote what was sent
    ({"user": "alice"}, "permission denied for 'alicea' (you are 'alice')", []),  # one other value: no list
    (["not", "a", "mapping"], "'x'", []),
])
def test_suggested_values_reads_a_close_value_the_error_quotes(arguments, error, found):
    from thinkflow.text import suggested_values

    assert suggested_values(arguments, error) == found


@settings(max_examples=200, deadline=None)
@given(arguments=st.dictionaries(st.text(max_size=8), st.text(max_size=20) | st.integers(), max_size=4),
       error=st.text(max_size=300))
def test_a_suggested_value_is_always_quoted_in_the_error(arguments, error):
    from thinkflow.text import suggested_values

    for key, given, value in suggested_values(arguments, error):
        assert arguments[key] == given and value != given
        assert any(f"{q}{value}{q}" in error for q in "'\"`")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=20))
def test_valid_unicode_always_encodes_and_keeps_valid_text(text):
    out = valid_unicode(text)
    out.encode("utf-8")  # never raises
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert len(out) <= len(text) and "\ufffd" in out
    else:
        assert out is text


def test_valid_unicode_pairs_escaped_halves_and_replaces_lone_ones():
    assert valid_unicode("a\ud83d\ude00b\ud800") == "a\U0001F600b\ufffd"
    value = {"k\udc00": ["x", "\ud800"], "n": 1}
    assert valid_unicode_in(value) == {"k\ufffd": ["x", "\ufffd"], "n": 1}
    clean = {"a": ["b", 1]}
    assert valid_unicode_in(clean) is clean
