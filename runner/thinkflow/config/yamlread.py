"""Bounded, line-marked YAML reading: ``safe_load`` semantics plus a side table of positions for every node.

The YAML is composed into a node tree by a ``yaml.SafeLoader`` subclass (libyaml's ``CSafeLoader`` when present),
then turned into plain dicts, lists and scalars here, so that:

- every value and every key keeps its 1-based ``(line, column)`` in :class:`Marks`, keyed by its path
  (a tuple of keys and list indexes);
- a plain scalar that YAML 1.1 resolved to a boolean or a number keeps its original text (``no``, ``1.10``), so an
  error can say exactly what to quote, and so does one that looks like a number in exponent form but YAML 1.1 reads
  as a string (``1e10``: its floats need a dot and a signed exponent, ``1.0e+10``), so an error can say how to write
  it;
- duplicate keys are an error naming both lines, while merge keys (``<<: *defaults``) and overriding a merged key
  stay legal;
- input is bounded: files over :data:`MAX_BYTES` and documents expanding (through aliases) to more than
  :data:`MAX_NODES` nodes are refused early, and recursive aliases are refused;
- a tab used for indentation is a one-line error with its position instead of a scanner traceback;
- an integer too long for Python to read or write in decimal (over :data:`MAX_INT_DIGITS` digits, or a ``0x``
  integer as large) refuses the document with its position instead of a ``ValueError`` traceback.

Keys are always strings: a scalar key keeps its text as written (``on:`` stays ``"on"``).
Problems are reported as :class:`thinkflow.errors.ConfigIssue`; nothing here raises for bad input.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from thinkflow.errors import ConfigIssue

MAX_BYTES = 1024 * 1024
"""Largest config file read, in bytes (1 MiB)."""

MAX_NODES = 100_000
"""Most nodes one document may expand to, counting every node reached through an alias again."""

MAX_DEPTH = 100
"""Deepest nesting of mappings and sequences in one document (no config needs more; deeper would exhaust the
stack of the recursive steps that follow: schema validation, interpolation)."""

MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300
"""Most decimal digits of an integer in a document (Python's limit for ``int(text)`` and ``str(int)``; a larger
integer could not be read, printed in an issue or written as JSON)."""

EXPONENT_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+")
"""A number in exponent form as JSON and YAML 1.2 read it (``1e10``, ``2.5E3``, ``-1e+5``); YAML 1.1 reads those
without a dot or without a sign in the exponent as strings."""

PathKey = tuple[Any, ...]

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_SCALARS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
}
_constructor = yaml.constructor.SafeConstructor()


class MarkedLoader(_Base):  # type: ignore[misc, valid-type]
    """A safe loader used only to compose node trees (``get_single_node`` / ``compose_all``); never constructs."""


def dotted(path: PathKey) -> str:
    """Render a path as ``tools[2].request.method``; ``""`` for the root."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass
class Marks:
    """Positions of one document's nodes, keyed by path.

    Attributes:
        values: path -> (line, column) of the value node, 1-based.
        keys: path -> (line, column) of the mapping key that holds the value, 1-based.
        texts: path -> original text of a plain scalar that YAML read as a boolean or a number, or as a string
            that looks like a number in exponent form (:data:`EXPONENT_NUMBER`: ``1e10``).
    """

    values: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    keys: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    texts: dict[PathKey, str] = field(default_factory=dict)

    def at(self, path: PathKey, *, key: bool = True) -> tuple[int, int]:
        """Best position for ``path``: its key (or its value when ``key`` is False), else the nearest ancestor's."""
        path = tuple(path)
        while True:
            found = (self.keys.get(path) if key else None) or self.values.get(path) or self.keys.get(path)
            if found:
                return found
            if not path:
                return (1, 1)
            path = path[:-1]


@dataclass
class Document:
    """One YAML document: its data (dicts, lists, scalars), its marks and its first line (1-based)."""

    data: Any
    marks: Marks
    line: int = 1


