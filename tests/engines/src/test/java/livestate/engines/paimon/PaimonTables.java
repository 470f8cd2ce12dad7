package livestate.engines.paimon;

import livestate.engines.Livestate.At;
import livestate.engines.Rows;
import livestate.engines.Rows.Columns;
import livestate.engines.Rows.Kind;

import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.options.Options;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.StreamTableScan;
import org.apache.paimon.table.source.TableRead;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.RowKind;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** livestate's warehouse through Java Paimon's own table API (the version on the class path). */
public final class PaimonTables implements AutoCloseable {
    private final Catalog catalog;

    public PaimonTables(Path warehouse) {
        Options o = new Options();
        o.set("warehouse", warehouse.toUri().toString());
        this.catalog = CatalogFactory.createCatalog(CatalogContext.create(o));
    }

    public Table table(String db, String name) {
        try {
            return catalog.getTable(Identifier.create(db, name));
        } catch (Catalog.TableNotExistException e) {
            throw new IllegalStateException(e);
        }
    }

    public static Table at(Table t, At at) {
        Map<String, String> o = new HashMap<>();
        if (at.snapshot() != null) o.put("scan.snapshot-id", at.snapshot().toString());
        if (at.tag() != null) o.put("scan.tag-name", at.tag());
        return o.isEmpty() ? t : t.copy(o);
    }

    public static Columns columns(Table t) {
        List<String> names = new ArrayList<>();
        List<Kind> kinds = new ArrayList<>();
        for (DataField f : t.rowType().getFields()) {
            names.add(f.name());
            kinds.add(kind(f.type()));
        }
        return new Columns(names, kinds);
    }

    static Kind kind(DataType t) {
        switch (t.getTypeRoot()) {
            case CHAR:
            case VARCHAR:
                return Kind.STRING;
            case TINYINT:
            case SMALLINT:
            case INTEGER:
            case BIGINT:
                return Kind.INT;
            case DECIMAL:
                return Kind.DECIMAL;
            case BOOLEAN:
                return Kind.BOOL;
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return Kind.TIMESTAMP;
            default:
                throw new IllegalArgumentException("type " + t + " is not one livestate writes");
        }
    }

    /** Every row of the table's current version (batch read). */
    public static List<String> read(Table t) {
        Columns cols = columns(t);
        List<String> out = new ArrayList<>();
        ReadBuilder rb = t.newReadBuilder();
        List<Split> splits = rb.newScan().plan().splits();
        each(rb.newRead(), splits, t, (kind, values) -> out.add(Rows.engineRow(cols, values)));
        return out;
    }

    /** One change of a changelog: its kind and the row's values. */
    public record Change(RowKind kind, List<Object> values) {}

    /**
     * The changelog of every snapshot after {@code after} up to and including {@code upTo}, as
     * Paimon's streaming scan hands it out (one plan per snapshot, in order).
     */
    public static List<Change> changelog(Table t, long after, long upTo) {
        Table from = t.copy(Map.of("scan.mode", "from-snapshot", "scan.snapshot-id", Long.toString(after + 1)));
        ReadBuilder rb = from.newReadBuilder();
        StreamTableScan scan = rb.newStreamScan();
        TableRead read = rb.newRead();
        List<Change> out = new ArrayList<>();
        for (int guard = 0; guard < 100_000; guard++) {
            Long next = scan.checkpoint();
            if (next != null && next > upTo) return out;
            List<Split> splits = scan.plan().splits();
            each(read, splits, t, (kind, values) -> out.add(new Change(kind, values)));
            Long after2 = scan.checkpoint();
            if (splits.isEmpty() && (after2 == null || after2.equals(next))) {
                throw new IllegalStateException("the streaming scan stopped at snapshot " + after2 + " before " + upTo);
            }
        }
        throw new IllegalStateException("no end to the streaming scan");
    }

    interface RowSink {
        void row(RowKind kind, List<Object> values);
    }

    private static void each(TableRead read, List<Split> splits, Table t, RowSink sink) {
        List<DataField> fields = t.rowType().getFields();
        List<InternalRow.FieldGetter> getters = new ArrayList<>();
        for (int i = 0; i < fields.size(); i++) {
            getters.add(InternalRow.createFieldGetter(fields.get(i).type(), i));
        }
        try (RecordReader<InternalRow> r = read.createReader(splits)) {
            r.forEachRemaining(row -> {
                List<Object> values = new ArrayList<>();
                for (InternalRow.FieldGetter g : getters) {
                    values.add(plain(g.getFieldOrNull(row)));
                }
                sink.row(row.getRowKind(), values);
            });
        } catch (Exception e) {
            throw new IllegalStateException("reading " + t.name() + ": " + e, e);
        }
    }

    static Object plain(Object v) {
        if (v instanceof BinaryString s) return s.toString();
        if (v instanceof Decimal d) return d.toBigDecimal();
        if (v instanceof Timestamp ts) return ts.toLocalDateTime();
        return v;
    }

    @Override
    public void close() throws Exception {
        catalog.close();
    }
}
