package livestate.engines;

import com.fasterxml.jackson.databind.JsonNode;

import java.math.BigDecimal;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * Rows as canonical text, so a row an engine read compares with the row {@code livestate read --json}
 * printed: every column {@code name=value} in the table's order, values by column type (decimals by
 * value, timestamps as {@code yyyy-MM-ddTHH:mm:ss.SSS} UTC wall time, as livestate prints them).
 */
public final class Rows {
    private Rows() {}

    /** Column types as far as comparison needs them. */
    public enum Kind { STRING, INT, DECIMAL, BOOL, TIMESTAMP }

    public static final DateTimeFormatter TS = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS");

    /** A table's columns and their kinds, in order. */
    public record Columns(List<String> names, List<Kind> kinds) {
        public Kind kind(String column) {
            int i = names.indexOf(column);
            if (i < 0) throw new IllegalArgumentException("no column " + column + " in " + names);
            return kinds.get(i);
        }
    }

    /** One value an engine returned (String, Long/Integer, BigDecimal, Boolean, LocalDateTime or null), as text. */
    public static String engineValue(Kind kind, Object v) {
        if (v == null) return "null";
        switch (kind) {
            case STRING:
                return "'" + v + "'";
            case INT:
                return Long.toString(((Number) v).longValue());
            case DECIMAL:
                return decimal(v instanceof BigDecimal b ? b : new BigDecimal(v.toString()));
            case BOOL:
                return v.toString();
            case TIMESTAMP:
                if (v instanceof LocalDateTime t) return TS.format(t);
                if (v instanceof java.sql.Timestamp t) return TS.format(t.toLocalDateTime());
                if (v instanceof java.time.Instant t) return TS.format(LocalDateTime.ofInstant(t, java.time.ZoneOffset.UTC));
                throw new IllegalArgumentException("timestamp of class " + v.getClass());
            default:
                throw new IllegalStateException();
        }
    }

    /** One value of {@code livestate read --json} (or {@code sql --json}), as text. */
    public static String livestateValue(Kind kind, JsonNode v) {
        if (v == null || v.isNull()) return "null";
        switch (kind) {
            case STRING:
                return "'" + v.asText() + "'";
            case INT:
                return Long.toString(v.asLong());
            case DECIMAL:
                return decimal(new BigDecimal(v.asText()));
            case BOOL:
                return Boolean.toString(v.asBoolean());
            case TIMESTAMP:
                return TS.format(LocalDateTime.parse(v.asText()));
            default:
                throw new IllegalStateException();
        }
    }

    private static String decimal(BigDecimal d) {
        return d.signum() == 0 ? "0" : d.stripTrailingZeros().toPlainString();
    }

    /** An engine's row (values in {@code columns}' order) as canonical text. */
    public static String engineRow(Columns columns, List<Object> values) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < columns.names().size(); i++) {
            if (i > 0) b.append(" | ");
            b.append(columns.names().get(i)).append('=').append(engineValue(columns.kinds().get(i), values.get(i)));
        }
        return b.toString();
    }

    /** The rows of a {@code livestate read --json} answer ({@code {"receipt":..,"rows":[{col: value}]}}). */
    public static List<String> livestateRows(Columns columns, JsonNode answer) {
        JsonNode rows = answer.has("rows") ? answer.get("rows") : answer;
        List<String> out = new ArrayList<>();
        for (JsonNode r : rows) {
            out.add(livestateRow(columns, r));
        }
        return out;
    }

    public static String livestateRow(Columns columns, JsonNode row) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < columns.names().size(); i++) {
            String c = columns.names().get(i);
            if (!row.has(c)) {
                throw new IllegalStateException("livestate's row has no column " + c + ": " + row);
            }
            if (i > 0) b.append(" | ");
            b.append(c).append('=').append(livestateValue(columns.kinds().get(i), row.get(c)));
        }
        return b.toString();
    }

    /**
     * Asserts both lists hold the same rows, each as often (order ignored); the failure names
     * {@code what} and lists up to 10 rows missing and 10 unexpected.
     */
    public static void assertSameRows(String what, List<String> expected, List<String> actual) {
        Map<String, Integer> diff = new TreeMap<>();
        expected.forEach(r -> diff.merge(r, 1, Integer::sum));
        actual.forEach(r -> diff.merge(r, -1, Integer::sum));
        diff.values().removeIf(n -> n == 0);
        if (diff.isEmpty()) return;
        List<String> missing = new ArrayList<>();
        List<String> extra = new ArrayList<>();
        diff.forEach((r, n) -> (n > 0 ? missing : extra).add((Math.abs(n) > 1 ? Math.abs(n) + "x " : "") + r));
        fail(what + ": " + expected.size() + " rows from livestate, " + actual.size() + " from the engine; "
                + missing.size() + " livestate rows missing from the engine, e.g.\n  "
                + String.join("\n  ", missing.subList(0, Math.min(10, missing.size())))
                + "\n" + extra.size() + " engine rows livestate does not have, e.g.\n  "
                + String.join("\n  ", extra.subList(0, Math.min(10, extra.size()))));
    }

    /** The primary key part of a canonical row. */
    public static String key(Columns columns, List<String> primaryKey, List<Object> values) {
        Map<String, String> k = new LinkedHashMap<>();
        for (String c : primaryKey) {
            int i = columns.names().indexOf(c);
            k.put(c, engineValue(columns.kinds().get(i), values.get(i)));
        }
        return k.toString();
    }

    public static <T> List<T> sorted(List<T> l, java.util.Comparator<T> c) {
        List<T> s = new ArrayList<>(l);
        s.sort(c);
        return Collections.unmodifiableList(s);
    }
}
