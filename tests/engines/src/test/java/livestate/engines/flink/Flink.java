package livestate.engines.flink;

import livestate.engines.Rows;
import livestate.engines.Rows.Columns;
import livestate.engines.Rows.Kind;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.catalog.Column;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Flink's table API on a local mini cluster, with livestate's warehouse as the Paimon catalog {@code livestate}. */
final class Flink {
    private Flink() {}

    static TableEnvironment batch(Path warehouse) {
        TableEnvironment t = TableEnvironment.create(EnvironmentSettings.newInstance().inBatchMode().build());
        init(t, warehouse);
        return t;
    }

    static StreamTableEnvironment streaming(Path warehouse) {
        Configuration conf = new Configuration();
        conf.setString("execution.checkpointing.interval", "1s");
        conf.setString("parallelism.default", "1");
        conf.setString("taskmanager.numberOfTaskSlots", "8");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        StreamTableEnvironment t = StreamTableEnvironment.create(env);
        init(t, warehouse);
        return t;
    }

    private static void init(TableEnvironment t, Path warehouse) {
        t.getConfig().set("table.local-time-zone", "UTC");
        t.executeSql("CREATE CATALOG livestate WITH ('type' = 'paimon', 'warehouse' = '" + warehouse.toUri() + "')");
    }

    static Columns columns(TableResult r) {
        List<String> names = new ArrayList<>();
        List<Kind> kinds = new ArrayList<>();
        for (Column c : r.getResolvedSchema().getColumns()) {
            names.add(c.getName());
            kinds.add(kind(c.getDataType().getLogicalType()));
        }
        return new Columns(names, kinds);
    }

    static Kind kind(LogicalType t) {
        return switch (t.getTypeRoot()) {
            case CHAR, VARCHAR -> Kind.STRING;
            case TINYINT, SMALLINT, INTEGER, BIGINT -> Kind.INT;
            case DECIMAL -> Kind.DECIMAL;
            case BOOLEAN -> Kind.BOOL;
            case TIMESTAMP_WITHOUT_TIME_ZONE -> Kind.TIMESTAMP;
            default -> throw new IllegalArgumentException("type " + t + " is not one livestate writes");
        };
    }

    static List<Object> values(Row r) {
        List<Object> v = new ArrayList<>();
        for (int i = 0; i < r.getArity(); i++) v.add(r.getField(i));
        return v;
    }

    /** Every row of a bounded query, as canonical text. */
    static List<String> rows(TableResult r) {
        Columns cols = columns(r);
        List<String> out = new ArrayList<>();
        try (CloseableIterator<Row> it = r.collect()) {
            it.forEachRemaining(row -> out.add(Rows.engineRow(cols, values(row))));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        return out;
    }
}
