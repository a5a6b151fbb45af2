/*
 * fll's query execution listener: sends every successful write of a Spark
 * application to `fll serve`, which analyses it with the same Python code
 * `fll.spark.track()` uses. Enabled with one setting, no code change:
 *
 *   --jars fll-spark-listener.jar
 *   --conf spark.sql.queryExecutionListeners=fll.spark.LineageListener
 *   --conf spark.fll.url=http://127.0.0.1:8080  [--conf spark.fll.token=T]
 *   [--conf spark.fll.spool=/var/spool/fll] [--conf spark.fll.exitTimeout=5s]
 *
 * What it sends per write: the analyzed plan's JSON (TreeNode.toJSON) and what
 * that JSON loses, read here from the live plan: each relation leaf's storage
 * location or table name (keyed by its node number and first output exprId),
 * and the destination's location or name. No lineage rule lives here.
 *
 * This class must never fail or slow the job it listens to: callbacks run on
 * Spark's listener bus thread (after the write has finished) and read there only
 * what the live session knows (names, locations); the plan's JSON is rendered and
 * sent on one daemon thread fed by a small bounded queue, which sleeps while idle;
 * every failure is swallowed, and
 * whatever cannot be sent (server down, wrong token, queue full, the exit budget
 * spent) is written to the spool directory, re-sent when the server answers again
 * or by `fll record --spool DIR`. A send problem is logged once, not per event.
 *
 * At JVM exit (spark-sql -e, spark-submit of a short job) the sender flushes what
 * is queued within spark.fll.exitTimeout (default 5 s) before spooling the rest:
 * its hook runs in Spark's own shutdown sequence after the SparkContext has
 * stopped, i.e. after Spark's listener bus has delivered its last events to
 * onSuccess (a plain JVM shutdown hook would run concurrently with Spark's and
 * could close the sender before the last write is even reported).
 *
 * The spool is per server: events go to DIR/<key>/, key = the first 16 hex digits
 * of sha256(url + "\n" + token), and DIR/<key>/server names the URL (never the
 * token). A sender only ever re-sends its own sub-directory, so an event captured
 * for one fll server is never delivered to another one sharing the directory.
 * Only the JDK and Spark's own classes are used: no extra jar to download.
 */
package fll.spark;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkConf;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.TreeNode;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.util.QueryExecutionListener;
import org.apache.spark.util.ShutdownHookManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.runtime.AbstractFunction0;
import scala.runtime.BoxedUnit;

public final class LineageListener implements QueryExecutionListener {

    /** The route of `fll serve` that analyses these events. */
    public static final String ROUTE = "/api/v1/spark/events";
    /** Bumped when the event's shape changes; the server refuses shapes it does not know. */
    public static final int FORMAT = 1;

    private static final Logger LOG = LoggerFactory.getLogger(LineageListener.class);

    /** Write commands whose analyzed plan names what is written (V1 and V2). */
    static final Set<String> WRITES = Set.of(
        "InsertIntoHadoopFsRelationCommand", "CreateDataSourceTableAsSelectCommand",
        "InsertIntoDataSourceDirCommand", "InsertIntoHiveDirCommand", "InsertIntoHiveTable",
        "CreateHiveTableAsSelectCommand", "AppendData", "OverwriteByExpression",
        "OverwritePartitionsDynamic", "CreateTableAsSelect", "ReplaceTableAsSelect");

    /**
     * Events that repeat a write reported once already: "file source write" is the
     * inner write of CREATE TABLE … AS SELECT / saveAsTable (reported whole as the
     * CTAS), "cli" is spark-sql's driver re-posting each statement it ran (reported
     * as "command" when it executed).
     */
    static final Set<String> SKIPPED_FUNCS = Set.of("file source write", "cli");

