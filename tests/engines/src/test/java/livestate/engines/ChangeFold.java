package livestate.engines;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * Applies a changelog, change by change, to a table's rows and checks each change against the
 * rows as they stand: an insert ({@code +I}) of a key not there, an update's before ({@code -U})
 * equal to the current row and followed by its after ({@code +U}) for the same key, a delete
 * ({@code -D}) carrying the row it removes. A change delivered twice, lost or out of order breaks
 * one of these, or leaves rows that differ from livestate's at the end.
 */
public final class ChangeFold {
    private final Rows.Columns columns;
    private final List<String> primaryKey;
    private final String what;
    private final Map<String, String> rows = new HashMap<>();
    private String pendingBefore;
    private int applied;

    public ChangeFold(String what, Rows.Columns columns, List<String> primaryKey, List<String> initial) {
        this.what = what;
        this.columns = columns;
        this.primaryKey = primaryKey;
        for (String r : initial) {
            if (rows.put(key(r), r) != null) fail(what + ": two initial rows with key " + key(r));
        }
    }

    /** Applies one change: {@code kind} is {@code +I}, {@code -U}, {@code +U} or {@code -D}; {@code row} canonical. */
    public void apply(String kind, String row) {
        String k = key(row);
        String at = what + ", change " + applied + " (" + kind + " " + row + ")";
        if (pendingBefore != null && !kind.equals("+U")) {
            fail(at + ": the update before " + pendingBefore + " has no after");
        }
        switch (kind) {
            case "+I" -> {
                if (rows.containsKey(k)) fail(at + ": inserts key " + k + ", which holds " + rows.get(k));
                rows.put(k, row);
            }
            case "-U" -> {
                String cur = rows.get(k);
                if (!row.equals(cur)) fail(at + ": the before image differs from the current row " + cur);
                pendingBefore = row;
            }
            case "+U" -> {
                if (pendingBefore == null) fail(at + ": an after with no before");
                if (!key(pendingBefore).equals(k)) fail(at + ": the after's key differs from the before " + pendingBefore);
                pendingBefore = null;
                rows.put(k, row);
            }
            case "-D" -> {
                String cur = rows.get(k);
                if (!row.equals(cur)) fail(at + ": deletes " + row + " but the current row is " + cur);
                rows.remove(k);
            }
            default -> fail(at + ": unknown change kind");
        }
        applied++;
    }

    public int applied() {
        return applied;
    }

    /** The rows after every change applied so far. */
    public List<String> rows() {
        if (pendingBefore != null) fail(what + ": the changelog ends inside an update (before " + pendingBefore + ")");
        return new ArrayList<>(rows.values());
    }

    /** The key columns' part of a canonical row ({@link Rows}). */
    public String key(String row) {
        StringBuilder k = new StringBuilder();
        List<String> names = columns.names();
        for (String c : primaryKey) {
            int i = names.indexOf(c);
            String start = (i == 0 ? "" : " | ") + c + "=";
            int from = i == 0 ? 0 : row.indexOf(start);
            if (i == 0 && !row.startsWith(start)) from = -1;
            if (from < 0) throw new IllegalArgumentException("no " + c + " in " + row);
            from += start.length();
            int to = i + 1 < names.size() ? row.indexOf(" | " + names.get(i + 1) + "=", from) : row.length();
            k.append(c).append('=').append(row, from, to).append(';');
        }
        return k.toString();
    }
}
