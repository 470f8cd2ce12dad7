//! The record's newest events as this process appended them, already typed: the derivers take
//! them from here instead of reading the record back and parsing each entry a second time.
//!
//! [`crate::Livestate::emit`] parses and checks every line before appending it, and after the
//! append is acknowledged it pushes the typed events here at their offsets. The derivers take
//! events from the tail while they follow the record's head, and read the record back (the
//! decode stage) only to catch up: after a restart, or when they fell so far behind that the
//! tail, which holds the newest [`CAPACITY`] events, dropped what they had not taken. An
//! append that would make it drop events first gives following derivers a moment to take
//! them ([`Tail::wait_for_room`]).
//!
//! What the tail promises: every event acknowledged at an offset at or above [`Tail::from`] is
//! pushed here, or is about to be (its append has returned and the push follows at once).
//! Below `from`, the record is the only source. The tail never changes the record; an event
//! taken from it is the same typed event the decode stage would make from the stored entry
//! (`tests/parse_once.rs` checks that).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::decode::Decoded;

/// Events the tail holds at most: two appends of [`crate::EMIT_CHUNK`].
pub(crate) const CAPACITY: usize = 2 * crate::EMIT_CHUNK;

/// The longest an append waits for the derivers to make room ([`Tail::wait_for_room`]). 200 ms
/// took as much work off the hot path as a second did (docs/BENCHMARKS.md, seventh pass).
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(200);

/// Derivers that took from the tail within this long are following it. Longer than a deriver
/// takes to apply a chunk of events ([`crate::decode::CHUNK`]) under load, so a deriver busy
/// with what it took still counts.
pub(crate) const FOLLOW_LEASE: Duration = Duration::from_secs(1);

/// What the derivers get from the tail at their position.
pub(crate) enum Taken {
    /// Typed events in offset order from the position on (empty: nothing new).
    Events(Vec<Decoded>),
    /// The events from the position up to this offset are only in the record.
    Record { until: u64 },
    /// The event at the position is acknowledged but not pushed yet.
    Pending,
}

#[derive(Default)]
struct State {
    /// Every event this process appends at or above it is (or is about to be) here.
    from: u64,
    /// In offset order, each offset once. A queue, not a map: events arrive in offset order
    /// but for concurrent appends, and leave from the front, so neither end shifts the others
    /// (a B-tree node shifts its large entries on every removal from the front).
    events: VecDeque<Decoded>,
    /// When a deriver last took from the tail.
    taken_at: Option<Instant>,
}

impl State {
    /// Whether a deriver took from the tail within [`FOLLOW_LEASE`].
    fn followed(&self) -> bool {
        self.taken_at.is_some_and(|at| at.elapsed() < FOLLOW_LEASE)
    }

    fn drop_below(&mut self, offset: u64) {
        while self.events.front().is_some_and(|e| e.offset < offset) {
            self.events.pop_front();
        }
    }
}

/// See the module docs.
#[derive(Default)]
pub(crate) struct Tail {
    state: Mutex<State>,
    /// Signalled whenever events leave the tail ([`Tail::wait_for_room`] waits on it).
    room: Condvar,
}

impl Tail {
    /// A tail for a record whose next offset is `next`: the events before it are in the record
    /// only.
    pub fn new(next: u64) -> Tail {
        Tail { state: Mutex::new(State { from: next, ..State::default() }), room: Condvar::new() }
    }