    /**
     * Writes that run their data write as a nested command, reported on its own
     * (func "command") with the same query and destination: INSERT OVERWRITE
     * DIRECTORY … USING runs an InsertIntoHadoopFsRelationCommand (sent), and a Hive
     * CTAS an InsertIntoHiveTable tagged BY_CTAS (not sent: the CTAS is). Sending
     * both would record the write twice.
     */
    static final Set<String> REPORTED_BY_NESTED_WRITE = Set.of("InsertIntoDataSourceDirCommand");

    /** Leaves whose dataset the plan JSON drops (the Python side keeps the same list). */
    static final Set<String> LEAVES = Set.of(
        "LogicalRelation", "HiveTableRelation", "DataSourceV2Relation",
        "DataSourceV2ScanRelation", "StreamingDataSourceV2Relation");

    /** One sender per (url, token, spool) in this JVM: cloned sessions share it. */
    private static final Map<String, Sender> SENDERS = new ConcurrentHashMap<>();

    private final Sender sender;
    private final String appName;
    private final String appId;

    public LineageListener(SparkConf conf) {
        String url = conf.get("spark.fll.url", "http://127.0.0.1:8080");
        String token = conf.get("spark.fll.token", "");
        String spool = conf.get("spark.fll.spool",
            Paths.get(System.getProperty("java.io.tmpdir"), "fll-spool").toString());
        int queue = conf.getInt("spark.fll.queueSize", 64);
        long exitMs = Math.max(0L, conf.getTimeAsMs("spark.fll.exitTimeout", "5s"));
        this.appName = conf.get("spark.app.name", "spark");
        this.appId = conf.get("spark.app.id", "");
        this.sender = SENDERS.computeIfAbsent(url + "\n" + token + "\n" + spool,
            k -> new Sender(url, token, Paths.get(spool), queue, exitMs));
    }

    @Override
    public void onSuccess(String funcName, QueryExecution qe, long durationNs) {
        try {
            LogicalPlan plan = qe.analyzed();
            String command = plan.getClass().getSimpleName();
            if (!WRITES.contains(command) || SKIPPED_FUNCS.contains(funcName)
                    || REPORTED_BY_NESTED_WRITE.contains(command) || byHiveCtas(plan, command)) {
                // a query, a non-writing command, or a write reported once already
                return;
            }
            long end = System.currentTimeMillis();
            sender.submit(new Pending(
                head(funcName, qe, plan, command, end - durationNs / 1_000_000L), plan));
        } catch (Throwable t) {
            sender.problem("cannot describe a write for fll (" + describe(t) + ")");
        }
    }

    @Override
    public void onFailure(String funcName, QueryExecution qe, Exception exception) {
        // a failed write records nothing
    }

    /** The InsertIntoHiveTable a Hive CTAS runs (reported whole as the CTAS). */
    private static boolean byHiveCtas(LogicalPlan plan, String command) {
        if (!command.equals("InsertIntoHiveTable")) {
            return false;
        }
        try {  // by reflection: spark-hive is not on every class path
            Object tag = plan.getClass().getMethod("BY_CTAS").invoke(null);
            @SuppressWarnings("unchecked")
            org.apache.spark.sql.catalyst.trees.TreeNodeTag<Object> t =
                (org.apache.spark.sql.catalyst.trees.TreeNodeTag<Object>) tag;
            return plan.getTagValue(t).isDefined();
        } catch (ReflectiveOperationException | RuntimeException e) {
            return false;  // no such tag in this Spark: sent (possibly twice)
        }
    }

    // -- the event ------------------------------------------------------------------

    /**
     * A write waiting to be sent: everything read from the live session (the head),
     * and the analyzed plan, whose JSON is rendered on the sender thread. Rendering
     * is most of an event's cost; the plan is immutable once analyzed, so doing it
     * later frees Spark's shared listener queue at once and holds no string bigger
     * than the plan meanwhile.
     */
    static final class Pending {
        final String head;
        final LogicalPlan plan;

        Pending(String head, LogicalPlan plan) {
            this.head = head;
            this.plan = plan;
        }

        /** The event's JSON; toJSON is valid JSON, embedded as is, not re-escaped. */
        String body() {
            return head + plan.toJSON() + '}';
        }
    }

