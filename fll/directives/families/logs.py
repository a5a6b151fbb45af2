"""Web server access logs: parse-as-log.

It follows CDAP Wrangler's ParseLog, which hands the format to Niels Basjes'
Apache HTTPD log parser and names each field it returns ``TYPE:name``
lowercased with every character outside ``[a-z0-9_]`` turned into ``_``. Here
the format becomes one Java regular expression and every field one
``regexp_extract``: no Python runs per row, and no Spark action runs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from .. import labels as L
from ..context import StepContext
from ..parser import Args
from ..registry import Outcome, register_directive
from ..support import (fail_when, null_value, parse_check, put_all)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


#: The named formats the Apache parser knows (as in Apache HTTPD's manual).
LOG_FORMATS = {
    "common": '%h %l %u %t "%r" %>s %b',
    "combined": '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"',
    "combinedio": '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i" %I %O',
    "referer": "%{Referer}i -> %U",
    "agent": "%{User-agent}i",
}

#: The column Wrangler sets to 1 on a line that does not fit the format.
PARSE_ERROR = "log.parse.error"

# What the values of a field look like (the parser's FORMAT_* regexes).
_NO_SPACE, _TEXT, _NUMBER, _CLF_NUMBER = r"\S*", ".*?", "-?[0-9]+", "-|-?[0-9]+"

# Apache tokens without a name: token -> (type, field, value regex)
_SIMPLE = {
    "%a": ("IP", "connection.client.ip", _NO_SPACE),
    "%{c}a": ("IP", "connection.client.peerip", _NO_SPACE),
    "%A": ("IP", "connection.server.ip", _NO_SPACE),
    "%B": ("BYTES", "response.body.bytes", _NUMBER),
    # %b is the CLF byte count ('-' for none); Wrangler keeps only its number form
    "%b": ("BYTES", "response.body.bytes", _CLF_NUMBER),
    "%D": ("MICROSECONDS", "server.process.time", _NUMBER),
    "%f": ("FILENAME", "server.filename", _TEXT),
    "%h": ("IP", "connection.client.host", _NO_SPACE),
    "%H": ("PROTOCOL", "request.protocol", _NO_SPACE),
    "%k": ("NUMBER", "connection.keepalivecount", _NUMBER),
    "%l": ("NUMBER", "connection.client.logname", _CLF_NUMBER),
    "%L": ("STRING", "request.errorlogid", _NO_SPACE),
    "%m": ("HTTP.METHOD", "request.method", _NO_SPACE),
    "%p": ("PORT", "request.server.port.canonical", _NUMBER),
    "%{canonical}p": ("PORT", "connection.server.port.canonical", _NUMBER),
    "%{local}p": ("PORT", "connection.server.port", _NUMBER),
    "%{remote}p": ("PORT", "connection.client.port", _NUMBER),
    "%P": ("NUMBER", "connection.server.child.processid", _NUMBER),
    "%{pid}P": ("NUMBER", "connection.server.child.processid", _NUMBER),
    "%{tid}P": ("NUMBER", "connection.server.child.threadid", _NUMBER),
    "%q": ("HTTP.QUERYSTRING", "request.querystring", _NO_SPACE),
    "%r": ("HTTP.FIRSTLINE", "request.firstline", ".*?"),
    "%R": ("STRING", "request.handler", _TEXT),
    "%s": ("STRING", "request.status.original", _NO_SPACE),
    "%>s": ("STRING", "request.status.last", _NO_SPACE),
    "%t": ("TIME.STAMP", "request.receive.time", r"[^\]]*"),
    "%T": ("SECONDS", "response.server.processing.time", _NUMBER),
    "%u": ("STRING", "connection.client.user", _TEXT),
    "%U": ("URI", "request.urlpath", _NO_SPACE),
    "%v": ("STRING", "connection.server.name.canonical", _NO_SPACE),
    "%V": ("STRING", "connection.server.name", _NO_SPACE),
    "%X": ("HTTP.CONNECTSTATUS", "response.connection.status", _NO_SPACE),
    "%I": ("BYTES", "request.bytes", _CLF_NUMBER),
    "%O": ("BYTES", "response.bytes", _CLF_NUMBER),
}
# %{name}x tokens: letter -> (type, field prefix); the name is lowercased
_NAMED = {
    "i": ("HTTP.HEADER", "request.header."),
    "o": ("HTTP.HEADER", "response.header."),
    "e": ("VARIABLE", "server.environment."),
    "n": ("STRING", "server.module_note."),
    "C": ("HTTP.COOKIE", "request.cookies."),
}
# headers the parser types more precisely than HTTP.HEADER
_HEADERS = {
    "request.header.referer": ("HTTP.URI", "request.referer"),
    "request.header.user-agent": ("HTTP.USERAGENT", "request.user-agent"),
    "request.header.cookie": ("HTTP.COOKIES", "request.cookies"),
    "response.header.set-cookie": ("HTTP.SETCOOKIES", "response.cookies"),
}
_TOKEN = re.compile(r"%(?:!?\d{3}(?:,\d{3})*)?(?:\{([^}]*)\})?(>?[a-zA-Z%])")

# the first line of a request, and of one cut short (no protocol), as the parser splits it
_FIRSTLINE = r"^([a-zA-Z\-_]+) (.*) (HTTP/[0-9]+\.[0-9]+)$"
_SHORT_FIRSTLINE = r"^([a-zA-Z\-_]+) (.*)$"
# a URI's path, query and fragment (java.net.URI's grammar, relative or absolute)
_URI = r"^(?:[a-zA-Z][a-zA-Z0-9+.\-]*://[^/?#]*)?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$"


@dataclass(frozen=True)
class _Field:
    kind: str
    name: str
    regex: str

    @property
    def key(self) -> str:
        """Wrangler's column name for the field."""
        return re.sub(r"[^a-zA-Z0-9_]", "_", f"{self.kind}:{self.name}".lower())

    @property
    def kept(self) -> bool:
        # Wrangler's LogLine.setValue drops these paths
        low = f"{self.kind}:{self.name}".lower()
        return not any(w in low for w in ("original", "bytesclf", "cookie"))


