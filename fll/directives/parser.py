"""The recipe language: tokens, statements and directive signatures.

A recipe is text: one directive per line (``;`` also ends a directive), ``#``,
``//`` and ``--`` start a comment to the end of the line and ``/* … */`` one that may
span lines, when they begin a token (Wrangler's grammar has all but ``#``, which its
older syntax skips); column names are bare (``body``) or
carry Wrangler's ``:`` prefix (``:body``), and quoted strings (``'…'`` or
``"…"``) may contain spaces, ``;`` and ``#``. Inside quotes a backslash only
escapes the quote character; every other backslash is kept, so regexes are
written as they are meant (``'\\d+'`` is the regex ``\\d+``). Text arguments
(delimiters, fill values) then understand ``\\t``, ``\\n`` and ``\\\\``.

This module only reads text: it must never import Spark or run anything, so
that a whole recipe is checked before any of it is applied.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import RecipeError

__all__ = ["Token", "Statement", "Param", "Signature", "Args", "split_statements",
           "parse_signature", "bind", "unescape_text", "check_regex", "parse_sed", "Sed"]


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


# Java-only regex syntax Python's `re` rejects; such patterns are left to Spark to check
# when no JVM is at hand.
_JAVA_ONLY = ("\\p{", "\\P{", "\\Q", "\\h", "\\H", "\\R", "\\X", "\\G", "\\V", "\\v",
              "[[", "&&", "\\u", "\\0", "\\c", "\\e")
_NAMED_GROUP = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")
_REGEX_CACHE: dict[str, str | None] = {}


def _java_pattern_class() -> Any:
    """``java.util.regex.Pattern`` of the active Spark session's JVM, or None.

    Never imports or starts Spark: only a session the caller already has is used.
    """
    import sys
    sql = sys.modules.get("pyspark.sql")
    if sql is None:
        return None
    try:
        session = sql.SparkSession.getActiveSession()
        jvm = getattr(session, "_jvm", None) if session is not None else None
        return jvm.java.util.regex.Pattern if jvm is not None else None
    except Exception:  # a stopped or Connect session: fall back to the local check
        return None


def check_regex(pattern: str) -> str | None:
    """None if ``pattern`` is a valid Java regex, else the reason it is not.

    With an active Spark session the JVM itself compiles the pattern
    (``java.util.regex.Pattern.compile``), so the rules are Java's exactly.
    Without one (a recipe checked before Spark starts) Python's ``re`` checks
    it after translating the Java syntax it spells differently (named groups
    ``(?<name>…)``, inline flags mid-pattern); constructs only Java has are
    then accepted and left to Spark to check when the recipe runs.
    """
    if pattern in _REGEX_CACHE:
        return _REGEX_CACHE[pattern]
    java = _java_pattern_class()
    if java is not None:
        try:
            java.compile(pattern)
            reason = None
        except Exception as exc:  # py4j wraps PatternSyntaxException
            reason = _java_reason(exc)
    else:
        reason = _python_check(pattern)
    if len(_REGEX_CACHE) < 4096:
        _REGEX_CACHE[pattern] = reason
    return reason


def _java_reason(exc: BaseException) -> str:
    java_exc = getattr(exc, "java_exception", None)
    text = str(java_exc.getDescription()) if java_exc is not None and hasattr(
        java_exc, "getDescription") else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _python_check(pattern: str) -> str | None:
    translated = _NAMED_GROUP.sub(r"(?P<\1>", pattern)
    try:
        with warnings.catch_warnings():   # Java's [a&&b] looks like a future set operation
            warnings.simplefilter("ignore", FutureWarning)
            re.compile(translated)
        return None
    except re.error as exc:
        if "global flags not at the start" in str(exc):   # Java allows (?i) anywhere
            return None
        if any(s in pattern for s in _JAVA_ONLY):
            return None
        return str(exc)
    except (OverflowError, RecursionError, ValueError) as exc:
        return str(exc)


@dataclass(frozen=True)
class Sed:
    """A ``s/pattern/replacement/flags`` expression; ``replacement`` is in Java syntax
    (``$1`` for a group, ``$0`` for the whole match)."""

    pattern: str
    replacement: str
    global_: bool
    ignore_case: bool


def _sed_replacement(text: str) -> str:
    """A sed replacement in Java syntax: ``\\1`` and ``$1`` name group 1, ``&`` the
    whole match, ``\\&`` a literal ``&``; any other backslash escapes one character."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("$" + nxt if nxt.isdigit() else "\\" + nxt)
            i += 2
            continue
        out.append("$0" if ch == "&" else ch)
        i += 1
    return "".join(out)