    /** The event up to its "plan" value: what must be read while the session is as written. */
    private String head(String funcName, QueryExecution qe, LogicalPlan plan, String command,
                        long startMs) throws Exception {
        StringBuilder out = new StringBuilder(4096);
        out.append("{\"format\":").append(FORMAT);
        field(out, "run_id", UUID.randomUUID().toString());
        out.append(",\"start_ms\":").append(startMs);
        field(out, "program", appName);
        field(out, "app_id", appId);
        field(out, "func", funcName);
        field(out, "command", command);
        field(out, "spark_version", org.apache.spark.package$.MODULE$.SPARK_VERSION());
        out.append(",\"destination\":");
        dataset(out, destination(qe, plan, command));
        out.append(",\"leaves\":[");
        List<TreeNode<?>> leaves = new ArrayList<>();
        List<Integer> numbers = new ArrayList<>();
        number(plan, 0, leaves, numbers);
        for (int i = 0; i < leaves.size(); i++) {
            if (i > 0) {
                out.append(',');
            }
            TreeNode<?> leaf = leaves.get(i);
            out.append("{\"number\":").append(numbers.get(i));
            field(out, "class", leaf.getClass().getSimpleName());
            out.append(",\"first_id\":").append(firstId(leaf));
            out.append(",\"datasets\":[");
            List<String[]> found;
            try {
                found = leafDatasets(leaf);
            } catch (Throwable t) {
                found = List.of();
            }
            for (int j = 0; j < found.size(); j++) {
                if (j > 0) {
                    out.append(',');
                }
                dataset(out, found.get(j));
            }
            out.append("]}");
        }
        out.append("],\"plan\":");
        return out.toString();
    }

    /** Numbers nodes as TreeNode.apply(n) does: the node, its inner children, its children. */
    private static int number(TreeNode<?> node, int n, List<TreeNode<?>> leaves,
                              List<Integer> numbers) {
        if (LEAVES.contains(node.getClass().getSimpleName())) {
            leaves.add(node);
            numbers.add(n);
        }
        int next = n + 1;
        scala.collection.Iterator<?> inner = node.innerChildren().iterator();
        while (inner.hasNext()) {
            Object o = inner.next();
            if (o instanceof TreeNode) {
                next = number((TreeNode<?>) o, next, leaves, numbers);
            }
        }
        scala.collection.Iterator<?> kids = node.children().iterator();
        while (kids.hasNext()) {
            next = number((TreeNode<?>) kids.next(), next, leaves, numbers);
        }
        return next;
    }

    private static String firstId(TreeNode<?> leaf) {
        try {
            scala.collection.Iterator<?> out = ((LogicalPlan) leaf).output().iterator();
            if (out.hasNext()) {
                Object exprId = call(out.next(), "exprId");
                return String.valueOf(call(exprId, "id"));
            }
        } catch (Throwable t) {
            // no id: the server falls back to the node number
        }
        return "null";
    }

    /** {"location": ...} as {"location", loc} or a named table as {"name", name}. */
    private static List<String[]> leafDatasets(TreeNode<?> leaf) throws Exception {
        String cls = leaf.getClass().getSimpleName();
        List<String[]> out = new ArrayList<>();
        if (cls.equals("LogicalRelation")) {
            scala.Option<?> table = (scala.Option<?>) call(leaf, "catalogTable");
            if (table.isDefined()) {
                out.add(location(call(table.get(), "location")));
                return out;
            }
            Object relation = call(leaf, "relation");
            Object index;
            try {
                index = call(relation, "location");
            } catch (NoSuchMethodException e) {
                out.add(new String[] {"name", relation.toString()});
                return out;
            }
            scala.collection.Iterator<?> paths =
                ((scala.collection.Iterable<?>) call(index, "rootPaths")).iterator();
            while (paths.hasNext()) {
                out.add(location(paths.next()));
            }
            return out;
        }
        if (cls.equals("HiveTableRelation")) {
            out.add(location(call(call(leaf, "tableMeta"), "location")));
            return out;
        }
        Object node = cls.equals("DataSourceV2ScanRelation") ? call(leaf, "relation") : leaf;
        out.add(v2Table(call(node, "table")));
        return out;
    }

