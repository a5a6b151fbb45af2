"""Benchmark: text-metric per SimMetrics method, against the same measure hand-written.

Both run in one Spark session over the same generated pairs of short sentences and
are forced with Spark's ``noop`` sink. Two workloads: the methods fll computes with
Spark expressions (levenshtein, jaccard), compared with the same expressions written
by hand (target ratio ≤ 1.1), and the methods that need the Python UDF (jaro, cosine,
simon-white, damerau-levenshtein: the workload that hurts), compared with a
hand-written Python UDF calling the same function and with Spark's built-in
levenshtein, to show what crossing to Python costs. Prints the best time of each over
a few rounds, the ratios and the load average.

    .venv/bin/python scripts/bench/text_metrics.py --rows 200000 --rounds 3
"""
from __future__ import annotations

import argparse
import os
import time

WORDS = ("this is an example for distance measure test made of works that are similar "
         "lorem ipsum dolor sit amet").split()


def source(spark, rows: int):
    from pyspark.sql import functions as F
    i = F.col("id")
    words = F.array(*[F.lit(w) for w in WORDS])

    def sentence(seed: int):
        picks = [F.element_at(words, ((i * (seed + k) + k) % len(WORDS) + 1).cast("int"))
                 for k in range(1, 7)]
        return F.concat_ws(" ", *picks)
    return spark.range(rows).select(sentence(3).alias("s1"), sentence(5).alias("s2"))


def timed(df) -> float:
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def best_pair(a, b, rounds: int) -> tuple[float, float]:
    """Best times of ``a`` and ``b``, run alternately so load swings hit both alike."""
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(timed(a))
        tb.append(timed(b))
    return min(ta), min(tb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.types import FloatType

    from fll.directives import Recipe
    from fll.directives.textmetrics import similarity
    spark = (SparkSession.builder.master("local[2]").appName("fll-bench-text-metrics")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    src = source(spark, opts.rows).cache()
    src.count()
    x, y = F.col("s1"), F.col("s2")
    one = F.lit(1.0).cast("float")

    zero = F.lit(0.0).cast("float")
    empty = x.isNull() | y.isNull() | (x == "") | (y == "")   # Wrangler's 0.0 rule

    def hand_levenshtein(df):
        value = one - (F.levenshtein(x, y) / F.greatest(F.length(x), F.length(y))).cast("float")
        return df.withColumn("m", F.when(empty, zero).otherwise(value))

    def hand_jaccard(df):
        tx = F.array_distinct(F.array_remove(F.split(x, r"\s+"), ""))
        ty = F.array_distinct(F.array_remove(F.split(y, r"\s+"), ""))
        nx, ny = F.size(tx), F.size(ty)
        common = F.size(F.array_intersect(tx, ty))
        value = (F.when((nx == 0) & (ny == 0), one).when((nx == 0) | (ny == 0), zero)
                 .otherwise((common / (nx + ny - common)).cast("float")))
        return df.withColumn("m", F.when(empty, zero).otherwise(value))

    print(f"rows={opts.rows} rounds={opts.rounds} load average (1, 5, 15 min): "
          + " ".join(f"{v:.1f}" for v in os.getloadavg()))
    print("Spark-expression methods (target fll/hand <= 1.1):")
    for method, hand in (("levenshtein", hand_levenshtein), ("jaccard", hand_jaccard)):
        ours = Recipe.parse(f"text-metric {method} s1 s2 m").apply(src)
        t_hand, t_ours = best_pair(hand(src), ours, opts.rounds)
        print(f"  {method:<20} hand {t_hand:6.2f}s  fll {t_ours:6.2f}s  "
              f"ratio {t_ours / t_hand:.2f}")
    t_native = min(timed(hand_levenshtein(src)) for _ in range(opts.rounds))
    print("Python-UDF methods (fll vs a hand-written UDF of the same function; "
          "cost vs Spark's levenshtein):")
    for method in ("jaro", "cosine", "simon-white", "damerau-levenshtein"):
        udf = F.udf(similarity, FloatType(), useArrow=False)
        hand = src.withColumn("m", F.when(empty, zero).otherwise(udf(F.lit(method), x, y)))
        ours = Recipe.parse(f"text-metric {method} s1 s2 m").apply(src)
        t_hand, t_ours = best_pair(hand, ours, opts.rounds)
        print(f"  {method:<20} hand {t_hand:6.2f}s  fll {t_ours:6.2f}s  "
              f"ratio {t_ours / t_hand:.2f}  vs levenshtein x{t_ours / t_native:.1f}")


if __name__ == "__main__":
    main()
