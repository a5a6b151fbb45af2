"""`fll serve`: run the REST server with uvicorn.

Binds to loopback by default. Binding anywhere else without a write token is
refused unless `--insecure` is given: an open `POST /api/v1/lineage` on a
network address lets anyone write lineage. This command must never print the
token or the store's credentials.
"""
from __future__ import annotations

import ipaddress
import socket

import click

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
              help="Lineage store URL (default: FLL_STORE or sqlite:///fll-data/fll.db).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port to bind.")
@click.option("--token", envvar="FLL_TOKEN", default=None,
              help="Bearer token required by POST /api/v1/lineage (env FLL_TOKEN).")
@click.option("--insecure", is_flag=True, default=False,
              help="Allow a non-loopback bind without a token.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve(store_url: str | None, host: str, port: int, token: str | None, insecure: bool,
          log_level: str) -> None:
    """Serve the REST API (CDAP v3 field lineage, column lineage, OpenLineage ingest)."""
    check_bind(host, token, insecure)
    import uvicorn

    from ..store import default_url, open_store, redact
    from .app import create_app

    url = store_url or default_url()
    store = open_store(url)
    try:
        click.echo(f"fll: serving {redact(url)} on http://{host}:{port} "
                   f"(writes {'need a token' if token else 'are open'})", err=True)
        uvicorn.run(create_app(store, token=token), host=host, port=port, log_level=log_level)
    finally:
        store.close()
