"""`fll serve`: run the REST server with uvicorn.

Binds to loopback by default. Binding anywhere else without a write token is
refused unless `--insecure` is given: an open `POST /api/v1/lineage` on a
network address lets anyone write lineage. This command must never print the
token or the store's credentials, nor create a store's missing directory
unless told to (`--create`).

The limits (`--max-ingests`, `--max-fields`, `--header-timeout`,
`--body-timeout`, `--body-memory`) and `--public-reads` can also come from the ``serve:``
section of the config file (``$FLL_CONFIG`` or ``./conf/fll.yaml``); an
option given on the command line wins. ``ingest_wait`` (seconds an ingest
waits for a slot before 503) is read only from there.
"""
from __future__ import annotations

import errno
import ipaddress
import os
import socket

from typing import Any

import click

from ..cli.common import STORE_HELP
from ..errors import BadRequest
from ..store.cache import DEFAULT_CACHE_MB
from . import guard

# decoded operation sets each server process keeps at most: more than the sets a
# busy day's questions meet, so whole-history questions over datasets with many
# distinct sets stay in memory; --cache-mb bounds their bytes
DEFAULT_CACHE_SETS = 32_768
# seconds between WAL checkpoints of a SQLite store (fll.server.checkpoint)
CHECKPOINT_EVERY = 0.5

# config key -> (type, default) of the settings `serve` also reads from the config file
_SETTINGS: dict[str, tuple[type, Any]] = {
    "public_reads": (bool, False),
    "max_ingests": (int, None),  # guard.max_ingests_for(store)
    "ingest_wait": (float, guard.DEFAULT_INGEST_WAIT),  # config file only
    "max_fields": (int, guard.DEFAULT_MAX_FIELDS),
    "header_timeout": (float, guard.DEFAULT_HEADER_TIMEOUT),
    "body_timeout": (float, guard.DEFAULT_BODY_TIMEOUT),
    "body_memory": (int, guard.DEFAULT_BODY_MEMORY // 2**20),  # MiB
    "cache_sets": (int, DEFAULT_CACHE_SETS),
    "cache_mb": (int, DEFAULT_CACHE_MB),
}


def serve_settings(given: dict[str, Any]) -> dict[str, Any]:
    """The options given, else the config file's ``serve:`` values, else the defaults."""
    from ..cli.common import load_config

    section = load_config().get("serve") or {}
    if not isinstance(section, dict):
        raise BadRequest("config file: 'serve' must be a mapping of settings", "config")
    unknown = sorted(set(section) - set(_SETTINGS))
    if unknown:
        raise BadRequest(f"config file: unknown setting(s) serve.{', serve.'.join(unknown)} "
                         f"(known: {', '.join(sorted(_SETTINGS))})", "config")
    out: dict[str, Any] = {}
    for key, (kind, default) in _SETTINGS.items():
        value = given.get(key)
        if value is None:
            value = section.get(key, default)
            if value is None:  # decided by the store (`max_ingests`)
                out[key] = None
                continue
            ok = isinstance(value, bool) if kind is bool else (
                isinstance(value, (int, float)) and not isinstance(value, bool)
                and (kind is float or isinstance(value, int)) and value > 0)
            if not ok:
                raise BadRequest(f"config file: serve.{key} must be "
                                 f"{'true or false' if kind is bool else 'a positive number'}"
                                 f", got {value!r}", "config")
        out[key] = kind(value)
    return out

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name) only listens on this machine."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:  # a host name: loopback only if every address it resolves to is
        infos = socket.getaddrinfo(name, None)
    except OSError:
        return False
    # str(): typeshed allows an int here for raw-socket families getaddrinfo never returns
    return bool(infos) and all(ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback
                               for i in infos)


def check_bind(host: str, token: str | None, insecure: bool) -> None:
    """Refuse a network bind without a token unless told to (raises click.UsageError)."""
    if not token and not insecure and not is_loopback(host):
        raise click.UsageError(
            f"refusing to listen on {host} without a write token: anyone who can reach it could "
            f"write lineage. Give --token (or FLL_TOKEN), bind to 127.0.0.1, or pass --insecure.")


