"""The recipe language's words: a recipe's text read into statements and tokens.

A recipe is text: one directive per line (``;`` also ends a directive), ``#``,
``//`` and ``--`` start a comment to the end of the line and ``/* … */`` one that may
span lines, when they begin a token (Wrangler's grammar has all but ``#``, which its
older syntax skips); column names are bare (``body``) or
carry Wrangler's ``:`` prefix (``:body``), and quoted strings (``'…'`` or
``"…"``) may contain spaces, ``;`` and ``#``. Inside quotes a backslash only
escapes the quote character; every other backslash is kept, so regexes are
written as they are meant (``'\\d+'`` is the regex ``\\d+``). Text arguments
(delimiters, fill values) then understand Java's escapes (`unescape_text`).

How the words bind to a directive's arguments is `fll.directives.parser`. This
module only reads text: it must never import Spark or run anything.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import RecipeError

__all__ = ["Token", "Statement", "split_statements", "unescape_text", "MAX_RECIPE_CHARS",
           "MAX_RECIPE_LINES"]


@dataclass(frozen=True)
class Token:
    """One word of a statement. ``kind`` is ``word``, ``column`` (``:x``), ``string``,
    ``exp`` (Wrangler's ``exp:{…}``, value = the inside) or ``prop`` (``prop:{k=v,…}``)."""

    kind: str
    value: str
    raw: str
    column: int      # 1-based column in the source line
    offset: int      # 0-based offset inside the statement text


@dataclass(frozen=True)
class Statement:
    """One directive invocation as written: its position, name and argument tokens."""

    index: int       # 1-based position in the recipe
    line: int        # 1-based source line
    column: int      # 1-based column of the directive name
    text: str        # the statement as written, without comment or ``;``
    name: str
    tokens: tuple[Token, ...] = ()

    def rest(self, token: Token) -> str:
        """The raw statement text from ``token`` to the end (for expression arguments)."""
        return self.text[token.offset:].strip()


#: Largest recipe accepted, in characters and in lines. Parsing costs about
#: 0.1 ms and 1 kB of memory per line, so an unbounded recipe (say 1M lines)
#: would take minutes and gigabytes before the first error could be shown.
MAX_RECIPE_CHARS = 2_000_000
MAX_RECIPE_LINES = 20_000


def split_statements(text: str) -> list[Statement]:
    """Cut a recipe into statements; raises `RecipeError` on an unterminated quote
    or a recipe over `MAX_RECIPE_CHARS` / `MAX_RECIPE_LINES`."""
    if not isinstance(text, str):
        raise RecipeError(f"a recipe must be text, got {type(text).__name__}")
    if len(text) > MAX_RECIPE_CHARS:
        raise RecipeError(f"the recipe is {len(text)} characters long; at most "
                          f"{MAX_RECIPE_CHARS} are accepted (split it into several stages)",
                          expected=f"at most {MAX_RECIPE_CHARS} characters")
    lines = text.count("\n") + 1
    if lines > MAX_RECIPE_LINES:
        raise RecipeError(f"the recipe has {lines} lines; at most {MAX_RECIPE_LINES} are "
                          f"accepted (split it into several stages)",
                          expected=f"at most {MAX_RECIPE_LINES} lines")
    statements: list[Statement] = []
    in_block = 0            # the line a /* … */ comment still open began on (0: none)
    for lineno, line in enumerate(text.splitlines(), start=1):
        tokens: list[tuple[str, str, str, int]] = []   # kind, value, raw, start
        i, n = 0, len(line)
        if in_block:
            end = line.find("*/")
            if end < 0:
                continue
            in_block, i = 0, end + 2

        while i < n:
            ch = line[i]
            if ch.isspace():
                i += 1
                continue
            if ch == ";":
                _flush(statements, tokens, line, lineno, i)
                i += 1
                continue
            if ch == "#" or line.startswith("//", i) or line.startswith("--", i):
                break                                   # comment to end of line
            if line.startswith("/*", i):                # Wrangler's block comment
                end = line.find("*/", i + 2)
                if end < 0:
                    in_block = lineno
                    break
                i = end + 2
                continue
            if line.startswith("${", i):
                raise RecipeError("a macro ${…} is CDAP's: substitute it before the recipe "
                                  "is parsed", line=lineno, column=i + 1,
                                  expected="a value in place of the macro")
            if ch in "'\"":
                value, j = _read_quoted(line, i, lineno)
                tokens.append(("string", value, line[i:j], i))
                i = j
                continue
            block = _BLOCK.match(line, i)
            if block:                                   # exp:{…} or prop:{…}
                value, j = _read_block(line, block.end() - 1, lineno)
                tokens.append((block.group(1), value, line[i:j], i))
                i = j
                continue
            j = i
            while j < n and not line[j].isspace() and line[j] != ";":
                if line[j] in "'\"" and _closes(line, j):  # a quoted part inside a word: keep it whole
                    _, j = _read_quoted(line, j, lineno)
                    continue
                j += 1
            raw = line[i:j]
            if raw.startswith(":") and len(raw) > 1 and raw[1] in "'\"":
                value, _ = _read_quoted(raw, 1, lineno, offset=i)
                tokens.append(("column", value, raw, i))
            elif raw.startswith(":") and len(raw) > 1:
                tokens.append(("column", raw[1:], raw, i))
            else:
                tokens.append(("word", raw, raw, i))
            i = j
        _flush(statements, tokens, line, lineno, min(i, n))
    if in_block:
        raise RecipeError("unterminated /* comment", line=in_block, expected="a closing */")
    return statements


def _flush(statements: list[Statement], tokens: list[tuple[str, str, str, int]], line: str,
           lineno: int, end: int) -> None:
    """Turn the tokens gathered so far into a statement (the first token is its name)."""
    if tokens:
        name_tok = tokens[0]
        base = name_tok[3]
        name, rest = name_tok[2], tokens[1:]
        # Wrangler migrates its first grammar before parsing (MigrateToV2): "set column c
        # expr" is set-column and "set columns a,b" is set-headers
        if name == "set" and rest and rest[0][0] == "word" and rest[0][1] in _V1_SET:
            name, rest = _V1_SET[rest[0][1]], rest[1:]
        toks = tuple(Token(k, v, r, s + 1, s - base) for k, v, r, s in rest)
        statements.append(Statement(len(statements) + 1, lineno, base + 1,
                                    line[base:end].rstrip(), name, toks))
    tokens.clear()


_V1_SET = {"column": "set-column", "columns": "set-headers"}
_BLOCK = re.compile(r"(exp|prop)\s*:\s*\{")


def _read_block(line: str, i: int, lineno: int) -> tuple[str, int]:
    """The text inside the braces starting at ``line[i]`` (nested braces and quoted
    strings allowed) and the index after the closing brace."""
    depth = 0
    j = i
    while j < len(line):
        ch = line[j]
        if ch in "'\"" and _closes(line, j):
            _, j = _read_quoted(line, j, lineno)
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return line[i + 1:j].strip(), j + 1
        j += 1
    raise RecipeError("unterminated { … } block", line=lineno, column=i + 1,
                      expected="a closing }")


def _closes(line: str, i: int) -> bool:
    """Whether the quote at ``line[i]`` has a closing quote on the line. A lone quote
    inside a word (``s/"//g``, ``it's``) is then a plain character, as Wrangler's
    space-separated (version 1) syntax reads it."""
    quote = line[i]
    j = i + 1
    while j < len(line):
        if line[j] == "\\" and j + 1 < len(line) and line[j + 1] == quote:
            j += 2
            continue
        if line[j] == quote:
            return True
        j += 1
    return False


def _read_quoted(line: str, i: int, lineno: int, offset: int = 0) -> tuple[str, int]:
    quote = line[i]
    out: list[str] = []
    j = i + 1
    while j < len(line):
        ch = line[j]
        if ch == "\\" and j + 1 < len(line) and line[j + 1] == quote:
            out.append(quote)
            j += 2
            continue
        if ch == quote:
            return "".join(out), j + 1
        out.append(ch)
        j += 1
    raise RecipeError(f"unterminated string starting with {quote}", line=lineno,
                      column=offset + i + 1, expected=f"a closing {quote}")


_JAVA_ESCAPE = re.compile(r"\\(u+[0-9a-fA-F]{4}|[0-3][0-7]{2}|[0-7]{1,2}|[btnfr\"'\\])")
_SIMPLE_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "'": "'",
                   "\\": "\\"}


def _java_escape(m: "re.Match[str]") -> str:
    body = m.group(1)
    if body[0] == "u":
        return chr(int(body.lstrip("u"), 16))
    if body[0].isdigit():
        return chr(int(body, 8))
    return _SIMPLE_ESCAPES[body]


def unescape_text(value: str) -> str:
    """Decode Java escapes in a text argument, as Wrangler's directives do with
    ``StringEscapeUtils.unescapeJava``: ``\\t \\n \\r \\b \\f \\' \\" \\\\``,
    ``\\uXXXX`` and octal ``\\0``–``\\377``. Any other backslash is kept as written."""
    if "\\" not in value:
        return value
    return _JAVA_ESCAPE.sub(_java_escape, value)