class _Builder:
    """Turns a composed node tree into plain data, recording marks and problems."""

    def __init__(self, file: str):
        self.file = file
        self.marks = Marks()
        self.issues: list[Any] = []
        self.count = 0
        self.active: set[int] = set()

    def issue(self, mark: Any, path: PathKey, message: str, hint: str = "") -> None:
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        self.issues.append(ConfigIssue(self.file, line, col, dotted(path), message, hint))

    def build(self, node: yaml.Node, path: PathKey) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise _TooBig()
        self.marks.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, path)
        if len(path) >= MAX_DEPTH:  # this mapping or sequence is level len(path) + 1
            raise _TooDeep(node)
        if id(node) in self.active:
            self.issue(node.start_mark, path, "recursive alias: a node contains itself", "remove the alias")
            return None
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                if node.tag != _SEQ:
                    self.issue(node.start_mark, path, f"unsupported tag {node.tag!r}", "remove the tag")
                return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
            if node.tag != _MAP:
                self.issue(node.start_mark, path, f"unsupported tag {node.tag!r}", "remove the tag")
            return self.mapping(node, path)
        finally:
            self.active.discard(id(node))

    def scalar(self, node: yaml.ScalarNode, path: PathKey) -> Any:
        tag = node.tag
        if tag == _STR:
            if not node.style and EXPONENT_NUMBER.fullmatch(node.value):  # 1e10: a string to YAML 1.1
                self.marks.texts[path] = node.value
            return node.value
        if tag == _TIMESTAMP:
            return node.value  # JSON has no dates: keep the text as written
        if tag in _SCALARS:
            try:
                value = _constructor.yaml_constructors[tag](_constructor, node)
                if isinstance(value, int) and not isinstance(value, bool):
                    str(value)  # a 0x/0o/0b integer reads at any size but cannot be written in decimal
            except ValueError:  # only int() and str() of an integer past MAX_INT_DIGITS digits raise here
                raise _TooLong(node, path) from None
            if not node.style and value is not None:
                self.marks.texts[path] = node.value
            return value
        self.issue(node.start_mark, path, f"unsupported tag {tag!r}", "remove the tag or quote the value")
        return node.value

    def items(self, node: yaml.MappingNode, path: PathKey) -> list[tuple[str, yaml.Node, yaml.Node]]:
        """The mapping's (key, key node, value node) after merges; explicit keys override merged ones."""
        merged: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        explicit: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, yaml.MappingNode):
                        self.issue(source.start_mark, path, "a merge key '<<' needs a mapping or a list of mappings")
                        continue
                    if id(source) in self.active:
                        self.issue(source.start_mark, path, "recursive alias: a node contains itself")
                        continue
                    self.count += len(source.value)
                    if self.count > MAX_NODES:
                        raise _TooBig()
                    self.active.add(id(source))
                    try:
                        for key, kn, vn in self.items(source, path):
                            merged.setdefault(key, (kn, vn))
                    finally:
                        self.active.discard(id(source))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.issue(key_node.start_mark, path, "a key must be a plain name, not a list or mapping")
                continue
            key = key_node.value
            if key in explicit:
                first = explicit[key][0].start_mark.line + 1
                again = key_node.start_mark.line + 1
                self.issue(
                    key_node.start_mark,
                    path + (key,),
                    f"duplicate key '{key}' on line {again} (first defined on line {first})",
                    "remove one of them",
                )
                continue
            explicit[key] = (key_node, value_node)
        merged.update(explicit)
        return [(key, kn, vn) for key, (kn, vn) in merged.items()]

    def mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, key_node, value_node in self.items(node, path):
            sub = path + (key,)
            self.marks.keys[sub] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            result[key] = self.build(value_node, sub)
        return result


class _TooBig(Exception):
    pass


class _TooLong(Exception):
    def __init__(self, node: yaml.Node, path: PathKey):
        super().__init__()
        self.node = node
        self.path = path


class _TooDeep(Exception):
    def __init__(self, node: yaml.Node):
        super().__init__()
        self.node = node


