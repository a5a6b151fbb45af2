"""Exit codes, one-line errors, the store URL search order and the lazy commands."""
from __future__ import annotations

import sys
import types

import click
import pytest
from click.testing import CliRunner

import fll.cli.root as root
from fll.cli import main
from fll.cli.common import load_config

# (arguments after --store, exit code, text the one error line must contain)
ERROR_CASES = [
    (["get", "d|missing"], 1, "not found"),
    (["runs", "ns:nope"], 1, "dataset ns:nope not found"),
    (["fields", "ns:nope"], 1, "dataset ns:nope not found"),
    (["lineage", "ns:C:nope"], 1, "field 'nope' not found"),
    (["lineage", "ns:nope:id"], 1, "dataset ns:nope not found"),
    (["scan", "--prefix", "X"], 2, "--prefix 'X' starts with no row kind"),
    (["scan", "--prefix", "bx"], 2, "starts with no row kind"),
    (["scan", "--start", "tomorrowish"], 2, "is not a time"),
    (["scan", "--start", "now", "--end", "now-1d"], 2, "start must not be after end"),
    (["scan", "--dataset", "nocolon"], 2, "NAMESPACE:DATASET"),
    (["scan", "--prefix", "d", "--dataset", "ns:C"], 2, "--dataset selects index rows"),
    (["scan", "--limit", "0"], 2, "--limit"),
    (["get", "d|\\q"], 2, "bad escape"),
    (["get", "zz", "--hex"], 2, "not hexadecimal"),
    (["lineage", "ns:C"], 2, "NAMESPACE:DATASET:FIELD"),
    (["lineage", "ns:C:id", "--format", "svg"], 2, "Invalid value for '--format'"),
    (["runs"], 2, "name a dataset"),
    (["runs", "ns:C", "--namespace", "ns", "--dataset", "C"], 2, "not both"),
    (["runs", "--namespace", "ns"], 2, "--namespace and --dataset go together"),
    (["lineage", "--namespace", "ns", "--dataset", "C"], 2, "--field is required"),
    (["nosuchcommand"], 2, "No such command"),
    (["admin", "purge", "--before", "x"], 2, "--before"),
    (["record", "/no/such/file.json"], 2, "cannot read /no/such/file.json"),
]


@pytest.mark.parametrize("args, code, text", ERROR_CASES, ids=[" ".join(c[0]) for c in ERROR_CASES])
def test_errors_exit_with_their_code_and_one_line_on_stderr(run_cli, lineage_store, args, code,
                                                            text):
    result = run_cli(*args, store=lineage_store)
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("fll")
    assert result.stderr.count("\n") == 1, result.stderr
    assert text in result.stderr


@pytest.mark.parametrize("url, text", [
    ("sqlite:///{tmp}/absent.db", "does not exist"),
    ("nosuch://host/table", "unknown store URL scheme 'nosuch'"),
    ("not-a-url", "has no scheme"),
    ("sqlite:///{tmp}/garbage.db", "file is not a database"),
])
def test_store_errors_exit_3_naming_the_store(run_cli, tmp_path, url, text):
    (tmp_path / "garbage.db").write_bytes(b"this is not sqlite" * 100)
    result = run_cli("stats", store=url.format(tmp=tmp_path))
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("fll stats: error: ") and result.stderr.count("\n") == 1
    assert text in result.stderr


def test_a_bug_is_one_line_exit_3_and_a_traceback_only_with_verbose(lineage_store, monkeypatch):
    def broken(*_a, **_k):
        raise RuntimeError("boom")
    monkeypatch.setattr("fll.store.admin.stats", broken)
    runner = CliRunner()
    quiet = runner.invoke(main, ["--store", lineage_store, "stats"])
    assert quiet.exit_code == 3
    assert quiet.stderr == "fll stats: internal error: RuntimeError: boom (rerun with --verbose " \
                           "for the traceback)\n"
    loud = runner.invoke(main, ["--store", lineage_store, "--verbose", "stats"])
    assert loud.exit_code == 3 and "Traceback" in loud.stderr and "RuntimeError: boom" in loud.stderr


def test_success_exits_0(run_cli, lineage_store):
    assert run_cli("stats", store=lineage_store).exit_code == 0
    assert run_cli("--version").stdout.startswith("fll, version")


# -- where the store URL comes from ------------------------------------------------

