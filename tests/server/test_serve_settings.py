"""`fll serve` limits: the command line wins, then the config file's ``serve:``
section, then the defaults; a bad config value is a one-line usage error."""
from __future__ import annotations

import pytest

from fll.errors import BadRequest
from fll.server import guard
from fll.server.cli import DEFAULT_CACHE_SETS, serve_settings
from fll.store.cache import DEFAULT_CACHE_MB

from ..store.conftest import bigtable_emulator, emulator_binary  # noqa: F401 - fixtures

# max_ingests: None until the store is open (guard.max_ingests_for)
DEFAULTS = {"public_reads": False, "max_ingests": None,
            "ingest_wait": guard.DEFAULT_INGEST_WAIT, "max_fields": guard.DEFAULT_MAX_FIELDS,
            "header_timeout": guard.DEFAULT_HEADER_TIMEOUT,
            "body_timeout": guard.DEFAULT_BODY_TIMEOUT, "cache_sets": DEFAULT_CACHE_SETS,
            "body_memory": guard.DEFAULT_BODY_MEMORY // 2**20, "cache_mb": DEFAULT_CACHE_MB}


@pytest.fixture
def config(tmp_path, monkeypatch):
    path = tmp_path / "fll.yaml"
    monkeypatch.setenv("FLL_CONFIG", str(path))

    def write(text: str) -> None:
        path.write_text(text)
    write("store: sqlite:///x.db\n")
    return write


def test_without_options_or_config_the_defaults_apply(config):
    assert serve_settings({}) == DEFAULTS


def test_the_config_file_sets_limits_and_the_command_line_wins(config):
    config("serve:\n  max_ingests: 3\n  max_fields: 500\n  ingest_wait: 0.5\n"
           "  public_reads: true\n  header_timeout: 4\n")
    got = serve_settings({"max_fields": 900, "max_ingests": None})
    assert got == {**DEFAULTS, "max_ingests": 3, "max_fields": 900, "ingest_wait": 0.5,
                   "public_reads": True, "header_timeout": 4.0}


BAD = {
    "unknown key": ("serve:\n  max_ingest: 3\n", "unknown setting(s) serve.max_ingest"),
    "zero": ("serve:\n  max_ingests: 0\n", "serve.max_ingests must be a positive number, got 0"),
    "a string": ("serve:\n  body_timeout: soon\n", "serve.body_timeout must be a positive"),
    "a float for a count": ("serve:\n  max_fields: 1.5\n", "serve.max_fields must be"),
    "a bool for a count": ("serve:\n  max_fields: true\n", "serve.max_fields must be"),
    "a number for a flag": ("serve:\n  public_reads: 1\n", "serve.public_reads must be true or "
                                                          "false, got 1"),
    "not a mapping": ("serve: 5\n", "'serve' must be a mapping"),
}


@pytest.mark.parametrize("text,message", BAD.values(), ids=BAD.keys())
def test_a_bad_serve_setting_is_refused_naming_it(config, text, message):
    config(text)
    with pytest.raises(BadRequest, match="^config file: ") as err:
        serve_settings({})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_ingests_at_once_default_to_more_where_they_wait_on_round_trips(
        tmp_path, bigtable_emulator):  # noqa: F811 - the fixture imported above
    from fll import open_store

    for url, want in [(f"sqlite:///{tmp_path}/fll.db", 8),
                      (f"bigtable://fll-test/settings/fll?emulator={bigtable_emulator.host}", 16)]:
        store = open_store(url)
        try:
            assert guard.max_ingests_for(store) == want
        finally:
            store.close()
    assert (guard.DEFAULT_MAX_INGESTS, guard.REMOTE_MAX_INGESTS) == (8, 16)
