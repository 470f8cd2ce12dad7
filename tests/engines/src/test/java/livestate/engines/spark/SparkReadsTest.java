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

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Spark SQL in local mode with Paimon's Spark catalog reads livestate's warehouse. */
class SparkReadsTest {
    static SparkSession spark;

    @BeforeAll
    static void start() {
        spark = SparkSession.builder()
                .master("local[2]")
                .appName("livestate-engines")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.sql.catalog.paimon", "org.apache.paimon.spark.SparkCatalog")
                .config("spark.sql.catalog.paimon.warehouse", Company.warehouse().toUri().toString())
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
        Rows.assertSameRows("Spark: " + table + " at " + at,
                Rows.livestateRows(cols, Livestate.read(Company.dir(), table, at)), rows(d, cols));
    }

    @Test
    void every_state_table_latest() {
        for (String table : Company.STATE_TABLES) sameAsLivestate(table, At.LATEST);
    }

    @Test
    void time_travel_by_snapshot_id_and_by_tag() {
        int n = 0;
        for (String table : Company.STATE_TABLES) {
            List<Long> ids = Company.snapshots(Company.warehouse(), "state", table);
            sameAsLivestate(table, At.snapshot(ids.get(0)));
            n++;
            for (String tag : Company.tags(Company.warehouse(), table)) {
                sameAsLivestate(table, At.tag(tag));
                n++;
            }
        }
        assertTrue(n > Company.STATE_TABLES.size(), "no tag was compared");
    }

    @Test
    void an_aggregate_equals_livestate_sql() {
        String q = "SELECT location, count(*) AS n, sum(on_hand) AS on_hand, sum(reserved) AS reserved "
                + "FROM %s GROUP BY location";
        Dataset<org.apache.spark.sql.Row> d = spark.sql(String.format(q, "paimon.state.stock"));
        Columns cols = columns(d);
        List<String> actual = rows(d, cols);
        JsonNode ours = Livestate.sql(Company.dir(), String.format(q, "stock"));
        Rows.assertSameRows("Spark's aggregate of stock and livestate sql's", Rows.livestateRows(cols, ours), actual);
        assertFalse(actual.isEmpty());
    }
}
