//! The derivers' first pipeline stage: a thread of its own reads the record ahead of them,
//! decodes each entry, types it against the spec and builds its archive row, so the derive thread
//! starts from typed events and the two cores share the work.
//!
//! The stage reads only acknowledged events (the record never returns others) in offset order
//! and hands them over in chunks through a bounded channel, so at most [`AHEAD_CHUNKS`] chunks
//! wait decoded. It changes nothing stored; the derivers stay the only writers, and an event
//! the stage cannot type reaches them as the same [`EngineError::Derivation`] at its offset.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use livestate_record::{Record, RecordedEvent};
use livestate_spec::{CompanySpec, Event};

use crate::error::EngineError;

/// Events per chunk handed over.
pub(crate) const CHUNK: usize = 2048;

/// Decoded chunks that may wait for the derivers.
const AHEAD_CHUNKS: usize = 2;

/// How long the stage sleeps when it has reached the record's head.
const IDLE: Duration = Duration::from_millis(1);

/// One event, ready to derive.
pub(crate) struct Decoded {
    pub offset: u64,
    pub recorded_at_ms: i64,
    pub event: Event,
    /// The JSON text of the recorded `data` object, as the `record.events` archive holds it.
    pub data: String,
}

/// Types one recorded event (decoding is the same whether or not the stage runs).
pub(crate) fn decode(ev: RecordedEvent, spec: &CompanySpec) -> Result<Decoded, EngineError> {
    let (offset, recorded_at_ms) = (ev.offset, ev.recorded_at_ms);
    let data = serde_json::to_string(&ev.event.data).expect("serialising JSON into memory cannot fail");
    // Mappings were dry-run when the event was emitted; the derivers run them once, for real.
    let event =
        Event::decode(ev.event, spec).map_err(|source| EngineError::Undecodable { offset, source })?;
    Ok(Decoded { offset, recorded_at_ms, event, data })
}

impl Decoded {
    /// An event as [`crate::Livestate::emit`] checked and appended it: typed once, on its way
    /// in, and the same as [`decode`] makes of the stored entry. `data` is the JSON text of the
    /// recorded `data` object.
    pub fn appended(offset: u64, recorded_at_ms: i64, event: Event, data: String) -> Decoded {
        Decoded { offset, recorded_at_ms, event, data }
    }
}

/// The running stage: where its output stands and what is decoded but not yet taken.
pub(crate) struct Decoder {
    rx: Receiver<Result<Vec<Decoded>, EngineError>>,
    /// Decoded, not yet taken, in offset order.
    ready: VecDeque<Decoded>,
    /// The offset the next decoded event will have.
    next: u64,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Decoder {
    /// Starts decoding `record` from `from`.
    pub fn start(record: &Record, spec: &CompanySpec, from: u64) -> Decoder {
        let (tx, rx) = sync_channel(AHEAD_CHUNKS);
        let stop = Arc::new(AtomicBool::new(false));
        let (record, spec, halt) = (record.clone(), spec.clone(), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("livestate-decode".into())
            .spawn(move || {
                let mut at = from;
                while !halt.load(Ordering::Acquire) {
                    let chunk: Result<Vec<Decoded>, EngineError> = match record.read(at, CHUNK) {
                        Ok(events) if events.is_empty() => {
                            std::thread::sleep(IDLE);
                            continue;
                        }
                        Ok(events) => events.into_iter().map(|e| decode(e, &spec)).collect(),
                        Err(e) => Err(EngineError::from(e)),
                    };
                    let failed = chunk.is_err();
                    if let Ok(c) = &chunk {
                        at = c.last().map_or(at, |e: &Decoded| e.offset + 1);
                    }
                    if tx.send(chunk).is_err() || failed {
                        return;
                    }
                }
            })
            .expect("spawn the decode thread");
        Decoder { rx, ready: VecDeque::new(), next: from, stop, thread: Some(thread) }
    }

    /// Where the stage's output stands: the offset of the next event it hands over.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Up to `limit` decoded events from `from` (which must be [`Decoder::next`]), as many as
    /// are ready, waiting for the first only while the record holds events up to `head`.
    ///
    /// # Errors
    /// Record errors and events that do not type, at their offset.
    pub fn take(&mut self, from: u64, head: u64, limit: usize) -> Result<Vec<Decoded>, EngineError> {
        debug_assert_eq!(from, self.next);
        if self.ready.is_empty() && from < head {
            // The events are recorded: the stage has them or will shortly.
            let chunk = self.rx.recv().map_err(|_| stopped())??;
            self.ready.extend(chunk);
        }
        loop {
            match self.rx.try_recv() {
                Ok(chunk) => self.ready.extend(chunk?),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) if self.ready.is_empty() && from < head => {
                    return Err(stopped())
                }
                Err(TryRecvError::Disconnected) => break,
            }
            if self.ready.len() >= limit {
                break;
            }
        }
        let n =
            self.ready.len().min(limit).min(usize::try_from(head.saturating_sub(from)).unwrap_or(usize::MAX));
        let out: Vec<Decoded> = self.ready.drain(..n).collect();
        if let Some(last) = out.last() {
            self.next = last.offset + 1;
        }
        Ok(out)
    }
}

fn stopped() -> EngineError {
    EngineError::Derivation { offset: 0, message: "the decode stage stopped".into() }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Unblock a send in progress, then wait for the thread.
        while self.rx.try_recv().is_ok() {}
        drop(std::mem::replace(&mut self.rx, sync_channel(0).1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