@click.command("serve")
@click.option("--store", "store_url", metavar="URL", default=None,
              help=STORE_HELP + " A missing SQLite file is created in an existing "
                                "directory, with a warning.")
@click.option("--create", is_flag=True, default=False,
              help="Also create a missing SQLite store's directory (else refused: a typo).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port to bind (0: one the OS picks, printed at start).")
@click.option("--token", envvar="FLL_TOKEN", default=None,
              help="Bearer token every data route needs, reads and writes (env FLL_TOKEN).")
@click.option("--public-reads", is_flag=True, default=None,
              help="With --token: let GET requests through without it (writes still need it).")
@click.option("--max-ingests", type=click.IntRange(1), default=None,
              help=f"Ingests at once; more wait up to {guard.DEFAULT_INGEST_WAIT:g} s, then 503 "
                   f"[default: {guard.DEFAULT_MAX_INGESTS}; {guard.REMOTE_MAX_INGESTS} on "
                   f"Bigtable and HBase, whose ingests wait on round trips].")
@click.option("--max-fields", type=click.IntRange(1), default=None,
              help=f"Column-lineage fields (outputs + inputFields) per event, 413 above "
                   f"[default: {guard.DEFAULT_MAX_FIELDS}].")
@click.option("--header-timeout", type=click.FloatRange(0, min_open=True), default=None,
              help=f"Seconds a connection has to send its request head, then it is closed "
                   f"[default: {guard.DEFAULT_HEADER_TIMEOUT:g}].")
@click.option("--body-timeout", type=click.FloatRange(0, min_open=True), default=None,
              help=f"Seconds a request body has to arrive, then 408 "
                   f"[default: {guard.DEFAULT_BODY_TIMEOUT:g}].")
@click.option("--body-memory", type=click.IntRange(1), default=None, metavar="MIB",
              help=f"MiB of ingest bodies each server process holds at once, arriving or "
                   f"waiting for a slot (beyond each body's first 64 KiB); more is 503 "
                   f"[default: {guard.DEFAULT_BODY_MEMORY // 2**20}].")
@click.option("--cache-sets", type=click.IntRange(1), default=None,
              help=f"Decoded operation sets each server process keeps in memory at most "
                   f"[default: {DEFAULT_CACHE_SETS}].")
@click.option("--cache-mb", type=click.IntRange(16), default=None, metavar="MIB",
              help=f"MiB every cache of each server process holds at most together: decoded "
                   f"sets with their answers, shapes, merged answers "
                   f"[default: {DEFAULT_CACHE_MB}].")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes sharing the listening socket: reads scale across "
                   "cores; writes stay serialized by the store, --max-ingests holds for all.")
@click.option("--build-processes", type=click.IntRange(0, 64), default=None, metavar="N",
              help="Processes of their own that build the operation sets of lineage not seen "
                   "before, beside each server process's GIL; 0: built in the server "
                   "[default: 1 where there are more cores than --workers, else 0].")
@click.option("--log-stalls", type=click.FloatRange(0, min_open=True), default=None,
              metavar="MS", help="Log every pause of a server process of at least MS ms "
                                 "(commits, WAL checkpoints, garbage collections, the event "
                                 "loop held), at WARNING, with its time.")
@click.option("--gc-freeze/--no-gc-freeze", default=True, show_default=True,
              help="Every 0.1 s, collect what is new and freeze what survives, so Python's "
                   "garbage collector never walks the caches (a whole-process pause of up to "
                   "1 s at 32,768 cached sets).")
@click.option("--checkpoint-every", type=click.FloatRange(0), default=CHECKPOINT_EVERY,
              show_default=True, metavar="SECONDS",
              help="A SQLite store's WAL is checkpointed this often from a thread of each "
                   "server process, never inside a commit; 0: by SQLite inside the commit "
                   "that crosses 1,000 pages.")