    private static String[] v2Table(Object table) throws Exception {
        @SuppressWarnings("unchecked")
        Map<String, String> props = (Map<String, String>) call(table, "properties");
        String loc = props == null ? null : props.get("location");
        if (loc != null && !loc.isEmpty()) {
            return new String[] {"location", loc};
        }
        return new String[] {"name", String.valueOf(call(table, "name"))};
    }

    private static String[] location(Object uriOrPath) {
        return new String[] {"location", String.valueOf(uriOrPath)};
    }

    /** Where the write went; read after it ran, so a created table is in the catalog. */
    private static String[] destination(QueryExecution qe, LogicalPlan plan, String command)
            throws Exception {
        switch (command) {
            case "InsertIntoHadoopFsRelationCommand":
                return location(call(plan, "outputPath"));
            case "CreateDataSourceTableAsSelectCommand":
            case "CreateHiveTableAsSelectCommand": {
                // the Hive command names its table "tableDesc", the data source one "table"
                Object table = call(plan, command.startsWith("CreateHive") ? "tableDesc"
                    : "table");
                Object catalog = call(call(qe.sparkSession(), "sessionState"), "catalog");
                Object ident = call(table, "identifier");
                try {
                    Method get = catalog.getClass().getMethod("getTableMetadata",
                        ident.getClass());
                    return location(call(get.invoke(catalog, ident), "location"));
                } catch (Exception e) {
                    scala.Option<?> loc = (scala.Option<?>) call(call(table, "storage"),
                        "locationUri");
                    if (loc.isDefined()) {
                        return location(loc.get());
                    }
                    Method path = catalog.getClass().getMethod("defaultTablePath",
                        ident.getClass());
                    return location(path.invoke(catalog, ident));
                }
            }
            case "InsertIntoDataSourceDirCommand":
            case "InsertIntoHiveDirCommand": {
                scala.Option<?> loc = (scala.Option<?>) call(call(plan, "storage"),
                    "locationUri");
                return loc.isDefined() ? location(loc.get()) : null;
            }
            case "InsertIntoHiveTable":
                return location(call(call(plan, "table"), "location"));
            case "AppendData":
            case "OverwriteByExpression":
            case "OverwritePartitionsDynamic": {
                Object relation = call(plan, "table");
                try {
                    return v2Table(call(relation, "table"));
                } catch (NoSuchMethodException e) {
                    return new String[] {"name", String.valueOf(call(relation, "name"))};
                }
            }
            default: {  // CreateTableAsSelect / ReplaceTableAsSelect on a V2 catalog
                Object name = call(plan, "name");
                String ident = String.valueOf(name);
                try {
                    Object catalog = call(name, "catalog");
                    Object id = call(name, "identifier");
                    Method load = catalog.getClass().getMethod("loadTable",
                        Class.forName("org.apache.spark.sql.connector.catalog.Identifier"));
                    return v2Table(load.invoke(catalog, id));
                } catch (Exception e) {
                    return new String[] {"name", ident};
                }
            }
        }
    }

    // -- small helpers ----------------------------------------------------------------

    /** A no-argument method by name: the classes differ between Spark versions. */
    static Object call(Object target, String method) throws Exception {
        Method m = target.getClass().getMethod(method);
        return m.invoke(target);
    }

    private static void dataset(StringBuilder out, String[] ds) {
        if (ds == null) {
            out.append("null");
            return;
        }
        out.append('{');
        quote(out, ds[0]);
        out.append(':');
        quote(out, ds[1]);
        out.append('}');
    }

    private static void field(StringBuilder out, String key, String value) {
        out.append(',');
        quote(out, key);
        out.append(':');
        quote(out, value);
    }

    static void quote(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }

