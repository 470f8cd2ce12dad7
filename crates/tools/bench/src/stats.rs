//! Latency percentiles.

use std::time::Duration;

/// Percentiles of a set of latencies, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Latencies {
    pub n: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
}

/// Full reads of a table: the rows each read returned and the median read's seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scanned {
    pub rows: u64,
    pub seconds: f64,
}

impl Scanned {
    /// The rows of the last of `reads` (each `(rows, seconds)`) and the median seconds.
    ///
    /// # Panics
    /// When `reads` is empty.
    pub fn median_of(reads: &[(u64, f64)]) -> Scanned {
        let mut seconds: Vec<f64> = reads.iter().map(|r| r.1).collect();
        seconds.sort_by(f64::total_cmp);
        Scanned { rows: reads.last().expect("one read at least").0, seconds: seconds[seconds.len() / 2] }
    }
}

/// The median of `values`: the middle one, or the mean of the two middle ones (NaN when there
/// are none).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

impl Latencies {
    /// Nearest-rank percentiles of `samples` (all zero when there are none).
    pub fn of(samples: &mut [Duration]) -> Latencies {
        if samples.is_empty() {
            return Latencies::default();
        }
        samples.sort_unstable();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let rank = |p: f64| {
            let r = (p * samples.len() as f64).ceil() as usize;
            samples[r.clamp(1, samples.len()) - 1]
        };
        let total: Duration = samples.iter().sum();
        Latencies {
            n: samples.len(),
            p50_us: us(rank(0.50)),
            p99_us: us(rank(0.99)),
            mean_us: us(total) / samples.len() as f64,
            max_us: us(samples[samples.len() - 1]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_median_is_the_middle_value_or_the_mean_of_the_two_middle_ones() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        let l = Latencies::of(&mut v);
        assert_eq!((l.n, l.p50_us, l.p99_us, l.max_us), (100, 50.0, 99.0, 100.0));
        assert!((l.mean_us - 50.5).abs() < 1e-9);
        assert_eq!(Latencies::of(&mut []), Latencies::default());
    }
}
