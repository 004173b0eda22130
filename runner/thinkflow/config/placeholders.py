"""``{param}`` placeholders in shell command and HTTP request templates: what one is, and finding them.

A placeholder is ``{name}`` with ``name`` a Python identifier. ``${NAME}`` (a shell variable in a ``shell: true``
script) and ``{{name}}`` are not placeholders, and neither is any other brace text (``awk '{print $1}'``, ``{}``).
The config checks (every placeholder a declared parameter) and the tools that fill them in
(:mod:`thinkflow.tools.templating`) share this one definition.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

PLACEHOLDER = re.compile(r"(?<![${])\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


def placeholders(template: str) -> list[str]:
    """Names of the placeholders in one template string, in order (repeats kept)."""
    return PLACEHOLDER.findall(template)


class ShellPlaceholder(NamedTuple):
    """Where one placeholder stands in a ``shell: true`` script (see :func:`scan_shell`).

    Attributes:
        name: the parameter name.
        start: offset of the ``{`` in the script.
        context: ``"plain"`` (a word of its own or part of one, unquoted: the only safe place), ``"single"`` or
            ``"double"`` (inside quotes), ``"backslash"`` (right after a ``\\``), ``"heredoc"`` (in a
            here-document body), ``"expansion"`` (inside ``${...}``) or ``"arithmetic"`` (inside ``$((...))``).
        word_start: the value begins a shell word (so a leading ``-`` would make it an option).
        after_dashdash: a ``--`` word stands earlier in the same simple command (the value is an operand).
    """

    name: str
    start: int
    context: str
    word_start: bool
    after_dashdash: bool


_COMMAND_ENDS = ";|&()\n`"


def scan_shell(script: str) -> list[ShellPlaceholder]:
    """Every placeholder of a ``shell: true`` script with its quoting context, in order.

    A small POSIX sh lexer (quotes, backslashes, ``$(...)``, backquotes, ``${...}``, ``$((...))``, comments and
    here-documents), enough to tell whether the ``shlex.quote``-d value lands where the shell takes it as one
    literal word. Linear in the script's length.
    """
    found = {m.start(): m for m in PLACEHOLDER.finditer(script)}
    out: list[ShellPlaceholder] = []
    stack: list[str] = ["cmd"]
    depth: list[int] = []  # parenthesis depth inside each $((
    word = ""
    dashdash = False
    heredocs: list[tuple[str, bool]] = []
    i, n = 0, len(script)

    def word_starts_at(k: int) -> bool:
        return k == 0 or script[k - 1] in " \t\n;|&(`"

    while i < n:
        top = stack[-1]
        if i in found:
            m = found[i]
            context = {"cmd": "plain", "bt": "plain", "sq": "single", "dq": "double", "param": "expansion",
                       "arith": "arithmetic"}[top]
            start_word = top in ("cmd", "bt") and word_starts_at(i)
            out.append(ShellPlaceholder(m.group(1), i, context, start_word, dashdash))
            word += "x"
            i = m.end()
            continue
        ch = script[i]
        if top == "sq":
            if ch == "'":
                stack.pop()
            i += 1
            continue
        if ch == "\\":
            if i + 1 in found:
                m = found[i + 1]
                out.append(ShellPlaceholder(m.group(1), i + 1, "backslash", False, dashdash))
                i = m.end()
            else:
                i += 2
            word += "x"
            continue
        if top == "dq" and ch == '"':
            stack.pop()
            i += 1
            continue
        if top == "param" and ch == "}":
            stack.pop()
            i += 1
            continue
        if top == "arith":
            if ch == "(":
                depth[-1] += 1
            elif ch == ")":
                if depth[-1] == 0 and script.startswith("))", i):
                    stack.pop()
                    depth.pop()
                    i += 2
                    continue
                depth[-1] -= 1
            i += 1
            continue
        if ch == "$" and script.startswith("$((", i):
            stack.append("arith")
            depth.append(0)
            i += 3
            continue
        if ch == "$" and script.startswith("$(", i):
            stack.append("cmd")
            word, dashdash = "", False
            i += 2
            continue
        if ch == "$" and script.startswith("${", i):
            stack.append("param")
            i += 2
            continue
        if top == "dq" or top == "param":
            if ch == "`":
                stack.append("bt")
            elif ch == '"' and top == "param":
                stack.append("dq")
            i += 1
            continue
        # command context: the top level, $(...) or `...`
        if ch == "'":
            stack.append("sq")
        elif ch == '"':
            stack.append("dq")
        elif ch == "`":
            if top == "bt":
                stack.pop()
            else:
                stack.append("bt")
            word, dashdash = "", False
        elif ch == ")" and top == "cmd" and len(stack) > 1:
            stack.pop()
            word, dashdash = "", False
        elif ch == "#" and word_starts_at(i):
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch == "<" and script.startswith("<<", i) and not script.startswith("<<<", i):
            j = i + 2
            strip = script.startswith("-", j)
            j += 1 if strip else 0
            while j < n and script[j] in " \t":
                j += 1
            k = j
            while k < n and script[k] not in " \t\n;|&<>()":
                k += 1
            delimiter = script[j:k].replace("'", "").replace('"', "").replace("\\", "")
            if delimiter:
                heredocs.append((delimiter, strip))
            i = k
            continue
        elif ch == "\n" and heredocs:
            i += 1
            for delimiter, strip in heredocs:
                while i < n:
                    end = script.find("\n", i)
                    end = n if end < 0 else end
                    line = script[i:end]
                    for start, m in found.items():
                        if i <= start < end:
                            out.append(ShellPlaceholder(m.group(1), start, "heredoc", False, dashdash))
                    i = end + 1
                    if (line.lstrip("\t") if strip else line) == delimiter:
                        break
            heredocs = []
            word, dashdash = "", False
            continue
        if ch in " \t\n" or ch in _COMMAND_ENDS:
            if word == "--":
                dashdash = True
            word = ""
            if ch in _COMMAND_ENDS:
                dashdash = False
        elif ch not in "'\"":
            word += ch
        i += 1
    return out


_CONTEXT_TEXT = {
    "single": ("stands inside single quotes", "remove the quotes around '{{{name}}}': ThinkFlow quotes every value "
                                               "itself (write {{{name}}}, not '{{{name}}}')"),
    "double": ("stands inside double quotes", "remove the quotes around '{{{name}}}': ThinkFlow quotes every value "
                                               "itself (write {{{name}}}, not \"{{{name}}}\")"),
    "backslash": ("follows a backslash", "remove the backslash before '{{{name}}}'"),
    "heredoc": ("stands in a here-document (the shell expands $(...) there and quotes do not apply)",
                "pass the value as an argument instead, e.g. printf '%s\\n' {{{name}}} | ..."),
    "expansion": ("stands inside ${{...}}", "use the value as a word of its own, e.g. v={{{name}}}; ... \"$v\""),
    "arithmetic": ("stands inside $((...))", "use the value as a word of its own, e.g. v={{{name}}}; ... \"$v\""),
}


def shell_template_problems(script: str, with_offsets: bool = False) -> list[Any]:
    """``(name, problem, fix)`` (plus the placeholder's offset in ``script`` with ``with_offsets``) for each placeholder of a ``shell: true`` script that does not stand as a plain
    unquoted word (part): inside quotes, after a backslash, in a here-document, in ``${...}`` or ``$((...))``.
    There the ``shlex.quote``-d value would not be one literal word (``echo '{a}'`` with ``a = $(touch x)``
    runs ``touch``)."""
    problems = []
    for found in scan_shell(script):
        if found.context == "plain":
            continue
        where, fix = _CONTEXT_TEXT[found.context]
        problem = (f"placeholder '{{{found.name}}}' of a shell: true command {where}: the quoted value would not "
                   "be one literal word")
        entry = (found.name, problem, fix.format(name=found.name))
        problems.append((*entry, found.start) if with_offsets else entry)
    return problems
