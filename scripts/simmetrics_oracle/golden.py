"""Write tests/fixtures/directives/simmetrics_golden.jsonl: SimMetrics' own results.

Each line is ``[kind, method, a, b, bits]``: what SimMetrics 4.1.1 returns for
``text-metric``/``text-distance`` ``method`` on the texts ``a`` and ``b``, as the
bits of its 32-bit float (Java's Float.floatToIntBits). The pairs are Wrangler's
test sentences, classic edit-distance pairs and seeded random texts over a small
alphabet with spaces, tabs and repeated tokens, where the metrics differ most.

Needs a JDK and SimMetrics 4.1.1 compiled with Guava (both jars on the class path):

    javac -cp simmetrics-core-4.1.1.jar:guava.jar -d out scripts/simmetrics_oracle/Oracle.java
    python scripts/simmetrics_oracle/golden.py out:simmetrics-core-4.1.1.jar:guava.jar
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from fll.directives.textmetrics import METHODS  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "tests/fixtures/directives/simmetrics_golden.jsonl"
KINDS = {"metric": "text-metric", "distance": "text-distance"}


def pairs() -> list[tuple[str, str]]:
    rnd = random.Random(7)
    alphabet = "abcab xy\tAé  "
    out = [("This is an example for distance measure.",
            "This test is made of works that are similar. This is an example for distance "
            "measure."), ("kitten", "sitting"), ("martha", "marhta"), ("dixon", "dicksonx"),
           ("ab", "ba"), ("ca", "abc"), (" ", "a"), ("\t", " "), ("a a a b", "a b b"),
           ("jellyfish", "smellyfish")]
    while len(out) < 60:
        out.append(("".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 14))),
                    "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 14)))))
    return out


def main(classpath: str) -> None:
    rows = [(kind, m, a, b) for kind, directive in KINDS.items()
            for m in sorted(METHODS[directive]) for a, b in pairs()]
    text = "".join("\u0001".join(r) + "\n" for r in rows)
    done = subprocess.run(["java", "-cp", classpath, "Oracle"], input=text, text=True,
                          encoding="utf-8", capture_output=True, check=True)
    bits = [int(line.split(" ", 1)[0]) for line in done.stdout.splitlines()]
    assert len(bits) == len(rows), done.stderr
    OUT.write_text("".join(json.dumps([*r, b], ensure_ascii=False) + "\n"
                           for r, b in zip(rows, bits, strict=True)), encoding="utf-8")
    print(f"{len(rows)} results written to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out")
