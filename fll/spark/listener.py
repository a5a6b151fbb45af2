"""Build the JVM query execution listener and say how to enable it.

The listener (``jvm/LineageListener.java``) is compiled with ``javac``
against the jars of the installed pyspark, so it always matches the Spark it
runs in. The jar is rebuilt only when the Java source, the Spark version or
the JDK changes (a stamp file next to the jar records all three), and is
written to a temporary name and renamed, so a reader never sees half a jar.

``python -m fll.spark.listener build`` is what ``scripts/setup.sh`` runs;
``fll spark-conf`` prints the flags. This module must never start Spark.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..errors import FllError

__all__ = ["LISTENER_CLASS", "ROUTE", "jar_path", "ensure_jar", "spark_conf", "spark_version"]

#: the class named in ``spark.sql.queryExecutionListeners``
LISTENER_CLASS = "fll.spark.LineageListener"
#: the ``fll serve`` route the listener posts to (kept equal to LineageListener.ROUTE)
ROUTE = "/api/v1/spark/events"
SOURCE = Path(__file__).parent / "jvm" / "LineageListener.java"


def spark_home() -> Path:
    """The installed pyspark's Spark home (its ``jars/`` is the compile class path)."""
    try:
        import pyspark
    except ImportError:
        raise FllError("pyspark is not installed: the listener is built against its jars") \
            from None
    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    if not (home / "jars").is_dir():
        home = Path(pyspark.__file__).parent
    return home


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def build_dir() -> Path:
    """``$FLL_JVM_BUILD``, else ``build/`` next to the source when writable, else a user cache."""
    env = os.environ.get("FLL_JVM_BUILD")
    if env:
        return Path(env)
    local = SOURCE.parent / "build"
    if os.access(SOURCE.parent, os.W_OK):
        return local
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fll" / "jvm"


def jar_path() -> Path:
    return build_dir() / f"fll-spark-listener-{spark_version()}.jar"


def _java_version(javac: str) -> str:
    done = subprocess.run([javac, "-version"], capture_output=True, text=True, check=False)
    return (done.stdout + done.stderr).strip()


def _stamp(javac: str) -> str:
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    return f"source {digest}\nspark {spark_version()}\njavac {_java_version(javac)}\n"


def ensure_jar(force: bool = False) -> Path:
    """The listener jar for the installed Spark, compiled first when missing or stale."""
    jar = jar_path()
    javac = shutil.which("javac")
    stamp_file = jar.with_suffix(".stamp")
    if javac is None:
        if jar.exists():
            return jar  # built earlier; cannot check staleness without a JDK
        raise FllError("javac not found: the fll listener is compiled on set-up; install a "
                       "JDK 17 (apt-get install openjdk-17-jdk-headless)")
    stamp = _stamp(javac)
    if not force and jar.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return jar
    jars = spark_home() / "jars"
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fll-jvm-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        done = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-encoding", "UTF-8",
             "-cp", str(jars / "*"), "-d", str(classes), str(SOURCE)],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise FllError(f"javac failed on {SOURCE.name} against Spark {spark_version()}: "
                           + (done.stderr.strip().splitlines() or ["no output"])[0])
        partial = jar.with_name(jar.name + ".part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n"
                        f"Implementation-Title: fll spark listener\n"
                        f"Spark-Version: {spark_version()}\n\n")
            for f in sorted(classes.rglob("*.class")):
                zf.write(f, f.relative_to(classes).as_posix())
        os.replace(partial, jar)
    stamp_file.write_text(stamp)
    return jar


def spark_conf(url: str = "http://127.0.0.1:8080", token: str | None = None,
               spool: str | None = None, jar: Path | None = None) -> list[str]:
    """The ``spark-submit``/``spark-sql``/``pyspark`` arguments that enable the listener."""
    jar = jar or ensure_jar()
    args = ["--jars", str(jar),
            "--conf", f"spark.sql.queryExecutionListeners={LISTENER_CLASS}",
            "--conf", f"spark.fll.url={url}"]
    if token:
        args += ["--conf", f"spark.fll.token={token}"]
    if spool:
        args += ["--conf", f"spark.fll.spool={spool}"]
    return args


def main(argv: list[str]) -> int:
    if argv[:1] != ["build"]:
        print("usage: python -m fll.spark.listener build [--force]", file=sys.stderr)
        return 2
    try:
        jar = ensure_jar(force="--force" in argv)
    except FllError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"fll listener: {jar}")
    return 0


def quoted(args: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