def _yaml_error_issue(file: str, text: str, error: yaml.YAMLError) -> Any:
    """One issue for a YAML syntax error, with a plain fix for tabs used as indentation."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow, at a character offset
        before = text[: error.position]
        line, column = before.count("\n") + 1, error.position - (before.rfind("\n") + 1) + 1
        code = ord(error.character) if isinstance(error.character, str) else int(error.character)
        return ConfigIssue(file, line, column, "", f"invalid YAML: control character U+{code:04X} is not allowed",
                           "remove it, or check that this is a text file")
    if mark is None:
        return ConfigIssue(file, 1, 1, "", f"invalid YAML: {problem}")
    lines = text.splitlines()
    line_text = lines[mark.line] if mark.line < len(lines) else ""
    indent = line_text[: len(line_text) - len(line_text.lstrip(" \t"))]
    if "\t" in indent or (mark.column < len(line_text) and line_text[mark.column] == "\t"):
        column = line_text.index("\t") + 1
        return ConfigIssue(file, mark.line + 1, column, "", "tab character used for indentation",
                           "use spaces for indentation")
    return ConfigIssue(file, mark.line + 1, mark.column + 1, "", f"invalid YAML: {problem}")


def read_text(path: Path, file: str | None = None) -> tuple[str | None, list[Any]]:
    """Read a config file as UTF-8 (a BOM is dropped), refusing files over :data:`MAX_BYTES`.

    Returns ``(text, [])`` or ``(None, [issue])``.
    """
    file = file if file is not None else str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            return None, [ConfigIssue(file, 1, 1, "", f"file is {size} bytes, over the limit of {MAX_BYTES} bytes",
                                      "split it into smaller files")]
        raw = path.read_bytes()[: MAX_BYTES + 1]
    except OSError as exc:
        return None, [ConfigIssue(file, 1, 1, "", f"cannot read file: {exc.strerror or exc}")]
    if len(raw) > MAX_BYTES:
        return None, [ConfigIssue(file, 1, 1, "", f"file is over the limit of {MAX_BYTES} bytes",
                                  "split it into smaller files")]
    try:
        return raw.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return None, [ConfigIssue(file, line, 0, "", "file is not valid UTF-8", "save it as UTF-8")]


def parse_documents(text: str, file: str = "<string>") -> tuple[list[Document], list[Any]]:
    """Parse every YAML document in ``text``.

    Returns ``(documents, issues)``; a YAML syntax error, an oversized text, an alias bomb, nesting deeper than
    :data:`MAX_DEPTH` or an integer over :data:`MAX_INT_DIGITS` digits gives no documents and one issue.
    Empty documents are skipped.
    """
    if len(text) > MAX_BYTES and len(text.encode("utf-8")) > MAX_BYTES:
        return [], [ConfigIssue(file, 1, 1, "", f"text is over the limit of {MAX_BYTES} bytes",
                                "split it into smaller files")]
    try:
        nodes = list(yaml.compose_all(text, Loader=MarkedLoader))
    except yaml.YAMLError as exc:
        return [], [_yaml_error_issue(file, text, exc)]
    except RecursionError:  # the pure-Python composer recurses per level (libyaml stops at 1000 levels itself)
        return [], [ConfigIssue(file, 1, 1, "", f"document is nested deeper than {MAX_DEPTH} levels",
                                "flatten it")]
    documents: list[Document] = []
    issues: list[Any] = []
    total = 0
    for node in nodes:
        if node is None:
            continue
        builder = _Builder(file)
        builder.count = total
        try:
            data = builder.build(node, ())
        except _TooBig:
            return [], [ConfigIssue(file, node.start_mark.line + 1, node.start_mark.column + 1, "",
                                    f"document expands to more than {MAX_NODES} nodes through aliases",
                                    "remove the aliases (an alias bomb?)")]
        except _TooDeep as deep:
            mark = deep.node.start_mark
            return [], [ConfigIssue(file, mark.line + 1, mark.column + 1, "",
                                    f"document is nested deeper than {MAX_DEPTH} levels", "flatten it")]
        except _TooLong as long:
            mark = long.node.start_mark
            return [], [ConfigIssue(file, mark.line + 1, mark.column + 1, dotted(long.path),
                                    f"integer has more than {MAX_INT_DIGITS} digits",
                                    "use a smaller number, or quote it to make it a string")]
        except RecursionError:
            return [], [ConfigIssue(file, node.start_mark.line + 1, node.start_mark.column + 1, "",
                                    f"document is nested deeper than {MAX_DEPTH} levels", "flatten it")]
        total = builder.count
        issues.extend(builder.issues)
        documents.append(Document(data, builder.marks, node.start_mark.line + 1))
    return documents, issues