@click.option("--insecure", is_flag=True, default=False,
              help="Allow a non-loopback bind without a token.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve(store_url: str | None, create: bool, host: str, port: int, token: str | None,
          insecure: bool, log_level: str, workers: int, log_stalls: float | None, gc_freeze: bool,
          checkpoint_every: float, build_processes: int | None, **limits: Any) -> None:
    """Serve the REST API (CDAP v3 field lineage, column lineage, OpenLineage ingest)."""
    check_bind(host, token, insecure)
    settings = serve_settings(limits)
    settings["build_processes"] = build_processes if build_processes is not None else \
        int((os.cpu_count() or 1) > workers)
    settings["log_stalls"] = log_stalls
    settings["gc_freeze"] = gc_freeze
    settings["checkpoint_every"] = checkpoint_every or None

    from ..cli.common import EXIT_STORE, CliError, configured_store_url, new_store
    from ..errors import StoreError
    from ..store import open_store, redact

    url = configured_store_url(store_url)
    # A missing SQLite file is created (a first `fll serve` takes ingests), but
    # never silently, and never with its directory unless --create: a typo in
    # --store would otherwise build a new tree and serve an empty store.
    try:
        missing = new_store(url, create)
    except StoreError as e:
        raise CliError(f"fll serve: error: {e}", EXIT_STORE) from None
    if missing:
        click.echo(f"fll serve: store {redact(url)} does not exist: serving a NEW, EMPTY store "
                   f"(check --store for a typo)", err=True)
    # bind before anything is printed: a busy port is one line and exit 3, and
    # --port 0 can report the port the OS picked
    sock = _listen(host, port, CliError, EXIT_STORE)
    real_port = sock.getsockname()[1]
    try:
        # opened here even with workers: a store that cannot open is one line and
        # exit 3 before any worker starts
        store = open_store(url, cache_size=settings["cache_sets"],
                           cache_mb=settings["cache_mb"])
        if settings["max_ingests"] is None:
            settings["max_ingests"] = guard.max_ingests_for(store)
        click.echo(f"fll: serving {redact(url)} on http://{_url_host(host)}:{real_port} "
                   f"({_access(token, settings['public_reads'])}"
                   f"{f', {workers} worker processes' if workers > 1 else ''})", err=True)
        guard.raise_open_file_limit()
        if workers == 1:
            try:
                _run_worker(store, sock, token, settings, log_level)
            finally:
                store.close()
        else:
            # no connection or thread of the parent may cross a fork
            store.close()
            _supervise(url, sock, token, settings, log_level, workers)
    finally:
        sock.close()


def _run_worker(store: Any, sock: socket.socket, token: str | None, settings: dict[str, Any],
                log_level: str, ingest_slots: Any = None, write_lock: Any = None) -> None:
    import uvicorn

    from .app import create_app

    app = create_app(store, token=token, public_reads=settings["public_reads"],
                     max_ingests=settings["max_ingests"], ingest_wait=settings["ingest_wait"],
                     max_fields=settings["max_fields"], body_timeout=settings["body_timeout"],
                     ingest_slots=ingest_slots, write_lock=write_lock,
                     body_memory=settings["body_memory"] * 2**20,
                     log_stalls=settings.get("log_stalls"),
                     gc_freeze=settings.get("gc_freeze", True),
                     checkpoint_every=settings.get("checkpoint_every", CHECKPOINT_EVERY),
                     build_processes=settings.get("build_processes", 0))
    config = uvicorn.Config(app, log_level=log_level,
                            http=guard.timed_http(settings["header_timeout"],
                                                  settings["body_timeout"]))
    uvicorn.Server(config).run(sockets=[sock])


# a worker that dies sooner than this after its start is not restarted: it would
# only die again (a broken store, a bad setting), so the server stops instead
_CRASH_LOOP_S = 5.0


