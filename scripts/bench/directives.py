"""Benchmark: a recipe of 50 distinct directives vs the same transformations hand-written
in PySpark.

Both run side by side in one Spark session over the same generated rows and are
forced with Spark's ``noop`` sink, so only the plan differs. Prints the best time of
each over a few rounds and their ratio (target ≤ 1.1), and first checks that both
give the same rows on a sample (the random uuid and current-time columns aside).
The workload that hurts: whole-value regex filters, the cursor walk of mask-number
(a higher-order function per row), row-level guards that raise_error, URL parsing
and JSON/CSV writers over every column. It also prints the bytecode size of the largest
method Spark generates for each side: past HotSpot's 8,000 bytes a fused stage runs
interpreted, which is what value-carrying error messages once caused (ratio 1.5-1.8).
Never writes to disk or to a lineage store.

    .venv/bin/python scripts/bench/directives.py --rows 1000000 --rounds 3
"""
from __future__ import annotations

import argparse
import os
import re
import time

RECIPE = r"""
cut-character card card4 1-4
copy name name2
uppercase name2
lowercase name
trim name
ltrim city
rtrim city
titlecase name2
set-column len length(name) + 1
merge name mail m ' '
split-email mail
find-and-replace m 's/a/b/g'
mask-number card 'xxxx-####'
hash name2 MD5 true
set-type n int
fill-null-or-empty mail 'none'
filter-row-if-true n > 999990
filter-row-if-false n >= 0
filter-row exp:{n = 999980} true
filter-row-if-matched name 'zz.*'
filter-row-if-not-matched mail '.+@.+'
filter-by-regex if-matched city 'Lyon'
filter-rows-on condition-true n = 999970
filter-empty-or-null name,mail
send-to-error n = 999960
send-to-error-and-continue n = 999950
fail n < 0
rename name2 name_hash
swap name mail
drop m
set-type amount double
set-column total amount * n
format-date ts 'yyyy-MM-dd'
parse-as-date dstr
drop dstr
rename dstr_1 dstr
generate-uuid id
encode base64 city
decode base64 city_encode_base64
url-encode url
url-decode url
split-url url
parse-as-datetime wall 'yyyy-MM-dd HH:mm:ss'
copy wall wall2
format-datetime wall2 'yyyy/MM/dd'
datetime-to-timestamp wall
diff-date dstr wall span
timestamp-to-datetime dstr
write-as-json-object obj city,n
columns-replace 's/^city_encode_base64/enc/'
change-column-case lower
cleanse-column-names
keep name,mail,len,n,total,ts,dstr,city,card,card4,mail_account,mail_domain,name_hash,id,enc,enc_decode_base64,url,url_host,url_port,url_query,wall,wall2,span,obj
write-as-json-map js
write-as-csv line
"""

# the forms parse-as-date reads besides Spark's ISO-like text (natty's common ones)
DATE_FORMS = ("M/d/yyyy h:mm a", "M/d/yyyy h:mm:ss a", "M/d/yyyy H:mm", "M/d/yyyy H:mm:ss",
              "M/d/yyyy", "M/d/yy", "MMMM d yyyy", "MMMM d, yyyy", "MMM d yyyy",
              "MMM d, yyyy", "d MMMM yyyy", "d MMM yyyy", "MMMM d yyyy h:mm a")

# Wrangler's white space set (the trim directives)
WS = ("\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{180E}\\x{2000}-\\x{200A}"
      "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}")


