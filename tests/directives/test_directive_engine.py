"""The recipe engine: parse errors, the all-or-nothing rule, laziness, shorthands,
custom directives and labels turned into field operations."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from fll import EndPoint, FieldLineageInfo, InputField, RecipeError, WriteOperation
from fll.directives import DEFAULT_REGISTRY, Outcome, Recipe, Registry, labels
from fll.directives.labels import Decl, resolve, shorthand

SRC, DST = EndPoint("ns", "src"), EndPoint("ns", "dst")
REPO = Path(__file__).resolve().parents[2]


def _err(text: str, registry: Registry | None = None) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        Recipe.parse(text, registry)
    return info.value


# -- parsing ---------------------------------------------------------------------

def test_comments_semicolons_and_colon_prefixes_are_understood():
    r = Recipe.parse("# a comment\ncopy :a b   # trailing\n\n  drop a ; uppercase :b\n")
    assert [(s.statement.line, s.spec.name) for s in r.steps] == [
        (2, "copy"), (4, "drop"), (4, "uppercase")]
    assert r.steps[0].args.source == "a" and r.steps[0].args.destination == "b"


def test_quoted_strings_keep_spaces_semicolons_hashes_and_escaped_quotes():
    r = Recipe.parse(r"""fill-null-or-empty :a 'it\'s; #1'""" + "\n" +
                     r"""filter-row-if-matched a '\d+\.x'""")
    assert r.steps[0].args.value == "it's; #1"
    assert r.steps[1].args.regex == r"\d+\.x"


def test_text_arguments_understand_tab_escapes():
    assert Recipe.parse(r"parse-as-csv body '\t'").steps[0].args.delimiter == "\t"


def test_missing_argument_names_line_column_directive_and_usage():
    e = _err("copy a b\ncopy a")
    assert (e.line, e.column) == (2, 7)
    assert e.directive == "copy a"
    assert "destination" in e.expected and e.expected.startswith("copy")
    assert "line 2" in str(e) and "missing argument" in str(e)


def test_bad_regex_is_reported_at_its_column():
    e = _err("drop a\nsplit-to-columns body '(unclosed'")
    assert (e.line, e.column) == (2, 23)
    assert "bad regex" in str(e)


def test_unterminated_quote_extra_argument_and_bad_values_are_errors():
    assert _err("uppercase 'abc").column == 11
    assert "extra argument" in str(_err("uppercase a b"))
    assert "integer" in str(_err("parse-as-json a deep"))
    assert "true or false" in str(_err("copy a b maybe"))
    assert "not a word" in str(_err("change-column-case 12"))
    assert "unknown algorithm" in str(_err("hash a SHA-999"))
    assert "sed" in str(_err("columns-replace 'x/a/b/'"))


def test_unknown_directive_suggests_the_closest_names():
    e = _err("uppercas b")
    assert e.suggestions[0] == "uppercase"
    assert "did you mean uppercase" in str(e)
    assert (e.line, e.column) == (1, 1)


def test_every_bad_line_is_reported_and_the_first_one_raised():
    e = _err("copy a b\nfrobnicate x\ncopy a\nlowercase a")
    assert [x.line for x in e.errors] == [2, 3]
    assert "1 more bad line" in str(e)


def test_nothing_runs_when_any_line_is_bad(spark):
    calls = []
    reg = DEFAULT_REGISTRY.copy()

    def record(step, df, args):
        calls.append(args.column)
        return Outcome(df, [])
    reg.register("record <column:column>", record)
    with pytest.raises(RecipeError):
        Recipe.parse("record a\nrecord b\nrecord", reg)
    assert calls == []
    Recipe.parse("record a\nrecord b", reg).apply(spark.createDataFrame([("x",)], "a string"))
    assert calls == ["a", "b"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(
    list("ab:;#'\"\\ ,/s\n(){}[]*+?.^$%d") + ["copy ", "drop ", "set-column ", "swap ",
                                           "split-to-columns ", "find-and-replace ",
                                           "parse-as-csv ", "hash ", "true", "\\'"]),
    max_size=40).map("".join))
def test_fuzzed_recipes_only_ever_raise_recipe_error(text):
    try:
        Recipe.parse(text)
    except RecipeError as exc:
        assert exc.line is None or exc.line >= 1


# -- applying --------------------------------------------------------------------

def test_unknown_column_at_run_time_names_the_line(spark):
    df = spark.createDataFrame([("x",)], "a string")
    with pytest.raises(RecipeError) as info:
        Recipe.parse("copy a b\n\nuppercase c").apply(df)
    assert info.value.line == 3 and "unknown column 'c'" in str(info.value)


def test_a_bad_spark_expression_names_the_line(spark):
    df = spark.createDataFrame([("x",)], "a string")
    with pytest.raises(RecipeError) as info:
        Recipe.parse("set-column b nope(a)").apply(df)
    assert info.value.line == 1 and "bad Spark SQL expression" in str(info.value)


def test_applying_lazily_definable_directives_runs_no_spark_job(spark):
    df = spark.createDataFrame([("Ann", "a@b.com", "1")], "name string, mail string, n string")
    recipe = Recipe.parse("""
        copy name n2; uppercase n2; lowercase name; trim name; titlecase n2
        set-column len length(name) + 1
        merge name mail m ' '
        split-email mail
        find-and-replace m 's/a/b/g'; mask-number n '#x'; hash n2 MD5
        set-type n int; fill-null-or-empty mail 'none'
        filter-row-if-true len > 100; filter-row-if-matched name '^zz'
        rename n2 name2; swap name mail; drop m; generate-uuid id
        split-to-rows mail ','; parse-as-date mail; format-date mail_1 'yyyy'
        cleanse-column-names; change-column-case upper; columns-replace 's/X/Y/'
        set-headers a,b; keep a,b,ID
    """)
    sc = spark.sparkContext
    sc.setJobGroup("fll-lazy-test", "recipe compile must not run jobs")
    try:
        compiled = recipe.compile(df)
        jobs = list(sc.statusTracker().getJobIdsForGroup("fll-lazy-test"))
    finally:
        sc.setJobGroup("fll-other", "")
    assert jobs == []
    assert compiled.actions == 0
    assert compiled.dataframe.columns == ["a", "b", "ID"]


def test_data_dependent_directives_run_exactly_one_action_each(spark):
    df = spark.createDataFrame([("a,b", "1,2", '{"k": 1}')], "c string, d string, j string")
    compiled = Recipe.parse("split-to-columns c ,; parse-as-csv d; parse-as-json j; "
                            "extract-regex-groups c '(\\w)'").compile(df)
    assert [s.actions for s in compiled.steps] == [1, 1, 1, 1]


# -- shorthands (the seed's three examples) --------------------------------------

def test_seed_split_to_columns_shorthand_resolves_to_the_new_columns(spark):
    df = spark.createDataFrame([("a b c",)], "column string")
    step = Recipe.parse("split-to-columns column ' '").labels(df)[0]
    assert "ADD all columns formatted column_%d" in step.declared
    assert dict(step.labels) == {"column": "READ", "column_1": "ADD", "column_2": "ADD",
                                 "column_3": "ADD"}


def test_seed_parse_as_csv_shorthand_is_all_columns_minus_the_source(spark):
    df = spark.createDataFrame([("1,2",)], "column string")
    step = Recipe.parse("parse-as-csv column ,").labels(df)[0]
    assert "ADD all columns minus column" in step.declared
    assert dict(step.labels) == {"column": "READ", "column_1": "ADD", "column_2": "ADD"}


def test_seed_custom_lowercase_all_is_all_columns_modify(spark):
    reg = DEFAULT_REGISTRY.copy()

    @labels_directive(reg, "lowercase-all")
    def lowercase_all(step, df, args):
        out = df.select([F.lower(step.col(c)).alias(c) for c in df.columns])
        return Outcome(out, labels.modify(labels.all_columns()))
    df = spark.createDataFrame([("A", "B")], "x string, y string")
    compiled = Recipe.parse("lowercase-all", reg).compile(df)
    assert dict(compiled.steps[0].labels) == {"x": "MODIFY", "y": "MODIFY"}
    assert compiled.dataframe.collect()[0].asDict() == {"x": "a", "y": "b"}
    assert "lowercase-all" not in DEFAULT_REGISTRY


def labels_directive(registry, usage):
    from fll.directives import register_directive
    return register_directive(usage, registry=registry)


def test_shorthand_patterns_match_percent_s_and_percent_d():
    sh = shorthand("all columns formatted %s_%d")
    assert sh.matches("body_12") and sh.matches("a_b_3")
    assert not sh.matches("_1") and not sh.matches("body_x") and not sh.matches("body_")
    assert shorthand("all columns minus a b").minus == ("a", "b")
    with pytest.raises(ValueError):
        Decl("DROP", shorthand("all columns"))


def test_a_directive_that_hides_a_new_column_is_refused():
    with pytest.raises(RecipeError, match="without declaring"):
        resolve(labels.read("a"), ["a"], ["a", "b"], {"line": 4})
    with pytest.raises(RecipeError, match="exactly one label"):
        resolve(labels.read("a") + labels.modify("a"), ["a"], ["a"], {})


def test_registering_needs_a_valid_name_and_no_silent_override():
    reg = Registry()
    reg.register("my-thing <c:column>", lambda s, d, a: Outcome(d))
    with pytest.raises(ValueError, match="already registered"):
        reg.register("my-thing <c:column>", lambda s, d, a: Outcome(d))
    with pytest.raises(ValueError, match="lowercase"):
        reg.register("My_Thing", lambda s, d, a: Outcome(d))


# -- labels -> field operations --------------------------------------------------

def _incoming(info: FieldLineageInfo) -> dict[str, list[str]]:
    return {f.field: sorted(s.field for s in v) for f, v in info.incoming_summary().items() if v}


def test_copy_uppercase_drop_gives_destination_b_from_source_a():
    info = Recipe.parse("copy a b; uppercase b; drop a").to_lineage(SRC, DST, ["a"])
    assert _incoming(info) == {"b": ["a"]}
    names = [op.name for op in info.operations]
    assert names == ["read", "recipe.1.copy.b", "recipe.3.drop.a", "recipe.2.uppercase.b",
                     "write"] or set(names) == {"read", "recipe.1.copy.b", "recipe.2.uppercase.b",
                                                "recipe.3.drop.a", "write"}


def test_untouched_columns_pass_through_as_identity_and_drops_end_in_dropped():
    info = Recipe.parse("drop b").to_lineage(SRC, DST, ["a", "b"])
    assert _incoming(info) == {"a": ["a"]}
    out = info.outgoing_summary()
    from fll import DROPPED, EndPointField
    assert out[EndPointField(SRC, "b")] == frozenset({DROPPED})


def test_swap_rename_and_merge_keep_exact_per_field_lineage():
    info = Recipe.parse("swap a b; rename c d; merge a d m ','").to_lineage(SRC, DST, ["a", "b", "c"])
    assert _incoming(info) == {"a": ["b"], "b": ["a"], "d": ["c"], "m": ["b", "c"]}


def test_field_operations_give_stage_prefixed_ops_and_the_latest_producers(spark):
    df = spark.createDataFrame([("x", "y")], "a string, b string")
    given_inputs = {"a": InputField("reader", "a"), "b": InputField("joiner", "b")}
    fo = Recipe.parse("copy a c; lowercase c").field_operations(df, "clean", given_inputs)
    assert [op.name for op in fo.operations] == ["clean.1.copy.c", "clean.2.lowercase.c"]
    assert fo.operations[0].inputs == (InputField("reader", "a"),)
    assert fo.outputs == {"a": InputField("reader", "a"), "b": InputField("joiner", "b"),
                          "c": InputField("clean.2.lowercase.c", "c")}
    assert fo.operations[0].transformations[InputField("reader", "a")][0].subtype == "IDENTITY"


def test_masking_directives_tag_their_inputs_as_masking(spark):
    df = spark.createDataFrame([("x",)], "a string")
    fo = Recipe.parse("hash a MD5").field_operations(df)
    (tag,) = fo.operations[0].transformations[InputField("read", "a")]
    assert tag.masking is True


def test_filters_add_no_dependency_unless_asked():
    recipe = Recipe.parse("filter-row-if-matched a '^x'")
    assert _incoming(recipe.to_lineage(SRC, DST, ["a", "b"])) == {"a": ["a"], "b": ["b"]}
    with_filter = recipe.to_lineage(SRC, DST, ["a", "b"], filter_dependencies=True)
    assert _incoming(with_filter) == {"a": ["a"], "b": ["a", "b"]}
    op = next(o for o in with_filter.operations if o.name.endswith(".b"))
    assert op.transformations[InputField("read", "a")][0].subtype == "FILTER"


def test_same_recipe_and_schema_give_the_same_checksum():
    text = "copy a b; set-column c concat(a, b); drop a"
    one = Recipe.parse(text).to_lineage(SRC, DST, ["a"])
    two = Recipe.parse(text).to_lineage(SRC, DST, ["a"])
    other = Recipe.parse(text.replace("drop a", "drop b")).to_lineage(SRC, DST, ["a"])
    assert one.checksum == two.checksum != other.checksum
    assert any(isinstance(op, WriteOperation) for op in one.operations)


def test_explain_shows_every_line_and_its_labels(spark):
    df = spark.createDataFrame([("x",)], "a string")
    text = Recipe.parse("copy a b\nrename b c").compile(df).explain()
    assert text.splitlines() == ["line 1 `copy a b`: a=READ b=ADD",
                                 "line 2 `rename b c`: b=RENAME c=RENAME"]


@pytest.mark.parametrize("path", sorted((REPO / "conf" / "recipes").glob("*.recipe")),
                         ids=lambda p: p.name)
def test_example_recipes_parse(path):
    assert len(Recipe.parse(path.read_text())) > 0


def test_orders_example_recipe_applies_and_total_comes_from_amount_and_quantity(spark):
    df = spark.createDataFrame(
        [("o1", "2.5", "4", "1234567812345678", "a@b.c", "2024-05-06 07:08:09", "paid"),
         ("o2", "1", "1", "1111222233334444", "d@e.f", "2024-05-07 00:00:00", "test")],
        "order_id string, amount string, quantity string, card string, customer_email string,"
        " ts string, status string")
    recipe = Recipe.parse((REPO / "conf" / "recipes" / "orders.recipe").read_text())
    compiled = recipe.compile(df)
    rows = [r.asDict() for r in compiled.dataframe.collect()]
    assert len(rows) == 1 and rows[0]["total"] == 10.0
    assert rows[0]["card"] == "xxxxxxxxxxxx5678" and rows[0]["order_time"] == "2024-05-06"
    incoming = _incoming(compiled.to_lineage(SRC, DST))
    assert incoming["total"] == ["amount", "quantity"]
    assert incoming["order_time"] == ["ts"]
