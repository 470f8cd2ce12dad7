package livestate.engines.flink;

import com.fasterxml.jackson.databind.JsonNode;
import livestate.engines.ChangeFold;
import livestate.engines.Company;
import livestate.engines.Events;
import livestate.engines.LiveCompany;
import livestate.engines.Livestate;
import livestate.engines.Livestate.At;
import livestate.engines.Rows;
import livestate.engines.Rows.Columns;

import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** Flink (mini cluster, Paimon's Flink connector) reads livestate's tables and streams from them. */
class FlinkReadsTest {

    @Test
    void a_batch_select_of_every_state_table_equals_livestate_read() {
        TableEnvironment t = Flink.batch(Company.warehouse());
        for (String table : Company.STATE_TABLES) {
            TableResult r = t.executeSql("SELECT * FROM livestate.state." + table);
            Columns cols = Flink.columns(r);
            List<String> actual = Flink.rows(r);
            List<String> expected = Rows.livestateRows(cols, Livestate.read(Company.dir(), table, At.LATEST));
            Rows.assertSameRows("Flink batch SELECT * FROM " + table, expected, actual);
            if (table.equals("stock")) assertTrue(actual.size() > 50, "stock has " + actual.size() + " rows");
        }
    }

    /** Rows a streaming query hands out, collected on a thread of their own. */
    static final class Collector implements AutoCloseable {
        final ConcurrentLinkedQueue<Row> rows = new ConcurrentLinkedQueue<>();
        final Columns columns;
        final CloseableIterator<Row> it;
        final Thread thread;
        volatile Throwable failed;

        Collector(TableResult r) {
            this.columns = Flink.columns(r);
            this.it = r.collect();
            this.thread = new Thread(() -> {
                try {
                    while (it.hasNext()) rows.add(it.next());
                } catch (Throwable e) {
                    failed = e;
                }
            }, "flink-collect");
            thread.setDaemon(true);
            thread.start();
        }

        /** Waits until {@code done} holds for the rows so far, at most {@code seconds}. */
        void await(int seconds, java.util.function.Supplier<Boolean> done, String what) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (System.nanoTime() < deadline) {
                if (failed != null) fail("the Flink job failed: " + failed, failed);
                if (done.get()) return;
                Thread.sleep(250);
            }
            fail(what + ": not within " + seconds + " s (" + rows.size() + " rows so far)");
        }

        @Override
        public void close() throws Exception {
            it.close();
        }
    }

    static String kind(Row r) {
        return r.getKind().shortString();
    }

    @Test
    void a_streaming_read_of_stock_gets_every_change_once_and_in_order_while_livestate_commits() throws Exception {
        Random rnd = new Random(28);
        try (LiveCompany co = LiveCompany.start("flink-stream", Livestate.exampleSpec())) {
            Events ev = new Events("fs");
            for (int i = 0; i < 12; i++) ev.stockCounted("item-" + i, "north", 100 + i);
            co.emit(ev);
            co.commit("stock");

            StreamTableEnvironment t = Flink.streaming(co.warehouse());
            TableResult r = t.executeSql("SELECT * FROM livestate.state.stock "
                    + "/*+ OPTIONS('continuous.discovery-interval' = '200ms') */");
            try (Collector c = new Collector(r)) {
                // Fold what arrives; every change must fit the rows as they stand.
                ChangeFold fold = new ChangeFold("Flink's stream of stock", c.columns, Company.primaryKey("stock"), List.of());
                int[] folded = {0};
                java.util.function.Supplier<List<String>> drain = () -> {
                    Row row;
                    while ((row = c.rows.poll()) != null) {
                        fold.apply(kind(row), Rows.engineRow(c.columns, Flink.values(row)));
                        folded[0]++;
                    }
                    return fold.rows();
                };
                int commits = 0;
                for (int round = 0; round < 10; round++) {
                    for (int k = 0; k < 15; k++) {
                        String item = "item-" + rnd.nextInt(16);
                        String loc = rnd.nextBoolean() ? "north" : "south";
                        switch (rnd.nextInt(4)) {
                            case 0 -> ev.stockCounted(item, loc, rnd.nextInt(500));
                            case 1 -> ev.reservationChanged(item, loc, rnd.nextInt(50));
                            case 2 -> ev.inboundChanged(item, loc, rnd.nextInt(80));
                            default -> ev.planningSet(item, loc, rnd.nextInt(40), 100 + rnd.nextInt(100));
                        }
                    }
                    co.emit(ev);
                    co.commit("stock");
                    commits++;
                    Thread.sleep(300);
                }
                Columns cols = c.columns;
                List<String> expected = Rows.livestateRows(cols, Livestate.read(co.dir, "stock", At.LATEST));
                c.await(90, () -> {
                    List<String> now = drain.get();
                    return now.size() == expected.size() && new java.util.HashSet<>(now).equals(new java.util.HashSet<>(expected));
                }, "Flink's stream reaching livestate's latest stock");
                // Nothing more may arrive: a change delivered twice would show up late.
                Thread.sleep(2000);
                Rows.assertSameRows("stock folded from Flink's stream", expected, drain.get());
                int snapshots = Company.snapshots(co.warehouse(), "state", "stock").size();
                System.out.println("Flink streamed " + folded[0] + " changes of stock over " + commits + " commits ("
                        + snapshots + " snapshots)");
                assertTrue(folded[0] > expected.size(), "no updates arrived, only " + folded[0] + " rows");
            }
        }
    }

    @Test
    void a_lookup_join_of_new_orders_with_current_stock_matches_livestates_lookup_join() throws Exception {
        try (LiveCompany co = LiveCompany.start("flink-lookup", Livestate.exampleSpec())) {
            Events ev = new Events("fl");
            for (int i = 0; i < 8; i++) {
                ev.stockCounted("item-" + i, "north", 50 + 10 * i);
                if (i % 2 == 0) ev.reservationChanged("item-" + i, "north", 5 * i);
                if (i % 3 == 0) ev.inboundChanged("item-" + i, "north", 7 * i);
            }
            co.emit(ev);
            co.commit("stock");

            StreamTableEnvironment t = Flink.streaming(co.warehouse());
            TableResult r = t.executeSql(String.join("\n",
                    "SELECT JSON_VALUE(e.data, '$.order_id') AS order_id,",
                    "       CAST(JSON_VALUE(e.data, '$.line') AS BIGINT) AS line,",
                    "       COALESCE(s.on_hand, 0) - COALESCE(s.reserved, 0) + COALESCE(s.inbound, 0) AS available_at_order",
                    "FROM (SELECT *, PROCTIME() AS pt FROM livestate.`record`.`events`",
                    "      /*+ OPTIONS('scan.mode' = 'latest', 'continuous.discovery-interval' = '200ms') */) AS e",
                    "LEFT JOIN livestate.state.stock FOR SYSTEM_TIME AS OF e.pt AS s",
                    "  ON s.item = JSON_VALUE(e.data, '$.item') AND s.location = JSON_VALUE(e.data, '$.location')",
                    "WHERE e.`type` = 'commerce.order_placed'"));
            try (Collector c = new Collector(r)) {
                Thread.sleep(3000); // the job is running and its lookup table loaded
                int orders = 0;
                for (int i = 0; i < 10; i++) {
                    // item-9 has no stock row: the join finds nothing, both sides say 0.
                    ev.orderPlaced("so-" + i, 1, "item-" + (i % 10), "north", 1 + i, "2.50");
                    orders++;
                }
                co.emit(ev);
                int expectedRows = orders;
                c.await(90, () -> c.rows.size() >= expectedRows, "Flink's lookup join of " + expectedRows + " orders");
                co.commit("open_orders");
                Map<String, Long> flink = new HashMap<>();
                for (Row row : c.rows) {
                    assertEquals("+I", kind(row));
                    flink.put(row.getField(0) + "/" + row.getField(1), (Long) row.getField(2));
                }
                Map<String, Long> ours = new HashMap<>();
                for (JsonNode row : Livestate.read(co.dir, "open_orders", At.LATEST).path("rows")) {
                    ours.put(row.path("order_id").asText() + "/" + row.path("line").asLong(),
                            row.path("available_at_order").asLong());
                }
                assertEquals(ours, flink, "available_at_order: livestate's lookup join (left) and Flink's");
                assertEquals(orders, ours.size());
                assertTrue(ours.values().stream().distinct().count() > 3, "the lookups found too few distinct rows: " + ours);
            }
        }
    }
}
