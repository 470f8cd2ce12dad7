package livestate.engines.reader;

import com.fasterxml.jackson.databind.JsonNode;
import livestate.engines.ChangeFold;
import livestate.engines.Company;
import livestate.engines.Livestate;
import livestate.engines.Livestate.At;
import livestate.engines.Rows;
import livestate.engines.paimon.PaimonTables;
import livestate.engines.paimon.PaimonTables.Change;

import org.apache.paimon.table.Table;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Java Paimon (the version on the class path: 2.0.0 or 1.0.1) reads every table of a warehouse a
 * real {@code livestate serve} filled, and every read equals {@code livestate read --json}.
 */
class JavaReaderTest {
    static Path dir;
    static PaimonTables paimon;

    @BeforeAll
    static void warehouse() {
        dir = Company.dir();
        paimon = new PaimonTables(Company.warehouse());
        System.out.println("Java Paimon " + System.getProperty("livestate.paimon") + " on " + dir);
    }

    @AfterAll
    static void close() throws Exception {
        if (paimon != null) paimon.close();
    }

    static void sameAsLivestate(String table, At at) {
        Table t = PaimonTables.at(paimon.table("state", table), at);
        Rows.Columns cols = PaimonTables.columns(t);
        List<String> expected = Rows.livestateRows(cols, Livestate.read(dir, table, at));
        List<String> actual = PaimonTables.read(t);
        Rows.assertSameRows(table + " (" + Company.mergeEngine(table) + ") at " + at, expected, actual);
    }

    @Test
    void the_latest_snapshot_of_every_state_table_after_compaction_and_expiry() {
        for (String table : Company.STATE_TABLES) {
            sameAsLivestate(table, At.LATEST);
        }
        // The company did business: the comparison was not of empty tables.
        assertTrue(Livestate.read(dir, "stock", At.LATEST).path("rows").size() > 50);
        assertTrue(Livestate.read(dir, "item_first_seen", At.LATEST).path("rows").size() > 10);
    }

    @Test
    void every_retained_snapshot_of_every_state_table_by_id() {
        int compared = 0;
        for (String table : Company.STATE_TABLES) {
            List<Long> ids = Company.snapshots(Company.warehouse(), "state", table);
            assertFalse(ids.isEmpty(), table + " has no snapshot");
            for (long id : ids) {
                sameAsLivestate(table, At.snapshot(id));
                compared++;
            }
        }
        assertTrue(compared > Company.STATE_TABLES.size(), "only " + compared + " snapshots retained");
    }

    @Test
    void every_tag_a_proposal_pinned() {
        List<String> seen = new ArrayList<>();
        for (String table : Company.STATE_TABLES) {
            for (String tag : Company.tags(Company.warehouse(), table)) {
                assertTrue(tag.matches("proposal-p[0-9a-f]+-s[0-9]+"), "unexpected tag " + tag);
                sameAsLivestate(table, At.tag(tag));
                seen.add(table + "/" + tag);
            }
        }
        assertFalse(seen.isEmpty(), "the demo's proposals pinned no tag");
        System.out.println("compared " + seen.size() + " tags: " + seen);
    }

    @Test
    void the_changelog_between_two_snapshots_of_every_merge_engine() {
        for (String table : List.of("stock", "open_orders", "reservations_total", "approval_inbox", "work_queue")) {
            changelogBetweenOldestAndLatest(table);
        }
    }

    static void changelogBetweenOldestAndLatest(String table) {
        List<Long> ids = Company.snapshots(Company.warehouse(), "state", table);
        long from = ids.get(0);
        long to = ids.get(ids.size() - 1);
        assertTrue(to > from, table + ": one snapshot only");
        Table t = paimon.table("state", table);
        Rows.Columns cols = PaimonTables.columns(t);
        List<String> before = Rows.livestateRows(cols, Livestate.read(dir, table, At.snapshot(from)));
        List<String> after = Rows.livestateRows(cols, Livestate.read(dir, table, At.snapshot(to)));
        String what = table + " changelog after snapshot " + from + " to " + to;
        ChangeFold fold = new ChangeFold(what, cols, Company.primaryKey(table), before);
        List<Change> changes = PaimonTables.changelog(t, from, to);
        for (Change c : changes) {
            fold.apply(c.kind().shortString(), Rows.engineRow(cols, c.values()));
        }
        Rows.assertSameRows(what + ", applied to the rows at " + from, after, fold.rows());
        if (!before.equals(after)) {
            assertTrue(fold.applied() > 0, what + ": the rows changed but no change was read");
        }
        System.out.println(what + ": " + changes.size() + " changes");
    }

    @Test
    void the_record_archive() {
        Table t = paimon.table("record", "events");
        Rows.Columns cols = PaimonTables.columns(t);
        List<String> actual = PaimonTables.read(t);
        JsonNode expected = Livestate.read(dir, "record.events", At.LATEST);
        Rows.assertSameRows("record.events", Rows.livestateRows(cols, expected), actual);
        assertTrue(actual.size() > 100, "only " + actual.size() + " events");
    }
}