def hand_written(df):
    """The same transformations, as one would write them in PySpark."""
    from pyspark.sql import functions as F
    c = F.col

    def stop(cond, value, message):
        return F.when(cond, F.raise_error(F.lit(message))).otherwise(value)

    def keep_unless(cond):
        return ~F.coalesce(F.expr(cond).cast("boolean"), F.lit(False))

    def whole(col, rx):
        return col.rlike("\\A(?:" + rx + ")\\z")

    df = df.withColumn("card4", stop(c("card").isNull(), F.substring(c("card"), 1, 4),
                                     "card is null"))
    df = df.withColumn("name2", c("name"))
    df = df.withColumn("name2", F.upper(c("name2")))
    df = df.withColumn("name", F.lower(c("name")))
    df = df.withColumn("name", F.regexp_replace(c("name"), f"^[{WS}]+|[{WS}]+$", ""))
    df = df.withColumn("city", F.regexp_replace(c("city"), f"^[{WS}]+", ""))
    df = df.withColumn("city", F.regexp_replace(c("city"), f"[{WS}]+$", ""))
    # capitalizeFully: a word starts after any white space, not only after a space
    words = F.split(c("name2"), r"(?<=[\s\x1C-\x1F\u1680\u2000-\u2006\u2008-\u200A"
                                r"\u2028\u2029\u205F\u3000])")
    df = df.withColumn("name2", F.array_join(F.transform(words, F.initcap), ""))
    df = df.withColumn("len", F.expr("length(name) + 1"))
    df = df.withColumn("m", F.concat(F.coalesce(c("name"), F.lit("null")), F.lit(" "),
                                     F.coalesce(c("mail"), F.lit("null"))))
    br, at = r"(?s)^.*<(.*)>[^>]*$", r"(?s)^(.*)@([^@]*)$"
    mail = c("mail")
    address = F.when(F.instr(mail, "<") == 0, mail).when(mail.rlike(br),
                                                           F.regexp_extract(mail, br, 1))
    ok = address.rlike(at)
    df = df.withColumn("mail_account", F.when(ok, F.regexp_extract(address, at, 1)))
    df = df.withColumn("mail_domain", F.when(ok, F.regexp_extract(address, at, 2)))
    df = df.withColumn("m", F.regexp_replace(c("m"), "a", "b"))
    card, n = c("card"), F.length(c("card"))

    def walk(acc, ch):
        i, out = acc["i"], acc["o"]
        here = F.substring(card, i, 1)
        return (F.when(ch == "#", F.when(i > n, acc).otherwise(
                    F.struct((i + 1).alias("i"), F.concat(out, here).alias("o"))))
                .when((ch == "x") | (ch == "X"),
                      F.struct((i + 1).alias("i"), F.concat(out, F.lit("x")).alias("o")))
                .otherwise(F.struct(F.when((i <= n) & (here == ch), i + 1).otherwise(i)
                                    .alias("i"), F.concat(out, ch).alias("o"))))
    mask = F.array(*[F.lit(ch) for ch in "xxxx-####"])
    start = F.struct(F.lit(1).alias("i"), F.lit("").alias("o"))
    df = df.withColumn("card", F.when(card.isNotNull(),
                                      F.aggregate(mask, start, walk, lambda acc: acc["o"])))
    df = df.withColumn("name2", stop(c("name2").isNull(), F.lpad(F.md5(c("name2")), 64, "0"),
                                     "name2 is null"))
    df = df.withColumn("n", F.expr("try_cast(n AS int)"))
    df = df.withColumn("mail", F.when(mail.isNull() | (mail == ""), F.lit("none"))
                       .otherwise(mail))
    df = df.where(keep_unless("n > 999990"))
    df = df.where(F.coalesce(F.expr("n >= 0").cast("boolean"), F.lit(False)))
    df = df.where(keep_unless("n = 999980"))
    df = df.where(stop(c("name").isNull(), ~whole(c("name"), "zz.*"), "name is null"))
    df = df.where(stop(c("mail").isNull(), whole(c("mail"), ".+@.+"), "mail is null"))
    df = df.where(stop(c("city").isNull(), ~whole(c("city"), "Lyon"), "city is null"))
    df = df.where(keep_unless("n = 999970"))
    df = df.where(c("name").isNotNull() | c("mail").isNotNull())
    df = df.where(keep_unless("n = 999960"))
    df = df.where(keep_unless("n = 999950"))
    df = df.where(stop(F.coalesce(F.expr("n < 0"), F.lit(False)), F.lit(True), "n < 0"))
    df = df.withColumnRenamed("name2", "name_hash")
    df = df.toDF(*[{"name": "mail", "mail": "name"}.get(x, x) for x in df.columns])
    df = df.drop("m")
    df = df.withColumn("amount", F.expr("try_cast(amount AS double)"))
    df = df.withColumn("total", F.expr("amount * n"))
    df = df.withColumn("ts", F.date_format(c("ts"), "yyyy-MM-dd"))
    plain = F.regexp_replace(F.trim(c("dstr")), r"(?i)(\d)(st|nd|rd|th)\b", "$1")
    parsed = F.coalesce(F.try_to_timestamp(plain),
                        *[F.try_to_timestamp(plain, F.lit(p)) for p in DATE_FORMS])
    df = df.withColumn("dstr_1", F.when(F.lower(F.trim(c("dstr"))).isin("now", "today"),
                                        F.current_timestamp())
                       .otherwise(F.from_utc_timestamp(F.to_utc_timestamp(parsed, "UTC"),
                                                       "UTC")))
    df = df.drop("dstr").withColumnRenamed("dstr_1", "dstr")
    df = df.withColumn("id", F.expr("uuid()"))
    df = df.withColumn("city_encode_base64", F.regexp_replace(F.base64(c("city").cast("binary")),
                                                              "\r\n", ""))
    df = df.withColumn("city_encode_base64_decode_base64", F.unbase64(F.translate(
        c("city_encode_base64").cast("binary").cast("string"), "-_", "+/")).cast("string"))
    url = c("url")
    df = df.withColumn("url", stop(url.isNull(), F.url_encode(url), "url is null"))
    decoded = F.try_url_decode(url)
    df = df.withColumn("url", stop(url.isNotNull() & decoded.isNull(),
                                   stop(url.isNull(), decoded, "url is null"), "bad escape"))

    def part(name):
        return F.try_parse_url(url, F.lit(name))
    authority = part("AUTHORITY")
    port_text = F.regexp_extract(authority, r":(\d+)$", 1)
    path, query = F.coalesce(part("PATH"), F.lit("")), part("QUERY")
    parts = {"protocol": part("PROTOCOL"), "authority": authority, "host": part("HOST"),
             "port": F.when(authority.isNull(), F.lit(None)).when(port_text == "", F.lit(-1))
             .otherwise(port_text.cast("int")),
             "path": path, "filename": F.when(query.isNull(), path)
             .otherwise(F.concat(path, F.lit("?"), query)), "query": query}
    for name, value in parts.items():
        guarded = stop(url.isNotNull() & parts["protocol"].isNull(), value, "malformed url")
        df = df.withColumn(f"url_{name}", F.when(url.isNull(), F.lit(None)).otherwise(guarded))
    fmt = "yyyy-MM-dd HH:mm:ss"
    wall = c("wall")
    parsed = F.try_to_timestamp(wall, F.lit(fmt)).isNotNull()
    df = df.where(~F.coalesce(wall.isNotNull() & ~parsed, F.lit(False)))
    df = df.withColumn("wall", F.when(parsed, F.to_timestamp_ntz(wall, F.lit(fmt))))
    df = df.withColumn("wall2", c("wall"))
    df = df.withColumn("wall2", F.date_format(c("wall2"), "yyyy/MM/dd"))
    w = c("wall")
    df = df.withColumn("wall", F.make_timestamp(F.year(w), F.month(w), F.dayofmonth(w),
                                                F.hour(w), F.minute(w),
                                                F.date_part(F.lit("SECOND"), w), F.lit("UTC")))
    df = df.withColumn("span", F.unix_millis(c("dstr").cast("timestamp")) -
                       F.unix_millis(c("wall").cast("timestamp")))
    df = df.withColumn("dstr", c("dstr").cast("timestamp_ntz"))
    df = df.withColumn("obj", F.struct(c("city").alias("city"), c("n").alias("n")))
    df = df.withColumnsRenamed({"city_encode_base64": "enc",
                                "city_encode_base64_decode_base64": "enc_decode_base64"})
    keep = ["name", "mail", "len", "n", "total", "ts", "dstr", "city", "card", "card4",
            "mail_account", "mail_domain", "name_hash", "id", "enc", "enc_decode_base64",
            "url", "url_host", "url_port", "url_query", "wall", "wall2", "span", "obj"]
    df = df.select(*[x for x in df.columns if x in keep])
    df = df.withColumn("js", F.to_json(F.struct(*[c(x).alias(x) for x in df.columns])))
    flat = [F.to_json(c(f.name)) if f.dataType.typeName() == "struct"
            else c(f.name).cast("string") for f in df.schema.fields]

    def field(v, first):   # Commons CSV's DEFAULT printing, as Wrangler's write-as-csv
        if first:
            needs = v.rlike(r'^(?:[\x00-#,]|[^\x00-~])|[,"\r\n]|[\x00- ]\z') | (v == "")
        else:
            needs = v.rlike(r'^[\x00-#]|[,"\r\n]|[\x00- ]\z')
        quoted = F.concat(F.lit('"'), F.replace(v, F.lit('"'), F.lit('""')), F.lit('"'))
        return F.coalesce(F.when(needs, quoted).otherwise(v), F.lit(""))
    return df.withColumn("line", F.concat_ws(",", *[field(v, i == 0)
                                                     for i, v in enumerate(flat)]))