    static String describe(Throwable t) {
        String msg = t.getMessage();
        String first = msg == null ? "" : msg.strip().split("\n", 2)[0];
        return t.getClass().getSimpleName() + (first.isEmpty() ? "" : ": " + first);
    }

    // -- sending ----------------------------------------------------------------------

    /** The spool sub-directory of one server and token: 16 hex digits of sha256(url, token). */
    static String spoolKey(String base, String token) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(
                (base + "\n" + token).getBytes(StandardCharsets.UTF_8));
            StringBuilder hex = new StringBuilder(16);
            for (int i = 0; i < 8; i++) {
                hex.append(String.format("%02x", d[i] & 0xff));
            }
            return hex.toString();
        } catch (java.security.NoSuchAlgorithmException e) {  // every JDK has SHA-256
            throw new IllegalStateException(e);
        }
    }

    /**
     * One daemon thread posting events in order. A failed post spools the event and
     * marks the server down: later events go straight to the spool until a retry
     * after {@code RETRY_MS} succeeds, which also re-sends what was spooled.
     */
    static final class Sender implements Runnable {
        private static final long RETRY_MS = 10_000;
        private static final int CONNECT_MS = 2_000;
        private static final int READ_MS = 15_000;
        /**
         * Where the exit flush runs in Spark's shutdown sequence: after the SparkContext
         * (priority 50, whose stop drains the listener bus), before temp dirs (25).
         */
        static final int EXIT_PRIORITY = 40;

        /** Wakes the sender at JVM exit without waiting for an event. */
        private static final Pending STOP = new Pending("", null);

        private final String endpoint;
        private final String base;
        private final String token;
        private final Path root;
        /** This server's (and token's) own sub-directory of the spool: all it reads or writes. */
        private final Path spool;
        private final long exitBudgetMs;
        private final ArrayBlockingQueue<Pending> queue;
        private final Set<String> logged = ConcurrentHashMap.newKeySet();
        private final Thread thread;
        private volatile boolean closing;
        private volatile long downUntil;
        private volatile boolean spooled;
        /** The event the sender thread is posting: spooled at exit if the post outlives the budget. */
        private volatile String inFlight;

        Sender(String url, String token, Path root, int capacity, long exitBudgetMs) {
            this.base = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
            this.endpoint = base + ROUTE;
            this.token = token;
            this.root = root;
            this.spool = root.resolve(spoolKey(base, token));
            this.exitBudgetMs = exitBudgetMs;
            this.queue = new ArrayBlockingQueue<>(Math.max(1, capacity));
            this.spooled = true;  // events left by an earlier run are re-sent on first success
            this.thread = new Thread(this, "fll-lineage-sender");
            this.thread.setDaemon(true);
            this.thread.start();
            addExitHook();
        }

        /**
         * The flush runs in Spark's shutdown sequence after the SparkContext stopped;
         * a plain JVM hook (run concurrently with Spark's) only if that is unavailable.
         */
        private void addExitHook() {
            try {
                ShutdownHookManager.addShutdownHook(EXIT_PRIORITY,
                    new AbstractFunction0<BoxedUnit>() {
                        @Override
                        public BoxedUnit apply() {
                            drain();
                            return BoxedUnit.UNIT;
                        }
                    });
                return;
            } catch (Throwable t) {
                problem("cannot join Spark's shutdown sequence (" + describe(t)
                    + "); flushing at exit with a JVM hook instead");
            }
            try {
                Runtime.getRuntime().addShutdownHook(new Thread(this::drain, "fll-lineage-exit"));
            } catch (IllegalStateException e) {
                // the JVM is exiting already: what is submitted now is spooled
            }
        }

        void submit(Pending event) {
            if (closing || !queue.offer(event)) {
                spool(event);  // never block the listener bus
                if (!closing) {
                    problem("the send queue is full; events are spooled in " + spool);
                }
            }
        }

        @Override
        public void run() {
            while (!closing) {
                Pending event;
                try {
                    // Idle, the thread sleeps until an event comes, costing no CPU while the
                    // job runs; only with events spooled does it wake, to retry them when due.
                    if (spooled) {
                        long wait = Math.max(1L, downUntil - System.currentTimeMillis());
                        event = queue.poll(wait, TimeUnit.MILLISECONDS);
                    } else {
                        event = queue.take();
                    }
                } catch (InterruptedException e) {
                    return;
                }
                if (event == STOP) {
                    return;
                }
                if (event == null) {
                    if (spooled && System.currentTimeMillis() >= downUntil) {
                        resendSpool();
                    }
                    continue;
                }
                deliver(event);
            }
        }

        /** The event's JSON, or null (logged once) when its plan cannot be rendered. */
        private String render(Pending event) {
            try {
                return event.body();
            } catch (Throwable t) {
                problem("cannot describe a write for fll (" + describe(t) + ")");
                return null;
            }
        }

        private void deliver(Pending pending) {
            String event = render(pending);
            if (event == null) {
                return;
            }
            if (System.currentTimeMillis() < downUntil) {
                spool(event);
                return;
            }
            inFlight = event;
            String problem = post(event.getBytes(StandardCharsets.UTF_8), CONNECT_MS, READ_MS);
            if (problem == null) {
                inFlight = null;
                if (spooled) {
                    resendSpool();
                }
                return;
            }
            spoolInFlight(event);
            down(problem);
        }

        /** Spools the event being posted unless the exit flush has spooled it already. */
        private void spoolInFlight(String event) {
            synchronized (this) {
                if (inFlight != event) {
                    return;
                }
                inFlight = null;
            }
            spool(event);
        }

        private void down(String problem) {
            downUntil = System.currentTimeMillis() + RETRY_MS;
            problem(problem + "; events are spooled in " + spool
                + " and re-sent when it answers (or: fll record --spool " + root + " --server "
                + base + ")");
        }

        /** Re-sends this server's spooled events oldest first; stops at the first failure. */
        private void resendSpool() {
            List<Path> files = new ArrayList<>();
            try (DirectoryStream<Path> dir = Files.newDirectoryStream(spool, "*.json")) {
                for (Path p : dir) {
                    files.add(p);
                }
            } catch (IOException e) {
                spooled = false;  // no spool directory: nothing waits
                return;
            }
            files.sort(null);
            for (Path p : files) {
                if (closing) {
                    return;
                }
                byte[] body;
                try {
                    body = Files.readAllBytes(p);
                } catch (IOException e) {
                    continue;
                }
                String problem = post(body, CONNECT_MS, READ_MS);
                if (problem != null && !problem.startsWith("rejected")) {
                    down(problem);
                    return;
                }
                try {
                    if (problem == null) {
                        Files.deleteIfExists(p);
                    } else {  // the server will never take this one: keep it aside
                        Files.move(p, p.resolveSibling(p.getFileName() + ".rejected"),
                            StandardCopyOption.REPLACE_EXISTING);
                    }
                } catch (IOException e) {
                    // left for the next pass
                }
            }
            spooled = false;
        }

        /** Null when the server took the event, else what went wrong (one line). */
        private String post(byte[] body, int connectMs, int readMs) {
            HttpURLConnection conn = null;
            try {
                conn = (HttpURLConnection) URI.create(endpoint).toURL().openConnection();
                conn.setConnectTimeout(connectMs);
                conn.setReadTimeout(readMs);
                conn.setRequestMethod("POST");
                conn.setDoOutput(true);
                conn.setFixedLengthStreamingMode(body.length);
                conn.setRequestProperty("Content-Type", "application/json");
                if (!token.isEmpty()) {
                    conn.setRequestProperty("Authorization", "Bearer " + token);
                }
                try (OutputStream os = conn.getOutputStream()) {
                    os.write(body);
                }
                int status = conn.getResponseCode();
                drainQuietly(status < 400 ? conn.getInputStream() : conn.getErrorStream());
                if (status < 300) {
                    return null;
                }
                if (status == 401 || status == 403) {
                    return "fll server " + endpoint + " refused the token (HTTP " + status
                        + "): check spark.fll.token";
                }
                if (status == 400 || status == 413 || status == 422) {
                    return "rejected by fll server " + endpoint + " (HTTP " + status + ")";
                }
                return "fll server " + endpoint + " answered HTTP " + status;
            } catch (IllegalArgumentException | IOException e) {
                return "cannot reach fll server " + endpoint + " (" + describe(e)
                    + "): check spark.fll.url";
            } finally {
                if (conn != null) {
                    conn.disconnect();
                }
            }
        }

        private static void drainQuietly(InputStream in) {
            if (in == null) {
                return;
            }
            try (InputStream s = in) {
                s.readAllBytes();
            } catch (IOException e) {
                // the status was all we needed
            }
        }

        private void spool(Pending pending) {
            String event = render(pending);
            if (event != null) {
                spool(event);
            }
        }

        private void spool(String event) {
            try {
                ensureSpool();
                String name = String.format("%013d-%s", System.currentTimeMillis(),
                    UUID.randomUUID());
                Path tmp = spool.resolve(name + ".tmp");
                Files.write(tmp, event.getBytes(StandardCharsets.UTF_8));
                Files.move(tmp, spool.resolve(name + ".json"), StandardCopyOption.ATOMIC_MOVE);
                spooled = true;
            } catch (IOException | RuntimeException e) {
                problem("cannot write the fll spool " + spool + " (" + describe(e)
                    + "); lineage events are lost");
            }
        }

        /** This server's sub-directory (owner only) and its "server" file naming the URL. */
        private void ensureSpool() throws IOException {
            Path server = spool.resolve("server");
            if (Files.exists(server)) {
                return;
            }
            Files.createDirectories(root);
            try {
                Files.createDirectory(spool,
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            } catch (java.nio.file.FileAlreadyExistsException e) {
                // another application made it
            } catch (UnsupportedOperationException e) {
                Files.createDirectories(spool);  // not a POSIX file system
            }
            Path tmp = spool.resolve("server." + UUID.randomUUID() + ".tmp");
            Files.write(tmp, (base + "\n").getBytes(StandardCharsets.UTF_8));
            Files.move(tmp, server, StandardCopyOption.ATOMIC_MOVE);
        }

        /** Logs a problem once per kind for the life of the JVM. */
        void problem(String message) {
            String kind = message.replaceAll("\\(.*", "");
            if (logged.add(kind)) {
                LOG.warn("fll: " + message);
            }
        }

        /**
         * JVM exit: post what is queued within the exit budget (spark.fll.exitTimeout),
         * oldest first, and spool the rest. Runs after Spark's listener bus has stopped,
         * so every write the application made has been submitted by now.
         */
        private void drain() {
            long deadline = System.currentTimeMillis() + exitBudgetMs;
            closing = true;
            queue.offer(STOP);  // an idle sender returns now, not at its next wake-up
            try {  // let an event in flight finish: killing the post would lose it
                thread.join(Math.max(1L, exitBudgetMs));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            String stuck;
            synchronized (this) {
                stuck = thread.isAlive() ? inFlight : null;
                if (stuck != null) {
                    inFlight = null;
                }
            }
            if (stuck != null) {  // still posting at the deadline: kept (the run id makes a
                spool(stuck);     // second delivery a no-op if the first one landed)
            }
            Pending pending;
            while ((pending = queue.poll()) != null) {
                if (pending == STOP) {
                    continue;
                }
                String event = render(pending);
                if (event == null) {
                    continue;
                }
                long left = deadline - System.currentTimeMillis();
                if (left > 0 && System.currentTimeMillis() >= downUntil) {
                    int ms = (int) Math.min(left, READ_MS);
                    String problem = post(event.getBytes(StandardCharsets.UTF_8),
                        Math.min(ms, CONNECT_MS), ms);
                    if (problem == null) {
                        continue;
                    }
                    down(problem);
                }
                spool(event);
            }
        }
    }
}