def parse_sed(text: str) -> Sed:
    """Parse ``s/old/new/flags``; the character after ``s`` is the delimiter and a
    backslash escapes it. Flags: ``g`` (every match) and ``i``/``I`` (ignore case).
    Raises ValueError naming what is wrong."""
    text = text.strip()
    if len(text) < 4 or text[0] != "s":
        raise ValueError("a sed expression starts with s and a delimiter, like s/old/new/g")
    delim = text[1]
    if delim.isalnum() or delim.isspace() or delim == "\\":
        raise ValueError(f"{delim!r} cannot be a sed delimiter")
    parts: list[str] = []
    cur: list[str] = []
    i = 2
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == delim:
            cur.append(delim if delim not in "\\^$.|?*+()[]{}" or len(parts) == 1
                       else "\\" + delim)
            i += 2
            continue
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if ch == delim:
            parts.append("".join(cur))
            cur = []
            if len(parts) == 2:
                i += 1
                break
        else:
            cur.append(ch)
        i += 1
    if len(parts) < 2:
        raise ValueError(f"a sed expression needs three {delim!r}: s{delim}old{delim}new{delim}")
    flags = text[i:]
    if any(ch.isdigit() for ch in flags):
        raise ValueError(f"sed occurrence numbers ({flags!r}) are not supported; use g or "
                         f"no flag (the first match)")
    bad = set(flags) - set("giI")
    if bad:
        raise ValueError(f"unknown sed flag(s) {''.join(sorted(bad))!r}; known: g, i, I")
    if not parts[0]:
        raise ValueError("the sed pattern is empty")
    reason = check_regex(parts[0])
    if reason:
        raise ValueError(f"bad regex {parts[0]!r}: {reason}")
    return Sed(parts[0], _sed_replacement(parts[1]), "g" in flags,
               "i" in flags or "I" in flags)


# -- signatures -------------------------------------------------------------

KINDS = ("column", "columns", "text", "regex", "int", "bool", "expr", "sed", "choice",
         "number", "props", "identifier")


@dataclass(frozen=True)
class Param:
    """One argument of a directive: ``kind`` is one of KINDS; ``choices`` for ``choice``."""

    name: str
    kind: str
    optional: bool = False
    choices: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)

    def usage(self) -> str:
        inner = "|".join(self.choices) if self.kind == "choice" else f"{self.name}"
        text = f"<{inner}>" + ("[,…]" if self.kind == "columns" else "")
        return f"[{text}]" if self.optional else text


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[Param, ...]

    def usage(self) -> str:
        return " ".join([self.name] + [p.usage() for p in self.params])


_PARAM = re.compile(r"(\[)?<([A-Za-z_][\w-]*)(?::([\w|-]+))?>(\])?")


def parse_signature(usage: str) -> Signature:
    """Read ``name <arg:kind> [<arg:kind>]`` into a `Signature` (used when registering).

    Kinds: column, columns (one or more, comma separated; space separated too when
    it is the last argument), text, regex, int, number (a decimal), bool, expr (the
    rest of the statement, or Wrangler's ``exp:{…}``), sed, props (``prop:{k=v}``),
    or ``a|b|c`` (one of these words). An optional argument whose kind does not fit
    the next word is skipped when a later argument fits it (as Wrangler binds
    arguments by type).
    """
    parts = usage.split(None, 1)
    if not parts:
        raise ValueError("a directive usage needs at least a name")
    name, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    params: list[Param] = []
    pos = 0
    rest = rest.strip()
    while pos < len(rest):
        if rest[pos].isspace():
            pos += 1
            continue
        m = _PARAM.match(rest, pos)
        if not m:
            raise ValueError(f"cannot read the usage of {name!r} at {rest[pos:]!r}")
        optional = bool(m.group(1))
        if optional != bool(m.group(4)):
            raise ValueError(f"unbalanced [ ] in the usage of {name!r}")
        pname, kind = m.group(2), (m.group(3) or "text")
        choices: tuple[str, ...] = ()
        if "|" in kind:
            choices, kind = tuple(kind.split("|")), "choice"
        if kind not in KINDS:
            raise ValueError(f"unknown argument kind {kind!r} in the usage of {name!r}; "
                             f"known: {', '.join(KINDS)}")
        if params and params[-1].kind == "expr" and not optional:
            raise ValueError(f"only optional arguments may follow an expr in {name!r}")
        if params and params[-1].optional and not optional:
            raise ValueError(f"a required argument follows an optional one in {name!r}")
        params.append(Param(pname.replace("-", "_"), kind, optional, choices))
        pos = m.end()
    return Signature(name, tuple(params))