def source(spark, rows: int):
    from pyspark.sql import functions as F
    i = F.col("id")
    return (spark.range(rows)
            .select(F.concat(F.lit(" Name "), i).alias("name"),
                    F.concat(F.lit("user"), i, F.lit("@example.com")).alias("mail"),
                    F.lpad(i.cast("string"), 9, "0").alias("card"),
                    (i % 1000000).cast("string").alias("n"),
                    (i / 7).cast("string").alias("amount"),
                    F.expr("timestamp_seconds(id)").alias("ts"),
                    F.when(i % 3 == 0, F.lit("")).otherwise(F.lit(" Paris ")).alias("city"),
                    F.date_format(F.expr("timestamp_seconds(id * 37)"),
                                  "yyyy-MM-dd HH:mm:ss").alias("dstr"),
                    F.concat(F.lit("https://example.com:8080/p/a%20b?q="), i).alias("url"),
                    F.date_format(F.expr("timestamp_seconds(id * 11)"),
                                  "yyyy-MM-dd HH:mm:ss").alias("wall")))


def _without_messages(plan: str) -> str:
    """The plan text with every raise_error(…) argument list cut out (balanced parens)."""
    out, pos, key = [], 0, "raise_error("
    while (start := plan.find(key, pos)) >= 0:
        out.append(plan[pos:start + len(key)])
        depth, i = 1, start + len(key)
        while depth and i < len(plan):
            depth += {"(": 1, ")": -1}.get(plan[i], 0)
            i += 1
        out.append("…)")
        pos = i
    return "".join(out) + plan[pos:]