def _format_of(text: str) -> str:
    text = text.strip()
    return LOG_FORMATS.get(text.lower(), text)


def log_fields(fmt: str) -> tuple[str, list[_Field]]:
    """The whole-line Java regex of a format and, per capturing group, its field.
    Raises ValueError naming a token the parser does not know."""
    fmt = _format_of(fmt)
    if "$" in re.sub(r"%\{[^}]*\}", "", fmt) and "%" not in fmt:
        raise ValueError("nginx log_format variables ($remote_addr …) are not supported; "
                         "give the Apache LogFormat tokens (%h %l %u …) or a named format")
    parts, pos = ["^"], 0
    fields: list[_Field] = []
    for m in _TOKEN.finditer(fmt):
        parts.append(re.escape(fmt[pos:m.start()]))
        pos = m.end()
        name, letter = m.group(1), m.group(2)
        if letter == "%":
            parts.append("%")
            continue
        token = f"%{{{name}}}{letter}" if name is not None else f"%{letter}"
        if name is not None and letter in _NAMED and f"%{{{name}}}{letter}" not in _SIMPLE:
            kind, prefix = _NAMED[letter]
            field = prefix + name.lower()
            kind, field = _HEADERS.get(field, (kind, field))
            spec = (kind, field, _TEXT)
        elif token in _SIMPLE:
            spec = _SIMPLE[token]
        else:
            raise ValueError(f"unknown log format token {m.group(0)!r}")
        value = f"({spec[2]})"
        parts.append(r"\[" + value + r"\]" if letter == "t" and name is None else value)
        fields.append(_Field(*spec))
    parts.append(re.escape(fmt[pos:]))
    parts.append("$")
    if not fields:
        raise ValueError(f"log format {fmt!r} has no field")
    return "".join(parts), fields


