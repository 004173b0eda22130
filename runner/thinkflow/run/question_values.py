"""Values a question names that the run's tool calls left out: the ``unused_value`` answer check.

A small model often answers a question about "units of Mouse in the West" from a call that filtered the region
only, or "the temperature in Oslo and in Bergen" from a call for Oslo alone, and states the missing value anyway
(suite ``csv-west-mouse-units``, ``http-two-cities``). :func:`unused_values` finds such values, two ways:

- **Enum values.** A value of a called tool's ``enum`` parameter that the question writes exactly as the schema
  does (``Mouse``, not ``mouse``: "tell us" is not the country ``US``), not as the first word of a sentence ("May I
  see ...", "Open tickets.csv ..."). Values written in lower case only in the schema (``sum``, ``month``, ``all``)
  are keywords, never data. A parameter the question names two or more values of (a comparison) or that a call
  grouped by (an argument whose value is the parameter's name, ``group_by: product``) is covered.
- **Listed values.** Values the question lists with one a call used: "Oslo and Bergen", "New York, Los Angeles
  and San Diego", "a.txt or b.txt", "Oslo vs. Bergen". A list needs ``and``, ``or``, ``&``, ``vs`` or ``versus``
  (commas alone join too much: "Paris, France", "Hi, Oslo weather?"). Items are capitalised words when the call's
  value is capitalised in the question, file-like words (a ``.`` or ``/`` inside) when the value is one; any other
  value lists nothing ("notes.txt and summarize", "oslo, please").

A value counts as used when any string argument of an ``ok`` call of that tool (nested ones too: ``filters:
{"region": "West"}``) holds it as a whole word, in any case (``product: "Mouse"`` or ``filter: "product ==
Mouse"``); a listed value, when a call of any tool holds it ("the weather in Oslo and the Reuters headlines"). An
enum value just after "except", "without", "not" (:data:`_EXCLUDING`) is one the question leaves out.

Cost: the question's first :data:`SCAN_CHARS` characters (cut at a space) are split into words once; each distinct
argument value (at most :data:`MAX_VALUES`) is looked for at its first :data:`MAX_OCCURRENCES` places, and a list
is walked one word at a time: linear in the question for each value, whatever the question holds.

English phrasing only. No I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from thinkflow.run.step import CallOutcome

SCAN_CHARS = 4000
"""How much of the question is read."""

MAX_VALUES = 64
"""Distinct string argument values looked for in the question."""

MAX_OCCURRENCES = 3
"""Places per value where a list is looked for."""

MAX_ITEM_WORDS = 4
"""Words of one capitalised list item ("Los Angeles", "Docking Station")."""

_WORD = re.compile(r"\w(?:[\w'./-]*\w)?|[^\w\s]")
"""A word (inner ``'``, ``.``, ``/`` and ``-`` kept: "don't", "config/app.json") or one punctuation mark."""

_JOINS = frozenset({"and", "or", "&", "vs", "versus"})
_PREPOSITIONS = frozenset({"in", "of", "for", "at", "from", "to", "on", "the"})
_SENTENCE_END = frozenset({".", "?", "!", ":", ";"})
_NOT_ITEMS = frozenset({"i", "i'm", "i'd", "i'll", "hi", "hello", "hey", "ok", "okay", "please", "thanks", "thank",
                        "yes", "no", "today", "tomorrow", "yesterday", "now", "then", "also", "what", "which", "how"})
"""Capitalised words that are never a listed value ("Oslo and I want it in Celsius")."""


NAMING_ARGUMENTS = frozenset({"title", "output"})
"""Arguments that name a result rather than choose what it holds: a chart titled "Monthly Sales of Laptop" over
every product did not use the question's "Laptop" (its ``product`` was ``all``)."""


def unused_values(question: str, calls: Sequence[CallOutcome],
                  tool_params: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(tool, parameter, value)`` for each value ``question`` names that no ``ok`` call of a called tool used (see
    the module docstring), in the order of the tools' first calls, enum values before listed ones.

    Args:
        question: the user's question (the run's task; a plan step's instruction in a planned run).
        calls: the run's tool call outcomes; only ``ok`` ones count as having used a value.
        tool_params: tool name -> its parameters schema (``{"properties": {name: {"enum": [...]}}}``); anything
            else (None, a schema without properties) offers no enum values.
    """
    words = _words(question)
    ok = [c.call for c in calls if c.status == "ok"]
    found: list[tuple[str, str, str]] = []
    any_used_text = "\n".join(v[:10_000] for call in ok for v in _strings(call.arguments))
    for tool in dict.fromkeys(call.name for call in ok):
        mine = [call for call in ok if call.name == tool]
        used = [v for call in mine for v in call.arguments.values() if isinstance(v, str)]
        chosen = [{k: a for k, a in call.arguments.items() if k not in NAMING_ARGUMENTS} for call in mine]
        used_text = "\n".join(v[:10_000] for arguments in chosen for v in _strings(arguments))
        schema = tool_params.get(tool)
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        for param, prop in (properties.items() if isinstance(properties, Mapping) else ()):
            enum = prop.get("enum") if isinstance(prop, Mapping) else None
            if not isinstance(param, str) or not isinstance(enum, list):
                continue
            if any(v.strip().lower() == param.lower() for v in used):
                continue  # a call grouped by this parameter
            named = [v for v in enum[:1000] if isinstance(v, str) and v != v.lower() and _written(words, v)]
            if len(named) == 1 and not _holds(used_text, named[0]):
                found.append((tool, param, named[0]))
        pairs = {(p, v.strip()) for call in mine for p, v in call.arguments.items()
                 if isinstance(p, str) and isinstance(v, str) and 2 <= len(v.strip()) <= 80}
        for param, value in sorted(pairs)[:MAX_VALUES]:
            for item in listed_with(words, value):  # used by any tool: "Oslo weather and Reuters headlines"
                if not _holds(any_used_text, item) and all(item != v for _, _, v in found):  # once, first tool
                    found.append((tool, param, item))
    return found


MAX_STRINGS = 200
"""String arguments read per call, nested ones included (``filters: {"region": "West"}``)."""


def _strings(arguments: Any) -> list[str]:
    """The string values in ``arguments`` (a call's arguments: dicts and lists nested), breadth first, at most
    :data:`MAX_STRINGS`."""
    out: list[str] = []
    queue = [arguments]
    while queue and len(out) < MAX_STRINGS:
        item = queue.pop(0)
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, Mapping):
            queue.extend(item.values())
        elif isinstance(item, (list, tuple)):
            queue.extend(item[:MAX_STRINGS])
    return out


def listed_with(words: Sequence[str], value: str) -> list[str]:
    """The values the question (its :func:`_words`) lists with ``value`` ("Oslo and in Bergen" -> ``["Bergen"]``),
    in the order found; [] when the question does not hold ``value`` or lists nothing with it."""
    target = [w.lower() for w in _WORD.findall(value)]
    if not target:
        return []
    out: list[str] = []
    for start in _occurrences(words, target, case_sensitive=False)[:MAX_OCCURRENCES]:
        first = words[start]
        kind = "capital" if first[:1].isupper() else "file" if _file_like(first) else None
        if kind is None:
            continue
        after = _walk(words, start + len(target), +1, kind)
        before = _walk(words, start - 1, -1, kind)
        if any(sep in _JOINS for _, sep in before + after):  # commas alone list nothing
            out += [item for item, _ in after + before if item not in out]
    return out


def _walk(words: Sequence[str], i: int, step: int, kind: str) -> list[tuple[str, str]]:
    """The list items from word ``i`` on, walking forwards (``step`` 1: separator, preposition, item, ...) or
    backwards (-1: preposition, separator, item, ...), with the separator before each: ``[(item, sep)]``."""
    out: list[tuple[str, str]] = []
    while 0 <= i < len(words):
        sep, i = _separator(words, i, step)
        if sep is None:
            break
        while 0 <= i < len(words) and words[i].lower() in _PREPOSITIONS:
            i += step
        item, i = _item(words, i, step, kind)
        if item is None:
            break
        out.append((item, sep))
    return out


def _separator(words: Sequence[str], i: int, step: int) -> tuple[str | None, int]:
    """The list separator at word ``i`` (``,``, a join word, ``, and``, ``vs.``), and the index past it."""
    if step < 0:
        while 0 <= i < len(words) and words[i].lower() in _PREPOSITIONS:
            i -= 1
    if not 0 <= i < len(words):
        return None, i
    word = words[i].lower()
    if word == "." and step < 0 and i > 0 and words[i - 1].lower() == "vs":
        return "vs", i - 2
    if word == ",":
        nxt = i + step
        if 0 <= nxt < len(words) and words[nxt].lower() in ("and", "or") and step > 0:
            return words[nxt].lower(), nxt + step
        return ",", nxt
    if word in _JOINS:
        nxt = i + step
        if step > 0 and word == "vs" and nxt < len(words) and words[nxt] == ".":
            nxt += 1
        if step < 0 and 0 <= nxt < len(words) and words[nxt] == ",":
            nxt -= 1
        return word, nxt
    return None, i


def _item(words: Sequence[str], i: int, step: int, kind: str) -> tuple[str | None, int]:
    """The list item at word ``i`` of ``kind`` (capitalised words, up to :data:`MAX_ITEM_WORDS`, or one file-like
    word), and the index past it; None when there is none there."""
    if kind == "file":
        if 0 <= i < len(words) and _file_like(words[i]):
            return words[i], i + step
        return None, i
    taken: list[int] = []
    while (0 <= i < len(words) and len(taken) < MAX_ITEM_WORDS and _capital(words[i])
           and words[i].lower() not in _JOINS and words[i].lower() not in _PREPOSITIONS):
        taken.append(i)
        i += step
    taken.sort()
    if len(taken) > 1 and _sentence_start(words, taken[0]):
        taken = taken[1:]  # the capital of a sentence's first word: "Compare New York"
    if not taken or (len(taken) == 1 and words[taken[0]].lower() in _NOT_ITEMS):
        return None, i
    return " ".join(words[k] for k in taken), i


def _words(text: str) -> list[str]:
    """The first :data:`SCAN_CHARS` characters of ``text``, cut at a space, as words and punctuation marks."""
    if len(text) > SCAN_CHARS:
        cut = text[:SCAN_CHARS]
        text = cut[:cut.rfind(" ")] if " " in cut else ""
    return _WORD.findall(text)


def _occurrences(words: Sequence[str], target: Sequence[str], *, case_sensitive: bool) -> list[int]:
    """Indexes where the word sequence ``target`` starts in ``words``."""
    n = len(target)
    if not n:
        return []
    seq = list(words) if case_sensitive else [w.lower() for w in words]
    wanted, first = list(target), target[0]
    return [i for i in range(len(seq) - n + 1) if seq[i] == first and seq[i:i + n] == wanted]


_EXCLUDING = frozenset({"except", "excluding", "without", "not", "but", "besides", "exclude", "ignore", "ignoring"})
"""Words that make the value after them one the question leaves out ("all products except Mouse")."""


def _written(words: Sequence[str], value: str) -> bool:
    """True when ``value`` is in the question as written (case and all), not as a sentence's first word and not
    just after a word that excludes it (:data:`_EXCLUDING`, up to two words before)."""
    target = _WORD.findall(value)
    return bool(target) and any(
        not _sentence_start(words, i) and not any(w.lower() in _EXCLUDING for w in words[max(0, i - 2):i])
        for i in _occurrences(words, target, case_sensitive=True))


def _holds(text: str, value: str) -> bool:
    """True when ``text`` (the calls' string arguments) holds ``value`` as a whole word or phrase, in any case."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.I) is not None


def _capital(word: str) -> bool:
    return word[:1].isupper()


def _file_like(word: str) -> bool:
    return len(word) > 2 and ("." in word[1:-1] or "/" in word)


def _sentence_start(words: Sequence[str], i: int) -> bool:
    return i == 0 or words[i - 1] in _SENTENCE_END


def unused_value_review(tool: str | Sequence[str], param: str, value: str,
                        calls: Sequence[CallOutcome] = ()) -> tuple[str, str, str, bool]:
    """The ``(code, problem, request, needs_call)`` of an ``unused_value`` finding: ``tool``'s calls left out
    ``param`` = ``value``, which the question names. The request spells out the call to make: the arguments of the
    last ``ok`` call of ``tool`` in ``calls`` with ``param`` set to ``value`` (a small model asked to "add" an
    argument dropped the others: suite ``csv-west-mouse-units``, run 11, lost ``region: West``), cut to
    :data:`MAX_SUGGESTED_CHARS`. It asks for an answer to the whole question from all the results: after the call
    for Bergen the model answered with Bergen's temperature alone (suite ``http-two-cities``, run 12). ``tool`` may
    name several tools that all left the value out (``query_data`` and ``plot_chart`` for "a chart of Laptop
    only"): the request then spells out a call of each."""
    tools = [tool] if isinstance(tool, str) else list(dict.fromkeys(tool))
    suggestions = []
    for name in tools:
        last = next((c.call.arguments for c in reversed(calls) if c.status == "ok" and c.call.name == name), {})
        suggested = json.dumps({**last, param: value}, ensure_ascii=False, default=str)
        if len(suggested) > MAX_SUGGESTED_CHARS:
            suggested = json.dumps({param: value}, ensure_ascii=False)
        suggestions.append(f"{name} with these arguments: {suggested}")
    names = " or ".join(tools)
    return ("unused_value", f"the question names {param} {value!r}, but no {names} call used it",
            f"The question names {param} {value!r}, but none of your {names} calls used it, so the results you "
            f"answered from do not cover {value!r}. Call {', and '.join(suggestions)}, then answer "
            "the whole question from the results of all your calls.", True)


MAX_SUGGESTED_CHARS = 600
"""Longest suggested arguments (JSON); longer ones are cut to the missing argument alone."""