def same_plan(a, b) -> bool:
    """The optimized plans are the same once expression ids and the text of the error
    messages (the recipe's name its line and the failing value) are set aside."""
    def text(df):
        plan = df._jdf.queryExecution().optimizedPlan().toString()
        plan = re.sub(r"#\d+L?", "", plan)                       # expression ids
        plan = re.sub(r"uuid\(Some\(-?\d+\)\)", "uuid()", plan)    # random seeds
        # the clock (parse-as-date's now), folded into a literal when each plan is optimized
        plan = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+", "<now>", plan)
        plan = re.sub(r"\b([a-z])_\d+\b", r"\1", plan)              # lambda variables
        return _without_messages(plan)
    return text(a) == text(b)


def same_rows(a, b, n: int = 300) -> bool:
    """Both give the same rows (the random uuid, and what embeds it, left out)."""
    cols = [x for x in a.columns if x not in ("id", "js", "line")]

    def rows(df):
        return sorted(map(str, df.select(*cols).orderBy("len", "mail").limit(n).collect()))
    return rows(a) == rows(b)


#: HotSpot does not JIT-compile a method of more bytecode than this (-XX:-DontCompileHugeMethods
#: lifts it); a whole-stage-codegen method past it runs interpreted, several times slower.
HUGE_METHOD = 8000