def _value(text: "Column") -> "Column":
    # an Apache log writes '-' for a value it does not have
    return F.when(text.isin("-", ""), F.lit(None)).otherwise(text)


@register_directive("parse-as-log <column:column> <format:text>",
                    checks={"format": parse_check(log_fields)})
def parse_as_log(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Parse an Apache HTTPD access log line. ``format`` is a named format (``common``,
    ``combined``, ``combinedio``, ``referer``, ``agent``) or Apache LogFormat tokens
    (``%h %l %u %t "%r" %>s %b``, ``%{User-Agent}i``…). Each field becomes a text column
    named as Wrangler names it (``ip_connection_client_host``, ``string_request_status_last``,
    ``time_stamp_request_receive_time``…), a ``-`` is null, and the first line of the
    request is also split into method, URI (path, query, fragment) and protocol; the
    source column is kept. A line that does not fit the format gets nulls and
    ``log.parse.error`` = 1 (the column is always there, null on good lines); a null
    value stops the run, as in Wrangler.

    fll differs from Wrangler's parser in what it derives from a field: it does not
    split the time stamp (epoch, year, …), query parameters or user agents, and knows
    Apache tokens only (no nginx variables); cookies are dropped, as Wrangler does.
    Labels: READ column, ADD every new column.
    """
    step.require(df, [a.column])
    regex, fields = log_fields(a.format)
    src = step.col(a.column)
    kind = df.schema[a.column].dataType.typeName()
    if kind == "binary":
        src = src.cast("string")
    elif kind != "string":
        raise step.error(f"column {a.column!r} has type {kind}; it should be of type "
                         f"string or bytes")
    line = fail_when(step, src.isNull(), src,
                     null_value(a.column, "'String' or 'byte array'"))
    ok = line.rlike(regex)
    new: list[tuple[str, "Column"]] = []

    def add(key: str, value: "Column") -> None:
        if key not in dict(new):
            new.append((key, F.when(ok, _value(value))))
    for i, f in enumerate(fields, start=1):
        if not f.kept:
            continue
        text = F.regexp_extract(line, regex, i)
        add(f.key, text)
        if f.kind == "HTTP.FIRSTLINE":
            full, short = text.rlike(_FIRSTLINE), text.rlike(_SHORT_FIRSTLINE)
            method = F.when(full, F.regexp_extract(text, _FIRSTLINE, 1)).when(
                short, F.regexp_extract(text, _SHORT_FIRSTLINE, 1))
            uri = F.when(full, F.regexp_extract(text, _FIRSTLINE, 2)).when(
                short, F.regexp_extract(text, _SHORT_FIRSTLINE, 2))
            base = f.name
            add(_Field("HTTP.METHOD", f"{base}.method", "").key, method)
            add(_Field("HTTP.URI", f"{base}.uri", "").key, uri)
            add(_Field("HTTP.PROTOCOL_VERSION", f"{base}.protocol", "").key,
                F.when(full, F.regexp_extract(text, _FIRSTLINE, 3)))
            for group, (kind_, part) in enumerate(
                    (("HTTP.PATH", "path"), ("HTTP.QUERYSTRING", "query"), ("HTTP.REF", "ref")),
                    start=1):
                add(_Field(kind_, f"{base}.uri.{part}", "").key,
                    F.when(uri.rlike(_URI), F.regexp_extract(uri, _URI, group)))
    taken = [k for k, _ in new if k in df.columns and k != a.column]
    if taken:
        raise step.error(f"parsed column(s) {taken} already exist")
    new.append((PARSE_ERROR, F.when(~ok, F.lit(1))))
    out = put_all(df, new)
    return Outcome(out, L.read(a.column) + L.add(*[k for k, _ in new]))
