package livestate.engines;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

/**
 * A directory where {@code livestate serve} committed every table several times, each commit
 * with inserts, updates and (open_orders) deletes: the changelog every merge engine writes.
 * Built once per binary under {@code target/changes}.
 */
public final class Changes {
    private static Path built;

    private Changes() {}

    public static synchronized Path dir() {
        if (built != null) return built;
        Path done = Path.of("target", "changes.done").toAbsolutePath();
        String signature = Company.signature();
        try {
            if (Files.exists(done) && Files.readString(done).equals(signature)) {
                built = done.resolveSibling("changes");
                return built;
            }
            Files.deleteIfExists(done);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        Random rnd = new Random(1028);
        try (LiveCompany co = LiveCompany.start("changes", Livestate.exampleSpec())) {
            Events ev = new Events("ch");
            int order = 0;
            java.util.List<Object[]> open = new java.util.ArrayList<>();
            for (int round = 0; round < 6; round++) {
                for (int k = 0; k < 12; k++) {
                    // New items keep arriving (first-row inserts); old ones come back (ignored).
                    String item = "item-" + rnd.nextInt(6 + 4 * round);
                    String loc = rnd.nextBoolean() ? "north" : "south";
                    switch (rnd.nextInt(4)) {
                        case 0 -> ev.stockCounted(item, loc, rnd.nextInt(300));
                        case 1 -> ev.reservationChanged(item, loc, rnd.nextInt(30));
                        case 2 -> ev.inboundChanged(item, loc, rnd.nextInt(60));
                        default -> ev.planningSet(item, loc, rnd.nextInt(20), 50 + rnd.nextInt(50));
                    }
                    String o = "so-" + order++;
                    long qty = 1 + rnd.nextInt(5);
                    ev.orderPlaced(o, 1, item, loc, qty, "1.25");
                    if (rnd.nextInt(3) == 0) ev.orderShipped(o, 1, item, loc, qty);
                    else open.add(new Object[] {o, item, loc, qty});
                    ev.jobStatus("job-" + rnd.nextInt(10), rnd.nextBoolean() ? "released" : "done");
                }
                co.emit(ev);
                // An order of an earlier round ships in this one: a delete in its own commit.
                if (round > 0) {
                    Object[] o = open.remove(0);
                    ev.orderShipped((String) o[0], 1, (String) o[1], (String) o[2], (Long) o[3]);
                    co.emit(ev);
                }
                co.commit(Company.STATE_TABLES.toArray(String[]::new));
            }
        }
        try {
            Files.writeString(done, signature);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        built = done.resolveSibling("changes");
        return built;
    }
}