def largest_method(df) -> int | None:
    """Bytecode size of the largest generated method of ``df``'s whole-stage-codegen
    stages (Janino's own figure, as Spark logs it), or None without a JVM gateway.
    Compiles the generated code once more; runs no job."""
    try:
        jvm = df.sparkSession._jvm
        codegen = jvm.org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator
        todo, biggest = [df._jdf.queryExecution().executedPlan()], 0
        while todo:
            plan = todo.pop()
            if plan.getClass().getSimpleName() == "WholeStageCodegenExec":
                stats = codegen.compile(plan.doCodeGen()._2())._2()
                biggest = max(biggest, int(stats.maxMethodCodeSize()))
            children = plan.children().iterator()
            while children.hasNext():
                todo.append(children.next())
        return biggest
    except Exception:  # Spark Connect, or a Spark whose codegen API differs
        return None


def jvm_cpu(spark):
    """A reader of the Spark JVM's own CPU seconds (Linux /proc), or None elsewhere.

    On a machine shared with other jobs wall time swings with their load; the CPU
    seconds the JVM spent on a run do not, so both are printed."""
    try:
        pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        ticks = os.sysconf("SC_CLK_TCK")
        path = f"/proc/{pid}/stat"
        open(path).close()
    except Exception:  # not Linux, or no JVM gateway
        return None

    def read() -> float:
        with open(path) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks   # utime + stime
    return read


def timed(df, cpu=None) -> tuple[float, float]:
    """Wall seconds and JVM CPU seconds (nan when unknown) of one forced run."""
    c0 = cpu() if cpu else float("nan")
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - start
    return wall, (cpu() - c0) if cpu else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for both sides, e.g. "
                             "spark.driver.extraJavaOptions=-XX:-DontCompileHugeMethods or "
                             "spark.sql.codegen.methodSplitThreshold=512")
    opts = parser.parse_args()

    from pyspark.sql import SparkSession

    from fll.directives import Recipe
    builder = (SparkSession.builder.master("local[2]").appName("fll-bench-directives")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC"))
    for setting in opts.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    recipe = Recipe.parse(RECIPE)
    distinct = len({s.spec.name for s in recipe.steps})
    assert distinct >= 50, distinct
    src = source(spark, opts.rows)
    t0 = time.perf_counter()
    ours = recipe.apply(src)
    compile_s = time.perf_counter() - t0
    theirs = hand_written(src)
    assert sorted(ours.columns) == sorted(theirs.columns), (ours.columns, theirs.columns)
    theirs = theirs.select(*ours.columns)
    rows_equal = same_rows(ours, theirs)
    cpu = jvm_cpu(spark)
    timed(ours.limit(1000))   # warm up both code paths
    timed(theirs.limit(1000))
    inf = float("inf")
    best = {"ours": (inf, inf), "theirs": (inf, inf)}
    frames = {"ours": ours, "theirs": theirs}
    for i in range(opts.rounds):
        # alternate who goes first so JIT and cache warm-up favour neither
        for side in (("theirs", "ours") if i % 2 == 0 else ("ours", "theirs")):
            wall, used = timed(frames[side], cpu)
            best[side] = (min(best[side][0], wall), min(best[side][1], used))
    (wall_ours, cpu_ours), (wall_theirs, cpu_theirs) = best["ours"], best["theirs"]
    print(f"rows={opts.rows} directives={len(recipe)} distinct={distinct} "
          f"recipe-compile={compile_s:.2f}s (not in the run times below)")
    for setting in opts.conf:
        print(f"setting: {setting}")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"same rows on a sample: {rows_equal}")
    print(f"optimized plans identical (ignoring expression ids and error-message "
          f"text): {same_plan(ours, theirs)}")
    sizes = {side: largest_method(frames[side]) for side in frames}
    print(f"largest generated method: fll {sizes['ours']} bytes, hand-written "
          f"{sizes['theirs']} bytes (HotSpot JIT-compiles <= {HUGE_METHOD})")
    print(f"hand-written PySpark : {wall_theirs:.2f}s wall, {cpu_theirs:.2f}s JVM CPU")
    print(f"fll recipe           : {wall_ours:.2f}s wall, {cpu_ours:.2f}s JVM CPU")
    print(f"ratio recipe/hand    : {wall_ours / wall_theirs:.3f} wall, "
          f"{cpu_ours / cpu_theirs:.3f} CPU (target <= 1.1)")
    spark.stop()


if __name__ == "__main__":
    main()