def _supervise(url: str, sock: socket.socket, token: str | None, settings: dict[str, Any],
               log_level: str, workers: int) -> None:
    """Fork ``workers`` processes that accept on the one listening socket (the
    kernel spreads connections between them), restart one that dies, and on
    SIGTERM/SIGINT stop them all by pid and wait for them.

    What is shared between processes is shared through the store (run claims,
    merges, SQLite's ``BEGIN IMMEDIATE``) or this semaphore (the ingest slots);
    per-process caches only hold immutable rows."""
    import multiprocessing
    import os
    import signal
    import time

    from ..cli.common import EXIT_STORE, CliError

    fork = multiprocessing.get_context("fork")
    slots = fork.BoundedSemaphore(settings["max_ingests"])
    # ingests write on each worker's event loop; workers take turns on this
    # lock so none waits inside SQLite for another (fll.server.ingest.GroupCommit)
    write_lock = fork.Lock()
    parent = os.getpid()
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        # waitpid below resumes after a handled signal (PEP 475): the workers
        # exiting is what wakes it
        for pid in started:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def spawn() -> int:
        # no signal between fork and the child's own handlers: the parent's handler
        # in a child would signal its siblings
        signals = {signal.SIGTERM, signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        pid = os.fork()
        if pid == 0:  # the worker: serve until told to stop, never return to click
            code = 0
            try:
                # uvicorn installs its own handlers and, once stopped, re-raises the
                # signal under the handler it found: ignored, the worker closes its
                # store and exits 0 instead of dying by the signal
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
                _die_with_parent(parent)
                from ..store import open_store
                store = open_store(url, cache_size=settings["cache_sets"],
                                   cache_mb=settings["cache_mb"])
                try:
                    _run_worker(store, sock, token, settings, log_level, slots, write_lock)
                finally:
                    store.close()
            except BaseException as e:  # noqa: BLE001 - reported, then the worker exits
                code = EXIT_STORE
                click.echo(f"fll serve: worker {os.getpid()} stopped: {e}", err=True)
            finally:
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
        return pid

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    started: dict[int, float] = {}
    failed = False
    try:
        for _ in range(workers):
            started[spawn()] = time.monotonic()
        while not stopping and started:
            try:
                pid, _status = os.waitpid(-1, 0)
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
            except ChildProcessError:
                break
            began = started.pop(pid, None)
            if began is None or stopping:
                continue
            if time.monotonic() - began < _CRASH_LOOP_S:
                failed = True
                break
            click.echo(f"fll serve: worker {pid} exited; starting another", err=True)
            started[spawn()] = time.monotonic()
    finally:
        for pid in started:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        for pid in list(started):
            while time.monotonic() < deadline:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        for s, handler in old.items():
            signal.signal(s, handler)
    if failed:
        raise CliError("fll serve: error: a worker process stopped right after it started "
                       "(see above); stopping the server", EXIT_STORE)


def _die_with_parent(parent: int) -> None:
    """A worker whose supervisor is killed (SIGKILL, OOM) must not serve on as an
    orphan nobody stops: Linux kills it with its parent (PR_SET_PDEATHSIG). A
    store write is one transaction, so a killed worker leaves nothing half-written."""
    import ctypes
    import os
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)


def _access(token: str | None, public_reads: bool) -> str:
    if not token:
        return "reads and writes are open"
    return "writes need the token, reads are open" if public_reads else "every data route needs the token"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _listen(host: str, port: int, error: type, exit_code: int) -> socket.socket:
    """A listening socket on (host, port), or ``error`` (one line, ``exit_code``)."""
    try:
        family = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM,
                                    flags=socket.AI_PASSIVE)[0][0]
        return socket.create_server((host.strip("[]"), port), family=family, backlog=2048)
    except OSError as e:
        why = "the port is already in use" if e.errno == errno.EADDRINUSE \
            else (e.strerror or str(e))
        raise error(f"fll serve: error: cannot listen on {host}:{port}: {why}",
                    exit_code) from None
