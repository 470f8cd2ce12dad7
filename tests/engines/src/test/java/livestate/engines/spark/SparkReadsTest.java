package livestate.engines.spark;

import com.fasterxml.jackson.databind.JsonNode;
import livestate.engines.Company;
import livestate.engines.Livestate;
import livestate.engines.Livestate.At;
import livestate.engines.Rows;
import livestate.engines.Rows.Columns;
import livestate.engines.Rows.Kind;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.node.ObjectNode;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.stream.Stream;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Spark SQL in local mode with Paimon's Spark catalog reads livestate's warehouse.
 *
 * <p>The only Paimon Spark connector the Maven repository serves is 0.9.0, which predates thin
 * data files: merging a key's rows across files it asks each file for {@code _KEY_<k>} columns
 * livestate's files do not have ("Required column is missing in data file"). It reads a version
 * whose every bucket is one sorted run at the top level without deletes, which it reads without
 * merging. So Spark reads a copy of the company where every table was fully compacted after the
 * last change, and a tag a proposal pinned on such a version (docs/scale-out.md).
 */
class SparkReadsTest {
    static SparkSession spark;
    static Path dir;
    static String stockTag;

    /** A copy of {@link Company} with every state table fully compacted and a proposal's tag on stock. */
    static Path compactedCompany() throws Exception {
        Path copy = Path.of("target", "company-compacted").toAbsolutePath();
        Company.deleteTree(copy);
        Path src = Company.dir();
        try (Stream<Path> files = Files.walk(src)) {
            for (Path f : files.toList()) {
                Path to = copy.resolve(src.relativize(f).toString());
                if (Files.isDirectory(f)) Files.createDirectories(to);
                else Files.copy(f, to);
            }
        }
        String agent = Livestate.tokenAdd(copy, "agent:spark-check");
        compactAll(copy);
        // The proposal cites stock's full compaction, so the tag pins a version of one run.
        List<Long> ids = Company.snapshots(copy.resolve("warehouse"), "state", "stock");
        long compacted = ids.get(ids.size() - 1);
        JsonNode row = Livestate.read(copy, "stock", At.snapshot(compacted)).path("rows").get(0);
        try (Livestate.Server s = Livestate.Server.start(copy)) {
            ObjectNode p = Livestate.JSON.createObjectNode();
            p.put("kind", "replenishment_order");
            p.put("module", "procurement");
            p.put("summary", "pin compacted stock for Spark");
            p.putObject("action").put("item", row.path("item").asText());
            ObjectNode src0 = p.putArray("sources").addObject();
            src0.put("table", "stock");
            src0.put("snapshot_id", compacted);
            src0.putArray("keys").addObject().put("item", row.path("item").asText()).put("location", row.path("location").asText());
            src0.putArray("rows").add(row);
            p.putObject("rule").put("name", "engines-test").put("version", "1").put("text", "cite");
            p.putObject("risk").put("level", "low");
            stockTag = s.post("/v1/proposals", agent, p.toString(), 201).path("tags").get(0).path("tag").asText();
        }
        // serve committed what the demo left pending, and the proposal's event: compact again,
        // so every table's latest is one run too.
        compactAll(copy);
        return copy;
    }

    static void compactAll(Path d) {
        for (String t : Company.STATE_TABLES) Livestate.run("compact", "--dir", d.toString(), t, "--full");
    }

    @BeforeAll
    static void start() throws Exception {
        dir = compactedCompany();
        spark = SparkSession.builder()
                .master("local[2]")
                .appName("livestate-engines")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.sql.catalog.paimon", "org.apache.paimon.spark.SparkCatalog")
                .config("spark.sql.catalog.paimon.warehouse", dir.resolve("warehouse").toUri().toString())
                .config("spark.sql.extensions", "org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions")
                .getOrCreate();
    }

    @AfterAll
    static void stop() {
        if (spark != null) spark.stop();
    }

    static Kind kind(DataType t) {
        if (t.equals(DataTypes.StringType)) return Kind.STRING;
        if (t.equals(DataTypes.LongType) || t.equals(DataTypes.IntegerType)) return Kind.INT;
        if (t instanceof DecimalType) return Kind.DECIMAL;
        if (t.equals(DataTypes.BooleanType)) return Kind.BOOL;
        if (t.equals(DataTypes.TimestampType) || t.equals(DataTypes.TimestampNTZType)) return Kind.TIMESTAMP;
        throw new IllegalArgumentException("type " + t + " is not one livestate writes");
    }

    static Columns columns(Dataset<org.apache.spark.sql.Row> d) {
        List<String> names = new ArrayList<>();
        List<Kind> kinds = new ArrayList<>();
        for (StructField f : d.schema().fields()) {
            names.add(f.name());
            kinds.add(kind(f.dataType()));
        }
        return new Columns(names, kinds);
    }

    static List<String> rows(Dataset<org.apache.spark.sql.Row> d, Columns cols) {
        List<String> out = new ArrayList<>();
        for (org.apache.spark.sql.Row r : d.collectAsList()) {
            List<Object> v = new ArrayList<>();
            for (int i = 0; i < r.length(); i++) v.add(r.get(i));
            out.add(Rows.engineRow(cols, v));
        }
        return out;
    }

    static void sameAsLivestate(String table, At at) {
        String version = at.snapshot() != null ? " VERSION AS OF " + at.snapshot()
                : at.tag() != null ? " VERSION AS OF '" + at.tag() + "'" : "";
        Dataset<org.apache.spark.sql.Row> d = spark.sql("SELECT * FROM paimon.state." + table + version);
        Columns cols = columns(d);
        List<String> actual;
        try {
            actual = rows(d, cols);
        } catch (Exception e) {
            throw new AssertionError("Spark could not read " + table + " at " + at + ": " + e.getMessage().lines().findFirst().orElse(""), e);
        }
        Rows.assertSameRows("Spark: " + table + " at " + at, Rows.livestateRows(cols, Livestate.read(dir, table, at)), actual);
    }

    @Test
    void every_state_table_latest() {
        for (String table : Company.STATE_TABLES) sameAsLivestate(table, At.LATEST);
    }

    @Test
    void time_travel_by_snapshot_id_and_by_tag() {
        for (String table : Company.STATE_TABLES) {
            // The full compaction's snapshot: every row of the table in one sorted run.
            List<Long> ids = Company.snapshots(dir.resolve("warehouse"), "state", table);
            sameAsLivestate(table, At.snapshot(ids.get(ids.size() - 1)));
        }
        assertTrue(stockTag.startsWith("proposal-p"), stockTag);
        sameAsLivestate("stock", At.tag(stockTag));
    }

    @Test
    void an_aggregate_equals_livestate_sql() {
        String q = "SELECT location, count(*) AS n, sum(on_hand) AS on_hand, sum(reserved) AS reserved "
                + "FROM %s GROUP BY location";
        Dataset<org.apache.spark.sql.Row> d = spark.sql(String.format(q, "paimon.state.stock"));
        Columns cols = columns(d);
        List<String> actual = rows(d, cols);
        JsonNode ours = Livestate.sql(dir, String.format(q, "stock"));
        Rows.assertSameRows("Spark's aggregate of stock and livestate sql's", Rows.livestateRows(cols, ours), actual);
        assertFalse(actual.isEmpty());
    }
}