class Args:
    """Bound arguments: attribute access by parameter name, ``None`` when omitted."""

    def __init__(self, values: dict[str, Any]):
        self.__dict__.update(values)

    def __getattr__(self, item: str) -> Any:   # only called for names not bound
        return None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return f"Args({self.__dict__!r})"


def _err(stmt: Statement, message: str, column: int, sig: Signature) -> RecipeError:
    return RecipeError(f"{stmt.name}: {message}", line=stmt.line, column=column,
                       directive=stmt.text, expected=sig.usage())


def bind(stmt: Statement, sig: Signature) -> Args:
    """Match a statement's tokens to a signature; raises `RecipeError` with line and column."""
    values: dict[str, Any] = {}
    toks = list(stmt.tokens)
    end_col = stmt.column + len(stmt.text)
    ti = 0
    for p in sig.params:
        if ti >= len(toks):
            if p.optional:
                values[p.name] = None
                continue
            raise _err(stmt, f"missing argument <{p.name}> ({p.kind})", end_col, sig)
        tok = toks[ti]
        # Wrangler's grammar reads an identifier unquoted and text quoted, so a quoted
        # last argument is the text one (``send-to-error exp:{…} 'message'``)
        lone_quoted = p.kind == "identifier" and tok.kind == "string" and ti == len(toks) - 1
        if p.optional and (not _fits(p, tok) or lone_quoted) and any(
                _fits(q, tok) for q in sig.params[sig.params.index(p) + 1:]):
            values[p.name] = None
            continue
        if p.kind == "expr" and tok.kind == "exp":
            values[p.name] = tok.value
            ti += 1
        elif p.kind == "expr":
            values[p.name] = stmt.rest(tok)
            ti = len(toks)
        elif p.kind == "columns":
            # last argument: every remaining token; otherwise one comma-separated token
            last = p is sig.params[-1]
            names: list[str] = []
            group = toks[ti:] if last else toks[ti:ti + 1]
            for before, after in zip(group[:-1], group[1:], strict=True):
                # Wrangler's grammar lists columns with commas (``:a, :b``); two names
                # with only space between are two arguments, which it refuses
                if not (before.raw.endswith(",") or after.raw.startswith(",")):
                    raise _err(stmt, f"<{p.name}>: separate column names with commas "
                               f"({before.raw},{after.raw}), not spaces", after.column, sig)
            # the tokens touch at commas (checked above), so together they are one
            # comma-separated list; Wrangler's grammar has no empty name in it
            # (``,a``, ``a,,b``, ``a, ,b``, ``a,`` are refused: SetHeaderTest)
            pieces: list[tuple[str, int]] = []
            joined, start = "", tok.column
            for t in group:
                if t.kind == "string":
                    if joined:
                        pieces.extend((q, start) for q in joined.split(","))
                        joined = ""
                    pieces.append((t.value, t.column))
                else:
                    if not joined:
                        start = t.column
                    joined += t.value
            if joined:
                pieces.extend((q, start) for q in joined.split(","))
            for piece, column in pieces:
                piece = piece.strip()
                if piece.startswith(":"):
                    piece = piece[1:]
                if not piece:
                    raise _err(stmt, f"<{p.name}>: an empty column name in the list",
                               column, sig)
                names.append(piece)
            if not names:
                raise _err(stmt, f"<{p.name}> needs at least one column name", tok.column, sig)
            values[p.name] = tuple(names)
            ti = len(toks) if last else ti + 1
        elif (p.kind in ("text", "regex", "sed") and p is sig.params[-1]
              and tok.kind == "word" and ti + 1 < len(toks)):
            # Wrangler's space-separated syntax: an unquoted last argument is the rest of
            # the line (``fill-null-or-empty :c not available``, ``format-date :d MM dd``)
            rest = Token("word", stmt.rest(tok), stmt.rest(tok), tok.column, tok.offset)
            values[p.name] = _convert(stmt, sig, p, rest)
            ti = len(toks)
        else:
            values[p.name] = _convert(stmt, sig, p, tok)
            ti += 1
        if p.check is not None and values.get(p.name) is not None:
            reason = p.check(values[p.name])
            if reason:
                raise _err(stmt, f"bad <{p.name}>: {reason}", tok.column, sig)
    if ti < len(toks):
        raise _err(stmt, f"unexpected extra argument {toks[ti].raw!r}", toks[ti].column, sig)
    return Args(values)


