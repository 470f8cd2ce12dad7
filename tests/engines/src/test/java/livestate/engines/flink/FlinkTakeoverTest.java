package livestate.engines.flink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import livestate.engines.Company;
import livestate.engines.Events;
import livestate.engines.LiveCompany;
import livestate.engines.Livestate;
import livestate.engines.Livestate.At;
import livestate.engines.Rows;
import livestate.engines.Rows.Columns;

import org.apache.flink.core.execution.JobClient;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Flink derives one table of livestate's warehouse ({@code derived_by = "external"}) by running
 * what {@code livestate export flink-sql} prints, while {@code livestate serve} keeps serving its
 * reads, proposals and audit; the rows Flink commits equal livestate's own derivation of the same
 * events in a twin directory.
 *
 * <p>The one statement not run as printed is the Kafka table of the record: no Kafka runs here,
 * so {@link #archiveAsRecord} defines {@code livestate_record} as a view of the same columns over
 * {@code record.events} read as a stream (docs/scale-out.md, "Tests").
 */
class FlinkTakeoverTest {
    /** Taken over by Flink: an aggregation table (three mappings) and a deduplicate one, whose rows depend on order. */
    static final List<String> TABLES = List.of("reservations_total", "supplier_risk");
    static final Map<String, Columns> COLUMNS = Map.of(
            "reservations_total", new Columns(List.of("item", "reserved_qty", "open_lines", "last_order_at"),
                    List.of(Rows.Kind.STRING, Rows.Kind.INT, Rows.Kind.INT, Rows.Kind.TIMESTAMP)),
            "supplier_risk", new Columns(List.of("supplier", "level", "reason", "assessed_at"),
                    List.of(Rows.Kind.STRING, Rows.Kind.STRING, Rows.Kind.STRING, Rows.Kind.TIMESTAMP)));

    /** The example spec with {@code TABLES} marked {@code derived_by = "external"}. */
    static Path externalSpec() throws IOException {
        Path out = Path.of("target", "spec-external").toAbsolutePath();
        Company.deleteTree(out);
        Files.createDirectories(out);
        try (Stream<Path> s = Files.list(Livestate.exampleSpec())) {
            for (Path f : s.toList()) {
                String text = Files.readString(f);
                if (f.getFileName().toString().equals("tables.toml")) {
                    for (String table : TABLES) {
                        String header = "[tables." + table + "]\n";
                        assertTrue(text.contains(header));
                        text = text.replace(header, header + "derived_by = \"external\"\n");
                    }
                }
                Files.writeString(out.resolve(f.getFileName()), text);
            }
        }
        return out;
    }

    /** Statements of the printed script, comments dropped; the statement set is one statement. */
    static List<String> statements(String script) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        boolean inSet = false;
        for (String line : script.split("\n")) {
            if (line.startsWith("--") || (cur.length() == 0 && line.isBlank())) continue;
            if (line.startsWith("EXECUTE STATEMENT SET")) inSet = true;
            cur.append(line).append('\n');
            boolean ends = inSet ? line.equals("END;") : line.endsWith(";");
            if (ends) {
                String s = cur.toString().trim();
                out.add(s.substring(0, s.length() - 1));
                cur.setLength(0);
                inSet = false;
            }
        }
        if (!cur.toString().isBlank()) fail("the script ends inside a statement: " + cur);
        return out;
    }

    /**
     * {@code livestate_record} as the export's Kafka table declares it (id, type, occurred_at,
     * data ROW, causation, record_offset, proc_time), over {@code record.events} read as a stream
     * from its first snapshot, snapshot by snapshot, which is offset order.
     */
    static String archiveAsRecord(String kafkaTable) {
        int open = kafkaTable.indexOf("`data` ROW<") + "`data` ROW<".length();
        int close = kafkaTable.indexOf(">,\n", open);
        String rowType = kafkaTable.substring(open, close);
        List<String> fields = new ArrayList<>();
        for (String f : rowType.split(", (?=`)")) {
            String name = f.substring(1, f.indexOf('`', 1));
            String type = f.substring(f.indexOf('`', 1) + 2);
            String path = "'$[''" + name + "'']'";
            String value = switch (type.replaceAll("\\(.*", "")) {
                case "STRING" -> "JSON_VALUE(`data`, " + path + ")";
                case "BIGINT", "BOOLEAN", "DECIMAL" -> "CAST(JSON_VALUE(`data`, " + path + ") AS " + type + ")";
                case "TIMESTAMP" -> "TO_TIMESTAMP(JSON_VALUE(`data`, " + path + "), 'yyyy-MM-dd''T''HH:mm:ss.SSS')";
                default -> throw new IllegalArgumentException("data field type " + type);
            };
            fields.add(value);
        }
        return "CREATE TEMPORARY VIEW `default_catalog`.`default_database`.`livestate_record` AS\n"
                + "SELECT `id`, `type`, `occurred_at`,\n"
                + "  CAST(ROW(" + String.join(",\n    ", fields) + ") AS ROW<" + rowType + ">) AS `data`,\n"
                + "  `causation`, `event_offset` AS `record_offset`, PROCTIME() AS `proc_time`\n"
                + "FROM `livestate`.`record`.`events` /*+ OPTIONS('scan.mode' = 'from-snapshot', "
                + "'scan.snapshot-id' = '1', 'continuous.discovery-interval' = '200ms') */";
    }

    static void orders(Events ev, Random rnd, String prefix, int n) {
        for (int i = 0; i < n; i++) {
            String item = "item-" + rnd.nextInt(8);
            String loc = rnd.nextBoolean() ? "north" : "south";
            long qty = 1 + rnd.nextInt(9);
            ev.orderPlaced(prefix + i, 1, item, loc, qty, "3.10");
            if (rnd.nextInt(3) == 0) ev.orderShipped(prefix + i, 1, item, loc, qty);
            // A few suppliers are assessed often: the last assessment must win.
            ev.supplierRisk("sup-" + rnd.nextInt(5), List.of("low", "medium", "high").get(rnd.nextInt(3)),
                    rnd.nextBoolean() ? null : "round " + i);
        }
    }

    @Test
    void flink_derives_an_external_table_that_livestate_serves_and_it_equals_livestates_own_derivation()
            throws Exception {
        Path spec = externalSpec();
        Random rnd = new Random(2828);
        try (LiveCompany main = LiveCompany.start("takeover", spec);
             LiveCompany twin = LiveCompany.start("takeover-twin", Livestate.exampleSpec())) {
            Events ev = new Events("to");
            Events evTwin = new Events("to");
            orders(ev, rnd, "a-", 25);
            orders(evTwin, new Random(2828), "a-", 25);
            main.emit(ev);
            twin.emit(evTwin);

            String script = Livestate.run("export", "flink-sql", "--dir", main.dir.toString());
            String handover = script.lines().filter(l -> l.startsWith("-- Handover: Flink derives ")).findFirst().orElse("");
            for (String table : TABLES) assertTrue(handover.contains(table), script);
            List<String> stmts = statements(script);
            StreamTableEnvironment t = Flink.streaming(main.warehouse());
            // The test's Flink environment already has the catalog registered: run the printed
            // one under the printed name after dropping ours.
            t.executeSql("DROP CATALOG IF EXISTS livestate");
            JobClient job = null;
            int inserts = 0;
            for (String s : stmts) {
                if (s.startsWith("CREATE TABLE `default_catalog`.`default_database`.`livestate_record`")) {
                    t.executeSql(archiveAsRecord(s));
                } else if (s.startsWith("SET ")) {
                    // A SQL client command, not SQL: applied to the session as the client does.
                    java.util.regex.Matcher m = java.util.regex.Pattern.compile("SET '([^']+)' = '([^']*)'").matcher(s);
                    assertTrue(m.matches(), s);
                    t.getConfig().getConfiguration().setString(m.group(1), m.group(2));
                } else if (s.startsWith("EXECUTE STATEMENT SET")) {
                    inserts = s.split("INSERT INTO").length - 1;
                    TableResult r = t.executeSql(s);
                    job = r.getJobClient().orElseThrow();
                } else {
                    t.executeSql(s);
                }
            }
            assertEquals(TABLES.size(), inserts, "one INSERT (one Flink sink, one Paimon writer) per table");
            assertTrue(job != null, "no statement set in\n" + script);
            try {
                // Phase 1: the events emitted before the job started; phase 2: events while it runs.
                converge(main, twin, job, "events recorded before the job started");
                Events more = new Events("to2");
                Events moreTwin = new Events("to2");
                orders(more, new Random(99), "b-", 30);
                orders(moreTwin, new Random(99), "b-", 30);
                main.emit(more);
                twin.emit(moreTwin);
                JsonNode served = converge(main, twin, job, "events recorded while the job ran").get(TABLES.get(0));

                // livestate serves the Flink-written table: receipts say so, a proposal cites a
                // row and pins a tag, the audit reads it back from the tag.
                JsonNode receipt = served.path("receipt");
                assertEquals("external", receipt.path("measured_by").asText(), receipt.toString());
                JsonNode row = served.path("rows").get(0);
                ObjectNode p = Livestate.JSON.createObjectNode();
                p.put("kind", "replenishment_order");
                p.put("module", "procurement");
                p.put("summary", "cite a Flink-derived row");
                p.putObject("action").put("item", row.path("item").asText());
                ObjectNode src = ((ArrayNode) p.putArray("sources")).addObject();
                src.put("table", TABLES.get(0));
                src.put("snapshot_id", receipt.path("snapshot_id").asLong());
                src.putArray("keys").addObject().put("item", row.path("item").asText());
                src.putArray("rows").add(row);
                p.putObject("rule").put("name", "engines-test").put("version", "1").put("text", "cite");
                p.putObject("risk").put("level", "low");
                JsonNode created = main.server.post("/v1/proposals", main.agent, p.toString(), 201);
                String id = created.path("id").asText();
                String tag = created.path("tags").get(0).path("tag").asText();
                assertTrue(tag.startsWith("proposal-" + id), created.toString());
                main.server.post("/v1/proposals/" + id + "/decision", main.person,
                        "{\"decision\":\"approve\",\"reason\":\"engines test\"}", 200);
                // More Flink commits after the tag: the tag still holds the cited row.
                Events late = new Events("to3");
                Events lateTwin = new Events("to3");
                orders(late, new Random(7), "c-", 10);
                orders(lateTwin, new Random(7), "c-", 10);
                main.emit(late);
                twin.emit(lateTwin);
                converge(main, twin, job, "events recorded after the proposal");
                JsonNode audit = main.server.get("/v1/proposals/" + id + "/audit", main.agent);
                JsonNode evidence = audit.path("evidence").get(0);
                assertTrue(evidence.path("cited_rows_identical").asBoolean(), audit.toString());
                assertEquals("approved", audit.path("decision").path("decision").asText(), audit.toString());
                assertEquals("person:checker", audit.path("decision").path("decided_by").asText(), audit.toString());
                // The rows read back from the tag are the ones cited, though Flink committed since.
                assertEquals(row, evidence.path("rows_at_tag").get(0), audit.toString());
            } finally {
                job.cancel().get(60, TimeUnit.SECONDS);
            }
        }
    }

    /**
     * Waits until the rows livestate serves for each Flink-written table (GET .../rows) equal the
     * twin's own derivation; returns the served answers by table.
     */
    static Map<String, JsonNode> converge(LiveCompany main, LiveCompany twin, JobClient job, String what) throws Exception {
        twin.commit(TABLES.toArray(String[]::new));
        Map<String, JsonNode> out = new java.util.HashMap<>();
        for (String table : TABLES) {
            Columns cols = COLUMNS.get(table);
            List<String> expected = Rows.livestateRows(cols, Livestate.read(twin.dir, table, At.LATEST));
            assertTrue(expected.size() >= 4, "the twin derived only " + expected);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            List<String> served = List.of();
            while (System.nanoTime() < deadline) {
                org.apache.flink.api.common.JobStatus st = job.getJobStatus().get(30, TimeUnit.SECONDS);
                if (st.isGloballyTerminalState() || st == org.apache.flink.api.common.JobStatus.RESTARTING) {
                    fail("the Flink job is " + st + ": "
                            + job.getJobExecutionResult().handle((r, e) -> String.valueOf(e)).get(30, TimeUnit.SECONDS));
                }
                JsonNode answer = main.server.get("/v1/tables/" + table + "/rows", main.agent);
                served = Rows.livestateRows(cols, answer);
                if (new java.util.HashSet<>(served).equals(new java.util.HashSet<>(expected))
                        && served.size() == expected.size()) {
                    out.put(table, answer);
                    break;
                }
                Thread.sleep(500);
            }
            if (!out.containsKey(table)) {
                Rows.assertSameRows(table + " served by livestate from Flink's commits (" + what
                        + ") against the twin's own derivation", expected, served);
            }
        }
        return out;
    }
}
