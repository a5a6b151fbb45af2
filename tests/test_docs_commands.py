"""Every command the docs show can be typed as shown.

Each `fll …` command in a shell code block of README.md and docs/*.md is parsed
by the real command line (`fll.cli.main`), down its chain of groups, without
running it: an unknown command, an unknown option or a bad option value fails.
A synopsis (`fll serve [--port N] …`) and a `fll …` code span in prose are
checked by name: the command path must exist and every `--option` it shows
must be one of that command's (or the root's). Each `scripts/…` command names a
file that exists, and a Python script's arguments are parsed by the script's
own parser (click or argparse), again without running it.
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import runpy
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from fll.cli import main as fll_main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
SHELL_LANGS = {"", "bash", "sh", "shell", "console", "text"}
SEPARATORS = {"|", "||", "&", "&&", ";", "(", ")", "$", ">", ">>", "<", "2>", "<<"}
ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PLACEHOLDER = re.compile(r"\b[A-Z]{3,}\b")  # PATH, DIR, URL: a value to fill in
PYTHONS = {"python", "python3", ".venv/bin/python", "/work/main/.venv/bin/python"}


@dataclass(frozen=True)
class Shown:
    """A command as a page shows it."""
    page: str
    line: int
    argv: tuple[str, ...]   # from the program on
    synopsis: bool          # shown with [optional] parts or alternatives: check names only

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {' '.join(self.argv)}"


# -- finding the commands ---------------------------------------------------------------

def _logical_lines(block: str, first_line: int) -> list[tuple[int, str]]:
    """Lines of a shell block, `\\`-continued and indented `[…]` lines joined; only the
    `$ ` lines where the block shows a session (commands and their output)."""
    raw = block.split("\n")
    session = any(line.startswith("$ ") for line in raw)
    out: list[tuple[int, str]] = []
    pending = ""
    start = first_line
    for i, line in enumerate(raw):
        n = first_line + i
        if session:
            if line.startswith("$ "):
                out.append((n, line[2:]))
            continue
        if pending:
            pending += " " + line.strip()
        elif out and re.match(r"\s+\[", line):  # a synopsis going on over the next line
            n0, prev = out.pop()
            out.append((n0, prev + " " + line.strip()))
            continue
        else:
            pending, start = line, n
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        out.append((start, pending))
        pending = ""
    return out


def _segments(line: str) -> list[list[str]]:
    """The simple commands of a shell line: split at pipes, `;`, `&&`, `$(`…`)`, redirections."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: not a shell line
        return []
    segments: list[list[str]] = [[]]
    for tok in tokens:
        if tok in SEPARATORS or set(tok) <= set("|&;()<>$"):
            segments.append([])
        else:
            segments[-1].append(tok)
    return [s for s in segments if s]


def _program(argv: list[str]) -> list[str]:
    """The command without leading `VAR=value` assignments."""
    i = 0
    while i < len(argv) and ENV.match(argv[i]):
        i += 1
    return argv[i:]


def _is_synopsis(line: str) -> bool:
    return bool(re.search(r"\[-|\[[A-Z]|…|\\\||\b[a-z-]+\|[a-z-]+\b", line))


def commands_in(page: Path) -> list[Shown]:
    """Every command a page shows in a shell code block, or in a `fll …` or
    `scripts/…` code span."""
    text = page.read_text(encoding="utf-8")
    name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name
    found: list[Shown] = []
    for m in FENCE.finditer(text):
        lang = m.group(1).strip().lower()
        if lang not in SHELL_LANGS:
            continue
        first = text.count("\n", 0, m.start(2)) + 1
        for n, line in _logical_lines(m.group(2), first):
            synopsis = _is_synopsis(line)
            if synopsis:  # `[--a | --b]` and `x|y` are alternatives, not pipes
                line = re.sub(r"\\\||[|\[\]]", " ", line)
            for seg in _segments(line):
                argv = _program(seg)
                if argv:
                    found.append(Shown(name, n, tuple(argv), synopsis))
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for m in CODE_SPAN.finditer(prose):
        span = m.group(1).strip()
        if re.match(r"(\.venv/bin/)?fll ", span):
            words = span.replace("\\|", "|").replace("|", " ").replace("[", " ").replace("]", " ")
            try:
                argv = shlex.split(words)
            except ValueError:
                argv = words.split()
            found.append(Shown(name, prose.count("\n", 0, m.start()) + 1, tuple(argv), True))
        elif re.match(r"(\S*python3? )?scripts/\S+\.(py|sh)\b", span):
            try:
                argv = shlex.split(span)
            except ValueError:
                continue
            found.append(Shown(name, prose.count("\n", 0, m.start()) + 1, tuple(argv),
                               _is_synopsis(span)))
    return found


