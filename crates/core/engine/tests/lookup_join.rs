//! A mapping reads another table's current row (lookup join): the row as of that table's last
//! commit, which is what the lookup index holds.

mod common;

use common::{derive, fresh, line, rows};
use serde_json::json;

fn count(n: u32, on_hand: i64) -> String {
    line(n, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": on_hand}))
}

fn order(n: u32, id: &str, item: &str, qty: i64) -> String {
    line(
        n,
        "commerce.order_placed",
        json!({"order_id": id, "line": 1, "customer": "c", "item": item, "location": "north", "qty": qty, "unit_price": "1.00"}),
    )
}

#[tokio::test]
async fn an_order_reads_stock_as_of_its_last_commit() {
    let (_d, ls) = fresh().await;
    let reserve =
        line(2, "commerce.reservation_changed", json!({"item": "bolt", "location": "north", "reserved": 2}));
    ls.emit(&[count(1, 10), reserve].join("\n"), false).unwrap();
    derive(&ls).await;
    // The new count and the order are derived in one pass: the order sees stock's last commit
    // (10 on hand, 2 reserved), not the count applied just before it.
    ls.emit(&[count(3, 50), order(4, "o1", "bolt", 15)].join("\n"), false).unwrap();
    derive(&ls).await;
    ls.emit(&[order(5, "o2", "bolt", 15), order(6, "o3", "nut", 1)].join("\n"), false).unwrap();
    derive(&ls).await;
    let got = |id: &str| {
        let ls = &ls;
        let id = id.to_string();
        async move {
            let r = rows(ls, "open_orders", &[("order_id", &id)]).await;
            (r[0]["available_at_order"].clone(), r[0]["short_at_order"].clone())
        }
    };
    assert_eq!(got("o1").await, (json!(8), json!(true)));
    // By now stock has committed 50 on hand, with o1's reservation of stock not modelled.
    assert_eq!(got("o2").await, (json!(48), json!(false)));
    // No stock row at all: the looked-up columns are null.
    assert_eq!(got("o3").await, (json!(0), json!(true)));
}
