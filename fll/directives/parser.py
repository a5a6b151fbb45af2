"""The recipe language's grammar: directive signatures and binding statements to them.

A directive's usage string (``copy <source:column> <destination:column> [<force:bool>]``)
is its signature; `bind` checks a statement's tokens (`fll.directives.lexer`) against
it and converts them (columns, text with Java escapes, regexes checked as Java reads
them, ``s/…/…/`` expressions, numbers, booleans, choices) into `Args`.

This module only reads text: it must never import Spark or run anything, so
that a whole recipe is checked before any of it is applied.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import RecipeError
from .lexer import Statement, Token, unescape_text

__all__ = ["Param", "Signature", "Args", "parse_signature", "bind", "check_regex", "parse_sed",
           "Sed"]


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