def _fits(p: Param, tok: Token) -> bool:
    """Whether ``tok`` can be argument ``p`` (used to skip optional arguments)."""
    v = tok.value
    if tok.kind in ("exp", "prop"):
        return p.kind == ("expr" if tok.kind == "exp" else "props")
    if p.kind in ("expr", "props"):
        return False
    if p.kind == "int":
        return tok.kind == "word" and re.fullmatch(r"[+-]?\d+", v) is not None
    if p.kind == "number":
        return tok.kind == "word" and re.fullmatch(r"[+-]?\d+(\.\d*)?", v) is not None
    if p.kind == "bool":
        return v in ("true", "false")
    if p.kind == "choice":
        return v.lower() in (c.lower() for c in p.choices)
    return True


def _props(stmt: Statement, sig: Signature, p: Param, tok: Token) -> dict[str, Any]:
    """``k=v, k2='text'`` inside ``prop:{…}``: numbers, true/false or quoted text."""
    out: dict[str, Any] = {}
    for part in (x.strip() for x in tok.value.split(",")):
        if not part:
            continue
        key, eq, val = part.partition("=")
        key, val = key.strip(), val.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][\w-]*", key) or not val:
            raise _err(stmt, f"<{p.name}>: cannot read property {part!r}; expected key=value",
                       tok.column, sig)
        if val[0] in "'\"" and len(val) > 1 and val[-1] == val[0]:
            out[key] = val[1:-1]
        elif val.lower() in ("true", "false"):
            out[key] = val.lower() == "true"
        elif re.fullmatch(r"[+-]?\d+", val):
            out[key] = int(val)
        elif re.fullmatch(r"[+-]?\d+\.\d*", val):
            out[key] = float(val)
        else:
            raise _err(stmt, f"<{p.name}>: property {key!r} must be a number, true/false or "
                       f"quoted text, got {val!r}", tok.column, sig)
    return out


def _convert(stmt: Statement, sig: Signature, p: Param, tok: Token) -> Any:
    v = tok.value
    if tok.kind in ("exp", "prop") and p.kind not in ("expr", "props"):
        raise _err(stmt, f"<{p.name}> cannot be a {tok.kind}:{{…}} block", tok.column, sig)
    if p.kind == "props":
        if tok.kind != "prop":
            raise _err(stmt, f"<{p.name}> must be prop:{{key=value,…}}, got {tok.raw!r}",
                       tok.column, sig)
        return _props(stmt, sig, p, tok)
    if p.kind == "number":
        if not re.fullmatch(r"[+-]?\d+(\.\d*)?", v):
            raise _err(stmt, f"<{p.name}> must be a number, got {tok.raw!r}", tok.column, sig)
        return float(v) if "." in v else int(v)
    if p.kind == "column":
        if not v:
            raise _err(stmt, f"<{p.name}> must be a column name", tok.column, sig)
        return v
    if p.kind == "text":
        return unescape_text(v)
    if p.kind == "identifier":
        return v
    if p.kind == "regex":
        reason = check_regex(v)
        if reason:
            raise _err(stmt, f"bad regex {v!r}: {reason}", tok.column, sig)
        return v
    if p.kind == "sed":
        try:
            return parse_sed(v)
        except ValueError as exc:
            raise _err(stmt, str(exc), tok.column, sig) from None
    if p.kind == "int":
        if not re.fullmatch(r"[+-]?\d+", v):
            raise _err(stmt, f"<{p.name}> must be an integer, got {tok.raw!r}", tok.column, sig)
        return int(v)
    if p.kind == "bool":
        if v not in ("true", "false"):
            # Wrangler's grammar has only lowercase true/false; it reads True as a name
            hint = " (lowercase, as Wrangler's grammar)" if v.lower() in ("true", "false") else ""
            raise _err(stmt, f"<{p.name}> must be true or false{hint}, got {tok.raw!r}",
                       tok.column, sig)
        return v == "true"
    if p.kind == "choice":
        for c in p.choices:
            if c.lower() == v.lower():
                return c
        raise _err(stmt, f"<{p.name}> must be one of {', '.join(p.choices)}, got {tok.raw!r}",
                   tok.column, sig)
    raise AssertionError(p.kind)  # pragma: no cover - parse_signature rejects other kinds