# -- checking an `fll` command --------------------------------------------------------

def _rest(ctx: click.Context) -> list[str]:
    protected = getattr(ctx, "_protected_args", None)
    if protected is None:
        protected = ctx.protected_args
    return [*protected, *ctx.args]


def parse_fll(args: list[str]) -> list[str]:
    """Parse `fll ARGS` as the real command line does, down the groups, running nothing.
    Returns the command path; raises click's error for a bad command, option or value."""
    path = ["fll"]
    try:
        ctx = fll_main.make_context("fll", list(args))
        cmd: click.Command = fll_main
        while isinstance(cmd, click.Group):
            rest = _rest(ctx)
            if not rest:
                break
            name, sub, rest = cmd.resolve_command(ctx, rest)
            assert sub is not None and name is not None
            path.append(name)
            ctx = sub.make_context(name, rest, parent=ctx)
            cmd = sub
    except click.exceptions.Exit:  # --help, --version
        pass
    return path


def _option_names(cmd: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for p in cmd.params:
        if isinstance(p, click.Option):
            names.update(p.opts)
            names.update(p.secondary_opts)
    return names


def check_fll_names(args: list[str]) -> list[str]:
    """A synopsis: the command path exists (each of `a|b` alternatives) and every
    `--option` shown is an option of that command or of the root."""
    problems: list[str] = []
    ctx = click.Context(fll_main, info_name="fll", resilient_parsing=True)
    cmd: click.Command = fll_main
    allowed = _option_names(fll_main)
    words = [a for a in args if a]
    i = 0
    while i < len(words) and words[i].startswith("-"):  # root options first: --store URL
        opt = words[i].split("=", 1)[0]
        if opt not in allowed:
            return [f"'fll' has no option {opt}"]
        flag = next(p for p in fll_main.get_params(ctx) if opt in (*p.opts, *p.secondary_opts))
        i += 1 if "=" in words[i] or getattr(flag, "is_flag", False) else 2
    while isinstance(cmd, click.Group) and i < len(words) and not words[i].startswith("-"):
        sub = cmd.get_command(ctx, words[i])
        if sub is None:
            if words[i].isupper() or not re.fullmatch(r"[a-z][a-z-]*", words[i]):
                break  # a placeholder or argument, not a command name
            problems.append(f"no command '{words[i]}' under '{ctx.command_path}'")
            return problems
        parent = ctx
        ctx = click.Context(sub, info_name=words[i], parent=parent, resilient_parsing=True)
        cmd = sub
        i += 1
        # `tag add|remove`: the other alternatives, split into the next words, are siblings
        while not isinstance(cmd, click.Group) and i < len(words) and \
                isinstance(parent.command, click.Group) and \
                parent.command.get_command(parent, words[i]) is not None:
            sibling = parent.command.get_command(parent, words[i])
            assert sibling is not None
            allowed |= _option_names(sibling)
            i += 1
    allowed |= _option_names(cmd)
    for word in words[i:]:
        opt = word.split("=", 1)[0]
        if opt.startswith("--") and len(opt) > 2 and opt not in allowed:
            problems.append(f"'{ctx.command_path}' has no option {opt}")
    return problems


# -- checking a script ----------------------------------------------------------------

class _Parsed(Exception):
    pass


def _argparse_parses(run: Any, argv: list[str]) -> None:
    """Run a script or module up to its argparse parse of `argv`, and stop there."""
    originals = {name: getattr(argparse.ArgumentParser, name)
                 for name in ("parse_args", "parse_known_args")}
    depth = [0]

    def stopping(name: str) -> Any:
        def parse(self, args=None, namespace=None):  # type: ignore[no-untyped-def]
            depth[0] += 1
            try:
                result = originals[name](self, args, namespace)
            finally:
                depth[0] -= 1
            if depth[0] == 0:  # the outermost parse (not a subparser's) went through
                raise _Parsed
            return result
        return parse

    old_argv = sys.argv
    for name in originals:
        setattr(argparse.ArgumentParser, name, stopping(name))
    sys.argv = list(argv)
    try:
        run()
    except _Parsed:
        return
    except SystemExit as e:
        if e.code not in (0, None) or not {"-h", "--help"} & set(argv):
            raise AssertionError(f"arguments {argv[1:]} refused (exit {e.code})") from None
        return
    finally:
        for name, method in originals.items():
            setattr(argparse.ArgumentParser, name, method)
        sys.argv = old_argv
    raise AssertionError("ran without parsing its arguments with argparse")


def _click_command_of(path: Path) -> click.Command | None:
    spec = importlib.util.spec_from_file_location(f"_docs_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    found = getattr(module, "main", None)
    return found if isinstance(found, click.Command) else None


def check_script(argv: list[str], root: Path = ROOT) -> list[str]:
    """A `scripts/…` command: the file exists; a Python script parses the arguments shown."""
    prog = argv[0]
    if Path(prog).name in PYTHONS or prog in PYTHONS:
        rest = argv[1:]
        if rest[:1] == ["-m"]:
            module = rest[1]
            spec = importlib.util.find_spec(module)
            if spec is None or spec.origin is None:
                return [f"no module {module}"]
            if "argparse" not in Path(spec.origin).read_text(encoding="utf-8"):
                return [f"python -m {module}: no argparse parser to check its arguments with"]
            try:
                _argparse_parses(lambda: runpy.run_module(module, run_name="__main__",
                                                          alter_sys=True), [module, *rest[2:]])
            except AssertionError as e:
                return [f"python -m {module}: {e}"]
            return []
        script, args = rest[0], rest[1:]
    elif prog in ("bash", "sh"):
        script, args = argv[1], argv[2:]
    else:
        script, args = prog, argv[1:]
    path = root / script
    if not path.is_file():
        return [f"no file {script}"]
    if path.suffix != ".py":
        return []
    source = path.read_text(encoding="utf-8")
    if any(PLACEHOLDER.search(a) for a in args):  # `--web PATH/TO/web`: check names only
        return [f"{script}: no option {a}" for a in args
                if a.startswith("--") and not re.search(
                    rf"""["'/]{re.escape(a.split("=")[0])}["'/]""", source)]
    if "argparse" in source:
        try:
            _argparse_parses(lambda: runpy.run_path(str(path), run_name="__main__"),
                             [str(path), *args])
        except AssertionError as e:
            return [f"{script}: {e}"]
        return []
    command = _click_command_of(path)
    if command is not None:
        try:
            command.make_context(path.name, list(args))
        except click.exceptions.Exit:
            pass
        except click.ClickException as e:
            return [f"{script}: {e.format_message()}"]
        return []
    # a script reading sys.argv itself: every option shown must be in its source
    return [f"{script}: no option {a}" for a in args
            if a.startswith("--") and f'"{a.split("=")[0]}"' not in source]


# -- the checks -----------------------------------------------------------------------

def _is_fll(argv: tuple[str, ...]) -> bool:
    return argv[0] == "fll" or argv[0].endswith("/bin/fll")


SCRIPT = re.compile(r"scripts/[\w./-]+\.(py|sh)$")


def _is_script(argv: tuple[str, ...]) -> bool:
    return any(SCRIPT.match(a) for a in argv[:2]) or \
        (argv[0] in PYTHONS and argv[1:2] == ("-m",) and argv[2].startswith("fll"))


def problems_of(shown: Shown, root: Path = ROOT) -> list[str]:
    argv = list(shown.argv)
    if _is_fll(shown.argv):
        if shown.synopsis:
            return check_fll_names(argv[1:])
        try:
            parse_fll(argv[1:])
        except click.ClickException as e:
            return [e.format_message()]
        return []
    if _is_script(shown.argv) and not shown.synopsis:
        return check_script(argv, root)
    if _is_script(shown.argv):  # a synopsis: the file at least
        script = next(a for a in argv[:2] if SCRIPT.match(a))
        return [] if (root / script).is_file() else [f"no file {script}"]
    return []


ALL = [c for page in PAGES for c in commands_in(page)]


def test_the_docs_show_commands_of_every_kind():
    fll_full = [c for c in ALL if _is_fll(c.argv) and not c.synopsis]
    fll_synopsis = [c for c in ALL if _is_fll(c.argv) and c.synopsis]
    scripts = [c for c in ALL if _is_script(c.argv)]
    assert len(fll_full) > 10 and len(fll_synopsis) > 10 and len(scripts) > 10, \
        (len(fll_full), len(fll_synopsis), len(scripts))


@pytest.mark.parametrize("shown", [c for c in ALL if _is_fll(c.argv)], ids=str)
def test_every_fll_command_shown_parses(shown: Shown):
    assert not problems_of(shown), f"{shown}: {problems_of(shown)}"


@pytest.mark.parametrize("shown", sorted({c.argv: c for c in ALL if _is_script(c.argv)}.values(),
                                         key=str), ids=str)
def test_every_script_shown_exists_and_parses_its_arguments(shown: Shown):
    assert not problems_of(shown), f"{shown}: {problems_of(shown)}"


def test_the_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/test.sh" in readme.split("\n## ", 2)[1]  # in the first section
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_a_misspelled_command_or_option_is_found(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text(
        "# Top\n\n```bash\n"
        "fll lineage ns:ds:f --direction both --depth 3\n"      # fine
        "fll lineage ns:ds:f --diretcion both\n"                # misspelled option
        "fll --store sqlite:///x.db lineag ns:ds:f\n"           # misspelled command
        "fll lineage ns:ds:f --depth many\n"                    # a value of the wrong type
        "FLL_STORE=x fll admin purge --before now-90d --dry-run | tee out\n"  # fine
        "fll admin purge --befor now-90d\n"                     # under a group
        ".venv/bin/python scripts/bench/store.py --quick\n"     # fine (click)
        ".venv/bin/python scripts/bench/store.py --quik\n"      # misspelled script option
        ".venv/bin/python scripts/bench/runs.py --ingest\n"     # fine (argparse)
        ".venv/bin/python scripts/bench/runs.py --ingets\n"     # misspelled argparse option
        "bash scripts/nope.sh\n"                                # no such file
        "```\n\n"
        "```\nfll serve [--port N] [--tokne T]\n```\n"          # synopsis, misspelled
        "and `fll tag add\\|remove REF TAG`, `fll tag shwo TAG`, `fll diff X --bfore S..E`,\n"
        "`scripts/marquez_web_ui.py --web PATH/TO/web`, `scripts/marquez_web_ui.py --wbe PATH`,\n"
        "`fll --store URL lineage X [--ops]`, `fll --stroe URL lineage X`\n",
        encoding="utf-8")
    shown = commands_in(page)
    verdicts = [(" ".join(c.argv), bool(problems_of(c))) for c in shown]
    assert verdicts == [
        ("fll lineage ns:ds:f --direction both --depth 3", False),
        ("fll lineage ns:ds:f --diretcion both", True),
        ("fll --store sqlite:///x.db lineag ns:ds:f", True),
        ("fll lineage ns:ds:f --depth many", True),
        ("fll admin purge --before now-90d --dry-run", False),
        ("tee out", False),
        ("fll admin purge --befor now-90d", True),
        (".venv/bin/python scripts/bench/store.py --quick", False),
        (".venv/bin/python scripts/bench/store.py --quik", True),
        (".venv/bin/python scripts/bench/runs.py --ingest", False),
        (".venv/bin/python scripts/bench/runs.py --ingets", True),
        ("bash scripts/nope.sh", True),
        ("fll serve --port N --tokne T", True),
        ("fll tag add remove REF TAG", False),
        ("fll tag shwo TAG", True),
        ("fll diff X --bfore S..E", True),
        ("scripts/marquez_web_ui.py --web PATH/TO/web", False),
        ("scripts/marquez_web_ui.py --wbe PATH", True),
        ("fll --store URL lineage X --ops", False),
        ("fll --stroe URL lineage X", True),
    ], verdicts
    assert "--diretcion" in problems_of(shown[1])[0]


def test_every_benchmark_script_has_its_section_with_its_command():
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", page, flags=re.M)
    for script in sorted((ROOT / "scripts" / "bench").glob("*.py")):
        mine = [s for s in sections if s.startswith(f"`{script.name}`")]
        assert len(mine) == 1, f"docs/benchmarks.md: no one section '## `{script.name}`: …'"
        assert f"scripts/bench/{script.name}" in mine[0].split("```")[1], \
            f"the section of {script.name} shows no command running it"
