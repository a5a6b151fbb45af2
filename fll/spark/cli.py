"""``fll spark-conf``: the spark-submit flags that send every write to fll serve.

The Spark package's command; the ``fll`` group loads it only when called
(`fll.cli.root`).
"""
from __future__ import annotations

import shlex

import click

from .listener import quoted, spark_conf


@click.command("spark-conf")
@click.option("--url", default="http://127.0.0.1:8080", show_default=True,
              help="Where fll serve listens.")
@click.option("--token", envvar="FLL_TOKEN", help="fll serve's token (default $FLL_TOKEN).")
@click.option("--spool", metavar="DIR", help="Where unsent events wait (default: "
              "$TMPDIR/fll-spool of the driver).")
@click.option("--format", "fmt", type=click.Choice(["args", "lines", "defaults"]),
              default="args", show_default=True,
              help="args: one shell line; lines: one flag per line; defaults: "
                   "spark-defaults.conf entries.")
def spark_conf_command(url: str, token: str | None, spool: str | None, fmt: str) -> None:
    """Print the flags that enable fll's listener for the installed Spark.

    \b
    spark-submit $(fll spark-conf --url http://host:8080) job.py
    spark-sql $(fll spark-conf) -e "INSERT INTO t SELECT ..."
    """
    args = spark_conf(url, token, spool)
    if fmt == "args":
        click.echo(quoted(args))
    elif fmt == "lines":
        for flag, value in zip(args[::2], args[1::2], strict=True):
            click.echo(f"{flag} {shlex.quote(value)}")
    else:
        for flag, value in zip(args[::2], args[1::2], strict=True):
            key, _, val = (value.partition("=") if flag == "--conf" else ("spark.jars", "", value))
            click.echo(f"{key} {val}")
