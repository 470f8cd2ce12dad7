//! What one query, one caller and all queries together may take.

use std::time::Duration;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Limits on SQL queries. Every field has a default; a server or a test sets the ones it
/// needs with `Limits { time: …, ..Limits::default() }`.
///
/// The text limits (`text_bytes`, `depth`, `tokens`, `list_items`) are checked on the
/// tokenizer's output before anything recursive runs; `time`, `memory_bytes`,
/// `value_bytes`, `rows` and `output_bytes` while the query plans and runs; `concurrent`,
/// `per_principal` and `total_memory_bytes` across queries of one [`crate::Queries`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most rows an answer holds; more make it `truncated`. Default = 1000.
    pub rows: usize,
    /// Most JSON bytes of the answer's rows; more make it `truncated`. Default = 16 MiB.
    pub output_bytes: usize,
    /// Wall-clock time from admission to answer, planning included. Default = 30 s.
    pub time: Duration,
    /// Longest query text, in bytes. Default = 64 KiB.
    pub text_bytes: usize,
    /// Deepest expression nesting: parentheses, brackets and `CASE … END`, plus the operators
    /// chained inside one operand, joins and set operations (see [`crate::shape`]).
    /// Default = 128.
    pub depth: usize,
    /// Most tokens (words, literals, operators; not whitespace or comments). Default = 16384.
    pub tokens: usize,
    /// Most items in one list: select items, function arguments, `IN (…)` values,
    /// `VALUES` rows. Default = 1024.
    pub list_items: usize,
    /// Memory one query's operators may reserve (sorts, joins, aggregates; sorts and
    /// aggregates spill to a temporary directory beyond it). Default = 256 MiB.
    pub memory_bytes: usize,
    /// Memory all running queries together may reserve. Default = 1 GiB.
    pub total_memory_bytes: usize,
    /// Temporary files one query may spill (in the system's temporary directory).
    /// Default = 1 GiB.
    pub spill_bytes: u64,
    /// Most bytes one call of a function whose output grows with an argument's value
    /// (`repeat`, `lpad`, `rpad`, `array_repeat`, `array_resize`, `range`,
    /// `generate_series`, `concat`, …) may build for one batch of rows. Default = 16 MiB.
    pub value_bytes: usize,
    /// Queries running at once. Default = 8.
    pub concurrent: usize,
    /// Queries one principal may run at once. Default = 2.
    pub per_principal: usize,
    /// Threads that plan and run queries (queries never run on the caller's threads).
    /// Default = 2.
    pub workers: usize,
    /// Stack of each of those threads, a second defence behind `depth`. Default = 32 MiB.
    pub stack_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            rows: 1000,
            output_bytes: 16 * MIB,
            time: Duration::from_secs(30),
            text_bytes: 64 * KIB,
            depth: 128,
            tokens: 16 * KIB,
            list_items: 1024,
            memory_bytes: 256 * MIB,
            total_memory_bytes: 1024 * MIB,
            spill_bytes: 1 << 30,
            value_bytes: 16 * MIB,
            concurrent: 8,
            per_principal: 2,
            workers: 2,
            stack_bytes: 32 * MIB,
        }
    }
}

/// `n` bytes in the largest whole unit that fits, e.g. `64 KiB`.
pub(crate) fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}
