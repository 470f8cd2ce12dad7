//! Sorted runs of a bucket and Paimon's universal compaction picker.
//!
//! A bucket's files form sorted runs: every level-0 file is a run of its own (newest first),
//! and each higher level is one run. The picker follows Java Paimon's `UniversalCompaction`:
//! size amplification first, then size ratio, then the run count; a pick is always a prefix of
//! the newest runs, so the merged output stays newer than every run left alone.

use paimon::spec::DataFileMeta;

/// One sorted run: its level and the indexes of its files in the bucket's file list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortedRun {
    pub level: i32,
    pub files: Vec<usize>,
    pub size: u64,
}

/// What to compact: the first `runs` sorted runs, written to `output_level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactUnit {
    pub runs: usize,
    pub output_level: i32,
}

/// The knobs of the picker (see [`crate::CompactionOptions`]).
#[derive(Debug, Clone, Copy)]
pub struct Picker {
    pub trigger: usize,
    pub max_size_amp_percent: u64,
    pub size_ratio: u64,
    pub max_level: i32,
}

/// Groups a bucket's files into sorted runs, newest first.
pub fn sorted_runs(files: &[DataFileMeta]) -> Vec<SortedRun> {
    let size = |i: usize| u64::try_from(files[i].file_size).unwrap_or(0);
    let mut level0: Vec<usize> = (0..files.len()).filter(|&i| files[i].level == 0).collect();
    level0.sort_by_key(|&i| std::cmp::Reverse(files[i].max_sequence_number));
    let mut runs: Vec<SortedRun> =
        level0.into_iter().map(|i| SortedRun { level: 0, files: vec![i], size: size(i) }).collect();
    let mut levels: Vec<i32> = files.iter().map(|f| f.level).filter(|&l| l > 0).collect();
    levels.sort_unstable();
    levels.dedup();
    for level in levels {
        let mut idx: Vec<usize> = (0..files.len()).filter(|&i| files[i].level == level).collect();
        idx.sort_by(|&a, &b| files[a].min_key.cmp(&files[b].min_key));
        let total = idx.iter().map(|&i| size(i)).sum();
        runs.push(SortedRun { level, files: idx, size: total });
    }
    runs
}

impl Picker {
    /// Picks what to compact now, or `None` when the bucket is healthy.
    pub fn pick(&self, runs: &[SortedRun]) -> Option<CompactUnit> {
        if runs.len() < self.trigger.max(1) {
            return None;
        }
        if let Some(unit) = self.pick_for_size_amp(runs) {
            return Some(unit);
        }
        if let Some(unit) = self.pick_for_size_ratio(runs, 1) {
            return Some(unit);
        }
        if runs.len() > self.trigger {
            return self.pick_for_size_ratio(runs, runs.len() - self.trigger + 1);
        }
        None
    }

    /// Every run to the top level, dropping deletes; `None` if the bucket is already one
    /// top-level run.
    pub fn full(&self, runs: &[SortedRun]) -> Option<CompactUnit> {
        match runs {
            [] => None,
            [only] if only.level == self.max_level => None,
            _ => Some(CompactUnit { runs: runs.len(), output_level: self.max_level }),
        }
    }

    /// The newest `n` runs (at least two), placed as universal compaction would place them.
    pub fn newest(&self, runs: &[SortedRun], n: usize) -> Option<CompactUnit> {
        (runs.len() > 1).then(|| self.unit(runs, n.clamp(2, runs.len())))
    }

    fn pick_for_size_amp(&self, runs: &[SortedRun]) -> Option<CompactUnit> {
        let (oldest, newer) = runs.split_last()?;
        let candidate: u64 = newer.iter().map(|r| r.size).sum();
        (candidate.saturating_mul(100) > self.max_size_amp_percent.saturating_mul(oldest.size))
            .then_some(CompactUnit { runs: runs.len(), output_level: self.max_level })
    }

    fn pick_for_size_ratio(&self, runs: &[SortedRun], mut count: usize) -> Option<CompactUnit> {
        let mut candidate: u64 = runs[..count].iter().map(|r| r.size).sum();
        for next in &runs[count..] {
            if (candidate as f64) * (100.0 + self.size_ratio as f64) / 100.0 < next.size as f64 {
                break;
            }
            candidate += next.size;
            count += 1;
        }
        (count > 1).then(|| self.unit(runs, count))
    }

    /// Java's `createUnit`: output one level above the next run left alone, never level 0.
    fn unit(&self, runs: &[SortedRun], mut count: usize) -> CompactUnit {
        let mut output_level =
            if count == runs.len() { self.max_level } else { (runs[count].level - 1).max(0) };
        if output_level == 0 {
            while count < runs.len() {
                let next = &runs[count];
                count += 1;
                if next.level != 0 {
                    output_level = next.level;
                    break;
                }
            }
        }
        if count == runs.len() {
            output_level = self.max_level;
        }
        CompactUnit { runs: count, output_level }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(level: i32, size: u64) -> SortedRun {
        SortedRun { level, files: vec![], size }
    }

    const PICKER: Picker = Picker { trigger: 5, max_size_amp_percent: 200, size_ratio: 1, max_level: 5 };

    #[test]
    fn fewer_runs_than_the_trigger_are_left_alone() {
        assert_eq!(PICKER.pick(&[run(0, 1), run(0, 1), run(5, 100)]), None);
    }

    #[test]
    fn small_newer_runs_merge_above_the_next_run() {
        // Five small level-0 runs over a big top-level run: no size amplification problem,
        // size ratio gathers the level-0 runs and writes them just above level 5.
        let runs = [run(0, 1), run(0, 1), run(0, 1), run(0, 1), run(0, 1), run(5, 1000)];
        assert_eq!(PICKER.pick(&runs), Some(CompactUnit { runs: 5, output_level: 4 }));
    }

    #[test]
    fn size_amplification_forces_a_full_compaction() {
        let runs = [run(0, 100), run(0, 100), run(0, 100), run(0, 100), run(5, 100)];
        assert_eq!(PICKER.pick(&runs), Some(CompactUnit { runs: 5, output_level: 5 }));
    }

    #[test]
    fn full_compaction_of_one_top_run_is_a_no_op() {
        assert_eq!(PICKER.full(&[run(5, 10)]), None);
        assert_eq!(PICKER.full(&[run(0, 1), run(5, 10)]), Some(CompactUnit { runs: 2, output_level: 5 }));
    }

    #[test]
    fn picks_never_output_level_zero() {
        // Growing sizes stop the size-ratio scan early; the run count still forces a pick,
        // which reaches past level-0 runs to the first leveled run.
        let runs = [run(0, 1), run(0, 4), run(0, 16), run(0, 64), run(0, 256), run(3, 1024), run(5, 4096)];
        let unit = PICKER.pick(&runs).unwrap();
        assert!(unit.output_level > 0, "{unit:?}");
    }
}
