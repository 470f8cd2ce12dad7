package livestate.engines;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The example company's warehouse as a real {@code livestate serve} fills it: {@code livestate demo}
 * (the server, the simulated modules, both agents and an approving person, over HTTP) runs for a
 * while, then every table is compacted and {@code livestate expire} runs, so the warehouse holds
 * APPEND and COMPACT snapshots, expired history, changelog files and the tags proposals pinned.
 *
 * <p>Built once per binary under {@code target/company} and reused by every engine's run.
 */
public final class Company {
    public static final List<String> STATE_TABLES = List.of("stock", "work_queue", "open_orders",
            "supplier_risk", "supplier_items", "approval_inbox", "reservations_total", "item_first_seen");

    /** Which merge engine each state table uses (examples/company/tables.toml). */
    public static String mergeEngine(String table) {
        return switch (table) {
            case "stock" -> "partial-update";
            case "reservations_total" -> "aggregation";
            case "item_first_seen" -> "first-row";
            default -> "deduplicate";
        };
    }

    public static List<String> primaryKey(String table) {
        return switch (table) {
            case "stock" -> List.of("item", "location");
            case "work_queue" -> List.of("job_id");
            case "open_orders" -> List.of("order_id", "line");
            case "supplier_risk" -> List.of("supplier");
            case "supplier_items" -> List.of("item", "supplier");
            case "approval_inbox" -> List.of("proposal_id");
            case "reservations_total", "item_first_seen" -> List.of("item");
            default -> throw new IllegalArgumentException(table);
        };
    }

    private static Path built;

    private Company() {}

    /** The directory ({@code DIR/warehouse} is the Paimon warehouse). */
    public static synchronized Path dir() {
        if (built != null) return built;
        Path dir = Path.of("target", "company").toAbsolutePath();
        Path done = dir.resolveSibling("company.done");
        String signature = signature();
        try {
            if (Files.exists(done) && Files.readString(done).equals(signature) && Files.isDirectory(dir)) {
                built = dir;
                return dir;
            }
            Files.deleteIfExists(done);
            // demo refuses a directory it did not make; start from nothing.
            deleteTree(dir);
            Files.createDirectories(dir.getParent());
            // A small company (60 items) so shortages, proposals and approvals happen within the run.
            Livestate.run(Duration.ofMinutes(5), "demo", "--dir", dir.toString(), "--duration", "25s",
                    "--approve", "auto", "--items", "60", "--rate", "40",
                    "--listen", "127.0.0.1:" + Livestate.freePort(), "--blocked-after", "2s");
            // Compaction by hand: a full one for the first-row table (its rows are visible to
            // readers only outside level 0) and two of the others, what universal compaction
            // picks for the rest; then expiry and orphan removal.
            for (String t : STATE_TABLES) {
                boolean full = List.of("item_first_seen", "stock", "reservations_total").contains(t);
                List<String> args = new ArrayList<>(List.of("compact", "--dir", dir.toString(), t));
                if (full) args.add("--full");
                Livestate.run(args.toArray(String[]::new));
            }
            Livestate.run("compact", "--dir", dir.toString(), "record.events");
            Livestate.run("expire", "--dir", dir.toString(), "--orphans-older-than", "0s");
            Files.writeString(done, signature);
            built = dir;
            return dir;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    public static Path warehouse() {
        return dir().resolve("warehouse");
    }

    /** The binary's path, size and time, so a rebuilt livestate builds the warehouse anew. */
    static String signature() {
        Path bin = Livestate.binary();
        try {
            return bin + " " + Files.size(bin) + " " + Files.getLastModifiedTime(bin);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    public static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path f : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(f);
            }
        }
    }

    /** Snapshot ids present in a table's snapshot directory, ascending. */
    public static List<Long> snapshots(Path warehouse, String db, String table) {
        Path d = warehouse.resolve(db + ".db").resolve(table).resolve("snapshot");
        try (Stream<Path> s = Files.list(d)) {
            return s.map(p -> p.getFileName().toString())
                    .filter(n -> n.startsWith("snapshot-"))
                    .map(n -> Long.parseLong(n.substring("snapshot-".length())))
                    .sorted()
                    .toList();
        } catch (IOException e) {
            return List.of();
        }
    }

    /** Tag names present in a table's tag directory. */
    public static List<String> tags(Path warehouse, String table) {
        Path d = warehouse.resolve("state.db").resolve(table).resolve("tag");
        if (!Files.isDirectory(d)) return List.of();
        try (Stream<Path> s = Files.list(d)) {
            return s.map(p -> p.getFileName().toString())
                    .filter(n -> n.startsWith("tag-"))
                    .map(n -> n.substring("tag-".length()))
                    .sorted()
                    .toList();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
