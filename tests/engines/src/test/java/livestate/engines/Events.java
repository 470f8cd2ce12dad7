package livestate.engines;

import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Example-company events (examples/company/events.toml) as JSON lines, grouped by the module that emits them. */
public final class Events {
    private final String prefix;
    private long n;
    private Instant clock = Instant.parse("2026-03-02T08:00:00Z");
    private final Map<String, List<String>> byModule = new LinkedHashMap<>();

    public Events(String prefix) {
        this.prefix = prefix;
    }

    private Events add(String type, Object... fields) {
        ObjectNode e = Livestate.JSON.createObjectNode();
        e.put("id", prefix + "-" + (n++));
        e.put("type", type);
        clock = clock.plusMillis(1500);
        e.put("occurred_at", clock.toString());
        ObjectNode data = e.putObject("data");
        for (int i = 0; i < fields.length; i += 2) {
            Object v = fields[i + 1];
            String k = (String) fields[i];
            if (v instanceof Long l) data.put(k, l);
            else if (v instanceof Integer x) data.put(k, x);
            else data.put(k, (String) v);
        }
        String module = type.substring(0, type.indexOf('.'));
        byModule.computeIfAbsent(module, m -> new ArrayList<>()).add(e.toString());
        return this;
    }

    public Events stockCounted(String item, String location, long onHand) {
        return add("inventory.stock_counted", "item", item, "location", location, "on_hand", onHand);
    }

    public Events reservationChanged(String item, String location, long reserved) {
        return add("commerce.reservation_changed", "item", item, "location", location, "reserved", reserved);
    }

    public Events inboundChanged(String item, String location, long inbound) {
        return add("procurement.inbound_changed", "item", item, "location", location, "inbound", inbound);
    }

    public Events planningSet(String item, String location, long reorderPoint, long target) {
        return add("procurement.planning_set", "item", item, "location", location, "reorder_point", reorderPoint,
                "target", target);
    }

    public Events orderPlaced(String order, long line, String item, String location, long qty, String unitPrice) {
        return add("commerce.order_placed", "order_id", order, "line", line, "customer", "c-" + order, "item", item,
                "location", location, "qty", qty, "unit_price", unitPrice);
    }

    public Events orderShipped(String order, long line, String item, String location, long qty) {
        return add("commerce.order_shipped", "order_id", order, "line", line, "item", item, "location", location,
                "qty", qty);
    }

    public Events supplierRisk(String supplier, String level, String reason) {
        return reason == null
                ? add("procurement.supplier_risk_assessed", "supplier", supplier, "level", level)
                : add("procurement.supplier_risk_assessed", "supplier", supplier, "level", level, "reason", reason);
    }

    public Events jobStatus(String job, String status) {
        return add("operations.job_status_changed", "job_id", job, "status", status);
    }

    /** The events added since the last call, by module ({@code inventory} -> lines). */
    public Map<String, List<String>> take() {
        Map<String, List<String>> out = new LinkedHashMap<>(byModule);
        byModule.clear();
        return out;
    }
}