def test_store_option_beats_env_which_beats_the_config_file(run_cli, tmp_path, monkeypatch,
                                                            lineage_store):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "fll.yaml").write_text(f"store: {lineage_store}\n")
    absent = f"sqlite:///{tmp_path}/absent.db"
    from_config = run_cli("stats", env={"FLL_STORE": None, "FLL_CONFIG": None})
    assert from_config.exit_code == 0 and lineage_store in from_config.stdout
    from_env = run_cli("stats", env={"FLL_STORE": absent, "FLL_CONFIG": None})
    assert from_env.exit_code == 3 and "absent.db" in from_env.stderr
    from_option = run_cli("--store", lineage_store, "stats", env={"FLL_STORE": absent})
    assert from_option.exit_code == 0


def test_fll_config_names_another_config_file(run_cli, tmp_path, lineage_store):
    cfg = tmp_path / "elsewhere.yaml"
    cfg.write_text(f"# comment\nstore: {lineage_store}\n")
    result = run_cli("stats", env={"FLL_STORE": None, "FLL_CONFIG": str(cfg)})
    assert result.exit_code == 0 and lineage_store in result.stdout


@pytest.mark.parametrize("content, text", [
    (None, "does not exist"),
    ("store: [1, 2", "cannot read it"),
    ("- a list", "expected a mapping"),
    ("store: 42", "'store' must be a store URL string"),
])
def test_a_bad_config_file_is_a_usage_error_naming_the_file(run_cli, tmp_path, content, text):
    cfg = tmp_path / "fll.yaml"
    if content is not None:
        cfg.write_text(content)
    result = run_cli("stats", env={"FLL_STORE": None, "FLL_CONFIG": str(cfg)})
    assert result.exit_code == 2 and str(cfg) in result.stderr and text in result.stderr
    assert result.stderr.count("\n") == 1


def test_the_shipped_config_file_names_the_default_store():
    from pathlib import Path

    from fll.store import DEFAULT_URL
    shipped = Path(root.__file__).parents[2] / "conf" / "fll.yaml"
    assert load_config(shipped)["store"] == DEFAULT_URL


# -- lazily loaded commands ----------------------------------------------------------

def test_help_lists_serve_and_run_without_importing_them(run_cli, monkeypatch):
    for name in ("fll.server.cli", "fll.pipeline.cli"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    result = run_cli("--help")
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:")[1]
    for name in ("admin", "scan", "get", "runs", "fields", "stats", "lineage", "record",
                 "export", "serve", "run"):
        assert f"  {name} " in commands
    assert "fll.server.cli" not in sys.modules and "fll.pipeline.cli" not in sys.modules


@pytest.fixture
def fake_lazy(monkeypatch):
    """A lazily loaded command `fake` that prints the store it was handed."""
    module = types.ModuleType("fll._fake_cli")

    @click.command("fake")
    @click.option("--store", "store_url", default=None)
    def fake(store_url):
        click.echo(f"store={store_url}")
    module.fake = fake
    monkeypatch.setitem(sys.modules, "fll._fake_cli", module)
    monkeypatch.setitem(root._LAZY, "fake", ("fll._fake_cli", "fake", "A fake command."))
    monkeypatch.setitem(root._LAZY, "broken", ("fll._no_such_module", "x", "Broken command."))
    real = root._module_present
    monkeypatch.setattr(root, "_module_present",
                        lambda m: m in ("fll._fake_cli", "fll._no_such_module") or real(m))


def test_lazy_commands_get_the_global_store_unless_given_their_own(run_cli, fake_lazy):
    assert run_cli("--store", "sqlite:///x.db", "fake").stdout == "store=sqlite:///x.db\n"
    assert run_cli("--store", "sqlite:///x.db", "fake", "--store", "sqlite:///y.db").stdout \
        == "store=sqlite:///y.db\n"
    assert run_cli("fake", env={"FLL_STORE": "sqlite:///z.db"}).stdout == "store=sqlite:///z.db\n"


def test_a_lazy_command_that_cannot_load_fails_alone(run_cli, fake_lazy, lineage_store):
    result = run_cli("broken")
    assert result.exit_code == 2 and "'fll broken' is unavailable" in result.stderr
    assert "Broken command." in run_cli("--help").stdout
    assert run_cli("stats", store=lineage_store).exit_code == 0


def test_serve_and_run_load_when_called(run_cli):
    for name in ("serve", "run"):
        result = run_cli(name, "--help")
        assert result.exit_code == 0, result.output
        assert "--store" in result.stdout