    /// Before an append of `incoming` events: while a deriver follows the tail and the append
    /// would make it drop events the derivers have not taken, waits for them to take some, at
    /// most [`MAX_WAIT`]. Returns how long it waited.
    ///
    /// This is the tail's flow control. Without it a producer faster than the derivers
    /// overflows the tail, and the derivers then read back and parse, on the decode stage, every
    /// event the tail dropped: work the tail exists to save, done while they are already the
    /// slower side. Waiting here instead hands the producer's core to the derivers for a moment
    /// (the seventh pass of the hot path measured a tenth less CPU for an ingest, docs/BENCHMARKS.md).
    /// The wait is bounded, so a deriver that stalls (a slow commit, a failure) delays an
    /// acknowledgement by at most [`MAX_WAIT`]; after it the append goes ahead, the tail drops
    /// its oldest events and the record is the buffer, as before. Nobody waits when no deriver
    /// took from the tail within [`FOLLOW_LEASE`]: derivers that are open but not running (an
    /// offline `derive`, a test stepping them by hand) are not following.
    pub fn wait_for_room(&self, incoming: usize) -> Duration {
        let incoming = incoming.min(CAPACITY);
        let start = Instant::now();
        let deadline = start + MAX_WAIT;
        let mut st = self.state();
        while st.events.len() + incoming > CAPACITY && st.followed() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self.room.wait_timeout(st, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        start.elapsed()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// After an acknowledged append: its new events, typed, at their offsets. When they do not
    /// fit, the tail drops its oldest events (the derivers read those from the record) and keeps
    /// the newest [`CAPACITY`], so derivers that fell behind read back only what was dropped and
    /// take the rest from here.
    pub fn push(&self, events: Vec<Decoded>) {
        let mut st = self.state();
        for e in events {
            if e.offset < st.from {
                continue;
            }
            if st.events.back().is_none_or(|last| last.offset < e.offset) {
                st.events.push_back(e);
                continue;
            }
            // A concurrent append pushed after a later one: into its place.
            let i = st.events.partition_point(|x| x.offset < e.offset);
            match st.events.get_mut(i) {
                Some(x) if x.offset == e.offset => *x = e,
                _ => st.events.insert(i, e),
            }
        }
        while st.events.len() > CAPACITY {
            let dropped = st.events.pop_front().expect("more than CAPACITY events");
            st.from = st.from.max(dropped.offset + 1);
        }
    }

    /// Up to `limit` events from `position` on, below `head` (the record's acknowledged end).
    pub fn take(&self, position: u64, head: u64, limit: usize) -> Taken {
        let mut st = self.state();
        st.taken_at = Some(Instant::now());
        let held = st.events.len();
        if position < st.from {
            return Taken::Record { until: st.from };
        }
        // Whatever sits below the position was derived already (a barrier or another pass).
        st.drop_below(position);
        let ready = usize::try_from(head.saturating_sub(position)).unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(limit.min(ready).min(st.events.len()));
        let mut next = position;
        while next < head && out.len() < limit {
            if st.events.front().is_none_or(|e| e.offset != next) {
                break;
            }
            out.push(st.events.pop_front().expect("checked"));
            next += 1;
        }
        // The derivers are past these now: a deriver opened later starts from its own commit,
        // below `from`, and reads the record.
        st.from = st.from.max(next);
        self.made_room(st, held);
        if out.is_empty() && position < head {
            return Taken::Pending;
        }
        Taken::Events(out)
    }

    /// Gives up waiting for the events below `to`: the derivers read them from the record, and
    /// pushes of them that arrive later are dropped.
    pub fn skip_to(&self, to: u64) {
        let mut st = self.state();
        let held = st.events.len();
        st.from = st.from.max(to);
        st.drop_below(to);
        self.made_room(st, held);
    }

    /// Wakes appends waiting for room if events left the tail (it held `held` before): most
    /// takes of a deriver that follows the head free nothing, and a wake is a system call.
    fn made_room(&self, st: std::sync::MutexGuard<'_, State>, held: usize) {
        let freed = st.events.len() < held;
        drop(st);
        if freed {
            self.room.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use livestate_spec::Event;

    fn ev(offset: u64) -> Decoded {
        Decoded {
            offset,
            recorded_at_ms: 0,
            event: Event {
                id: format!("e{offset}"),
                event_type: "t.x".into(),
                occurred_at: chrono::DateTime::UNIX_EPOCH,
                causation: None,
                data: Default::default(),
            },
            data: "{}".into(),
        }
    }

    fn offsets(t: Taken) -> Vec<u64> {
        match t {
            Taken::Events(v) => v.iter().map(|e| e.offset).collect(),
            Taken::Record { until } => panic!("read the record until {until}"),
            Taken::Pending => panic!("pending"),
        }
    }

    #[test]
    fn events_before_the_tail_began_come_from_the_record_and_later_ones_from_the_tail() {
        let t = Tail::new(10);
        assert!(matches!(t.take(3, 12, 100), Taken::Record { until: 10 }));
        t.push(vec![ev(10), ev(11)]);
        assert_eq!(offsets(t.take(10, 12, 100)), vec![10, 11]);
        assert_eq!(offsets(t.take(12, 12, 100)), Vec::<u64>::new(), "nothing new at the head");
    }

    #[test]
    fn concurrent_appends_pushed_out_of_order_are_taken_in_order_and_a_gap_waits() {
        let t = Tail::new(0);
        t.push(vec![ev(3), ev(4)]);
        assert!(matches!(t.take(0, 5, 100), Taken::Pending), "offsets 0-2 are acknowledged, not pushed");
        t.push(vec![ev(0), ev(1), ev(2)]);
        assert_eq!(offsets(t.take(0, 5, 2)), vec![0, 1], "at most the limit");
        assert_eq!(offsets(t.take(2, 4, 100)), vec![2, 3], "never past the head");
        assert_eq!(offsets(t.take(4, 5, 100)), vec![4]);
        // Three appends pushed last, first, middle; an offset pushed twice is held once.
        t.push(vec![ev(9), ev(10)]);
        t.push(vec![ev(5), ev(6)]);
        t.push(vec![ev(7), ev(8)]);
        t.push(vec![ev(8)]);
        assert_eq!(offsets(t.take(5, 11, 100)), (5..11).collect::<Vec<_>>());
        assert!(t.state().events.is_empty());
    }

    #[test]
    fn a_tail_that_overflows_drops_its_oldest_sends_the_derivers_to_the_record_for_them_and_stays_bounded() {
        let t = Tail::new(0);
        let n = CAPACITY as u64;
        t.push((0..n).map(ev).collect());
        t.push((n..n + 5).map(ev).collect());
        assert_eq!(t.state().events.len(), CAPACITY);
        assert!(matches!(t.take(0, n + 5, 10), Taken::Record { until: 5 }), "the five oldest were dropped");
        assert_eq!(offsets(t.take(5, n + 5, 3)), vec![5, 6, 7], "the rest is still here");
        // A late push of a dropped offset (a concurrent append) stays out.
        t.push(vec![ev(2)]);
        assert!(matches!(t.take(2, n + 5, 10), Taken::Record { until: 8 }));
        // One append larger than the tail keeps its newest events.
        t.push((n + 5..3 * n).map(ev).collect());
        assert_eq!(t.state().events.len(), CAPACITY);
        assert!(matches!(t.take(8, 3 * n, 10), Taken::Record { until } if until == 2 * n));
        assert_eq!(offsets(t.take(2 * n, 3 * n, 2)), vec![2 * n, 2 * n + 1]);
    }

    /// A full tail: CAPACITY events from offset 0, none taken.
    fn full_tail() -> Tail {
        let t = Tail::new(0);
        t.push((0..CAPACITY as u64).map(ev).collect());
        t
    }

    #[test]
    fn an_append_into_a_full_tail_nobody_follows_does_not_wait() {
        let t = full_tail();
        let waited = t.wait_for_room(crate::EMIT_CHUNK);
        assert!(waited < MAX_WAIT / 2, "waited {waited:?} with no deriver following");
    }

    #[test]
    fn an_append_into_a_full_tail_waits_until_a_following_deriver_takes_enough() {
        let t = std::sync::Arc::new(full_tail());
        assert!(matches!(t.take(0, 0, 1), Taken::Events(v) if v.is_empty()), "a deriver follows the tail");
        let deriver = {
            let t = std::sync::Arc::clone(&t);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                // Too few for the append: it keeps waiting.
                assert_eq!(offsets(t.take(0, CAPACITY as u64, 10)).len(), 10);
                std::thread::sleep(Duration::from_millis(30));
                assert_eq!(offsets(t.take(10, CAPACITY as u64, crate::EMIT_CHUNK)).len(), crate::EMIT_CHUNK);
            })
        };
        let waited = t.wait_for_room(crate::EMIT_CHUNK);
        deriver.join().unwrap();
        assert!(
            waited >= Duration::from_millis(50),
            "returned after {waited:?}, before the deriver took enough"
        );
        assert_eq!(t.state().events.len() + crate::EMIT_CHUNK, CAPACITY - 10, "room for the append");
    }

    #[test]
    fn a_stalled_deriver_holds_an_append_back_at_most_the_longest_wait() {
        let t = full_tail();
        assert!(matches!(t.take(0, 0, 1), Taken::Events(_)), "a deriver follows, then stalls");
        let waited = t.wait_for_room(1);
        assert!(waited >= MAX_WAIT, "gave up after {waited:?}");
        assert!(waited < MAX_WAIT + Duration::from_secs(5), "waited {waited:?}");
        // The append then goes ahead and the tail drops its oldest, as without flow control.
        t.push(vec![ev(CAPACITY as u64)]);
        assert!(matches!(t.take(0, CAPACITY as u64 + 1, 1), Taken::Record { until: 1 }));
    }

    #[test]
    fn skipping_drops_what_is_below_and_ignores_late_pushes_of_it() {
        let t = Tail::new(0);
        t.push(vec![ev(1)]);
        t.skip_to(2);
        t.push(vec![ev(0)]);
        assert!(matches!(t.take(0, 3, 10), Taken::Record { until: 2 }));
        assert!(matches!(t.take(2, 3, 10), Taken::Pending));
        // A deriver that took events moves `from` past them: one opened later reads the record.
        t.push(vec![ev(2)]);
        assert_eq!(offsets(t.take(2, 3, 10)), vec![2]);
        assert!(matches!(t.take(2, 3, 10), Taken::Record { until: 3 }));
    }
}

/// Parse once must not change what is derived: the events the tail hands over are the ones the
/// decode stage makes of the stored entries, archive rows included.
#[cfg(test)]
mod parse_once {
    use super::*;
    use crate::Livestate;

    #[tokio::test]
    async fn events_taken_from_the_tail_equal_those_decoded_from_the_record() {
        let spec = livestate_testkit::example_dir();
        let dir = tempfile::tempdir().unwrap();
        let ls = Livestate::init(&dir.path().join("d"), &spec).await.unwrap();
        let lines = [
            // Canonical already.
            r#"{"id":"a1","type":"inventory.stock_counted","occurred_at":"2026-03-02T08:00:00Z","data":{"item":"bolt","location":"north","on_hand":40}}"#,
            // An int as text, a timestamp with an offset and microseconds, unicode and escapes.
            r#"{"id":"a2","type":"inventory.stock_counted","occurred_at":"2026-03-02T09:00:00.123456+01:00","data":{"item":"b\"olt ☃ \u00e9","location":"south","on_hand":"7"}}"#,
            // Decimals as a number and as text with fewer places; a missing optional field.
            r#"{"id":"a3","type":"commerce.order_placed","occurred_at":"2026-03-02T08:00:01.5Z","data":{"order_id":"o1","line":1,"customer":"c","item":"bolt","location":"north","qty":3,"unit_price":12.5}}"#,
            r#"{"id":"a4","type":"commerce.order_placed","occurred_at":"2026-03-02T08:00:02Z","data":{"order_id":"o1","line":2,"customer":"c","item":"nut","location":"north","qty":1,"unit_price":"0.1"}}"#,
            // A null optional field, a causation.
            r#"{"id":"a5","type":"operations.job_status_changed","occurred_at":"2026-03-02T08:00:03Z","data":{"job_id":"j1","status":"blocked","block_reason":null,"machine":"press-1"},"causation":"p123"}"#,
            r#"{"id":"a6","type":"commerce.order_cancelled","occurred_at":"2026-03-02T08:00:04Z","data":{"order_id":"o1","line":2,"item":"nut","location":"north","qty":1}}"#,
        ];
        // The third line again: a duplicate reaches neither the record nor the tail.
        let input = format!("{}\n{}", lines.join("\n"), lines[2]);
        let report = ls.emit(&input, false).unwrap();
        assert_eq!(report.appended.len(), lines.len() + 1);
        let head = ls.record.next_offset();
        assert_eq!(head, lines.len() as u64);
        let Taken::Events(taken) = ls.tail.take(0, head, 100) else {
            panic!("the tail holds what emit appended")
        };
        assert_eq!(taken.len(), lines.len());
        for t in taken {
            let stored = ls.record.get(t.offset).unwrap().unwrap();
            let decoded = crate::decode::decode(stored, &ls.spec).unwrap();
            assert_eq!(t.event, decoded.event, "event at offset {}", t.offset);
            assert_eq!(t.data, decoded.data, "the data text archived at offset {}", t.offset);
            assert_eq!(t.recorded_at_ms, decoded.recorded_at_ms);
        }
    }
}
