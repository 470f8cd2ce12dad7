//! The record's events in append-only segment files (`docs/formats/record.md`, "Segments").
//!
//! A segment `<first offset, 20 digits>.seg` holds the entries of consecutive offsets from its
//! first, written in groups (one group per group commit):
//!
//! ```text
//! entry:     length u32 LE (> 0) | CRC-32C u32 LE of the entry | the entry (0x01, its JSON)
//! group end: 0u32                | CRC-32C u32 LE of every byte of the group before it
//! ```
//!
//! A group is written with one positional write and made durable with one `fdatasync` before
//! any of its events is acknowledged, so only the last group of the last segment can be torn
//! by a crash; it is found by its missing or failing group end and cut off at open. A segment
//! is sealed once it holds [`SEGMENT_BYTES`]; its sparse index (the byte position of every
//! [`INDEX_EVERY`]th entry) is then written beside it as `.idx`, and rebuilt by a scan when that
//! file is missing or fails its check.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crc_fast::CrcAlgorithm;

use crate::error::RecordError;

/// A segment is sealed, and the next group starts a new one, once it holds this many bytes.
pub(crate) const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// The sparse index keeps the byte position of every this-many-th entry of a segment.
pub(crate) const INDEX_EVERY: u64 = 64;
/// A frame's header: the length (0 for a group end) and a CRC-32C.
pub(crate) const HEADER: usize = 8;
/// The first line of the record's `format` file for a record with segments.
const FORMAT_LINE: &str = "livestate-record 2";
/// Bytes read from a segment at a time, at most.
const READ_CHUNK: usize = 256 * 1024;
/// Bytes read from a segment at a time, at least.
const MIN_READ_CHUNK: usize = 4 * 1024;
/// An entry's bytes as a read guesses them before it has seen any: a read of `n` entries
/// reads about `n` times this at a time, so a point read costs one small `pread`.
const GUESSED_ENTRY_BYTES: usize = 320;
/// The sparse index file's first eight bytes.
const INDEX_MAGIC: &[u8; 8] = b"LSRIDX01";

/// CRC-32C (Castagnoli), as the segment frames carry it.
pub(crate) fn crc(bytes: &[u8]) -> u32 {
    crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// The error for a failed I/O call on a segment file (or the segments' directory).
pub(crate) fn io_error(file: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |error| RecordError::SegmentIo { file: file.to_path_buf(), error }
}

fn damaged(file: &Path, position: u64, reason: impl Into<String>) -> RecordError {
    RecordError::DamagedSegment { file: file.to_path_buf(), position, reason: reason.into() }
}

/// The path of the segment whose first offset is `first` in `dir`.
pub(crate) fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}.seg"))
}

fn index_path(segment: &Path) -> PathBuf {
    segment.with_extension("idx")
}

/// Makes a directory entry just created or renamed in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), RecordError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error(dir))
}

/// Where the record's segments begin: the `format` file in the record's directory, or `None`
/// for a record written before segments (version 1, every event in the `events` keyspace).
pub(crate) fn read_format(record_dir: &Path) -> Result<Option<u64>, RecordError> {
    let path = record_dir.join("format");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(&path)(e)),
    };
    let mut lines = text.lines();
    let bad = |why: &str| damaged(&path, 0, format!("{why} (the file reads {text:?})"));
    if lines.next() != Some(FORMAT_LINE) {
        return Err(bad(&format!("the first line is not `{FORMAT_LINE}`: a record of another version")));
    }
    let from = lines
        .next()
        .and_then(|l| l.strip_prefix("segments-from "))
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| bad("the second line is not `segments-from <offset>`"))?;
    Ok(Some(from))
}

/// Writes the `format` file (through a temporary file and a rename, both made durable).
pub(crate) fn write_format(record_dir: &Path, segments_from: u64) -> Result<(), RecordError> {
    let path = record_dir.join("format");
    let tmp = record_dir.join("format.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(format!("{FORMAT_LINE}\nsegments-from {segments_from}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(io_error(&path))?;
    sync_dir(record_dir)
}

/// One frame read from a segment.
pub(crate) enum Frame<'a> {
    /// An entry (its CRC checked).
    Entry(&'a [u8]),
    /// A group's end; `crc` covers the group's bytes before it.
    GroupEnd { crc: u32 },
}

/// Reads a segment's frames in order from a byte position, a chunk at a time.
pub(crate) struct Frames<'f> {
    file: &'f File,
    path: &'f Path,
    /// The file position of `buf[0]`.
    base: u64,
    /// Where the frames read end (exclusive).
    end: u64,
    buf: Vec<u8>,
    at: usize,
    /// Bytes read at a time (at least what the next frame needs).
    chunk: usize,
}

impl<'f> Frames<'f> {
    /// The frames of `file` from byte `from` to `end`, read [`READ_CHUNK`] bytes at a time.
    pub(crate) fn new(file: &'f File, path: &'f Path, from: u64, end: u64) -> Frames<'f> {
        Frames::reading(file, path, from, end, READ_CHUNK)
    }

    /// As [`Frames::new`], for a read of about `entries` entries.
    fn for_entries(file: &'f File, path: &'f Path, from: u64, end: u64, entries: u64) -> Frames<'f> {
        let guess = usize::try_from(entries).unwrap_or(usize::MAX).saturating_mul(GUESSED_ENTRY_BYTES);
        Frames::reading(file, path, from, end, guess.clamp(MIN_READ_CHUNK, READ_CHUNK))
    }

    fn reading(file: &'f File, path: &'f Path, from: u64, end: u64, chunk: usize) -> Frames<'f> {
        Frames { file, path, base: from, end, buf: Vec::new(), at: 0, chunk }
    }

    /// The file position of the next frame.
    pub(crate) fn position(&self) -> u64 {
        self.base + self.at as u64
    }

    /// Makes `need` bytes from `at` available; false when the frames end before that.
    fn fill(&mut self, need: usize) -> Result<bool, RecordError> {
        let have = self.buf.len() - self.at;
        if have >= need {
            return Ok(true);
        }
        self.buf.drain(..self.at);
        self.base += self.at as u64;
        self.at = 0;
        let loaded_to = self.base + self.buf.len() as u64;
        let left = self.end.saturating_sub(loaded_to);
        if (left as usize) < need - have {
            return Ok(false);
        }
        let take = (need - have).max(self.chunk).min(left as usize);
        let old = self.buf.len();
        self.buf.resize(old + take, 0);
        self.file.read_exact_at(&mut self.buf[old..], loaded_to).map_err(io_error(self.path))?;
        Ok(true)
    }

    /// The next frame, `None` at the end. A frame cut short by the end, or an entry whose CRC
    /// does not match, is damage.
    pub(crate) fn next(&mut self) -> Result<Option<Frame<'_>>, RecordError> {
        if self.position() >= self.end {
            return Ok(None);
        }
        let at = self.position();
        if !self.fill(HEADER)? {
            return Err(damaged(self.path, at, "a frame is cut short by the end of the segment"));
        }
        let h = &self.buf[self.at..self.at + HEADER];
        let len = u32::from_le_bytes(h[..4].try_into().expect("4 bytes")) as usize;
        let sum = u32::from_le_bytes(h[4..].try_into().expect("4 bytes"));
        if len == 0 {
            self.at += HEADER;
            return Ok(Some(Frame::GroupEnd { crc: sum }));
        }
        if !self.fill(HEADER + len)? {
            return Err(damaged(
                self.path,
                at,
                format!("an entry of {len} bytes runs past the end of the segment"),
            ));
        }
        let start = self.at + HEADER;
        self.at = start + len;
        let bytes = &self.buf[start..start + len];
        if crc(bytes) != sum {
            return Err(damaged(self.path, at, "an entry's CRC-32C does not match its bytes"));
        }
        Ok(Some(Frame::Entry(bytes)))
    }
}

/// Where the entries of one segment are: every [`INDEX_EVERY`]th entry's offset and byte
/// position, and the offset and byte position after its last whole group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Sparse {
    pub(crate) marks: Vec<(u64, u64)>,
    pub(crate) end_offset: u64,
    pub(crate) end_pos: u64,
}

impl Sparse {
    /// The byte position and offset to start reading at to reach `offset`.
    fn seek(&self, first: u64, offset: u64) -> (u64, u64) {
        let i = self.marks.partition_point(|&(o, _)| o <= offset);
        if i == 0 {
            (0, first)
        } else {
            let (o, p) = self.marks[i - 1];
            (p, o)
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 8 + 16 * self.marks.len() + 20);
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&(self.marks.len() as u64).to_le_bytes());
        for (o, p) in &self.marks {
            out.extend_from_slice(&o.to_le_bytes());
            out.extend_from_slice(&p.to_le_bytes());
        }
        out.extend_from_slice(&self.end_offset.to_le_bytes());
        out.extend_from_slice(&self.end_pos.to_le_bytes());
        let sum = crc(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Option<Sparse> {
        let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc(body) != u32::from_le_bytes(sum.try_into().ok()?) || !body.starts_with(INDEX_MAGIC) {
            return None;
        }
        let u64_at =
            |i: usize| body.get(i..i + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let n = usize::try_from(u64_at(8)?).ok()?;
        if body.len() != n.checked_mul(16)?.checked_add(32)? {
            return None;
        }
        let marks =
            (0..n).map(|i| Some((u64_at(16 + 16 * i)?, u64_at(24 + 16 * i)?))).collect::<Option<_>>()?;
        Some(Sparse { marks, end_offset: u64_at(16 + 16 * n)?, end_pos: u64_at(24 + 16 * n)? })
    }
}

/// What a scan of a segment's groups found.
pub(crate) struct Scan {
    /// The whole groups' sparse index.
    pub(crate) sparse: Sparse,
    /// Where the first group that is not whole starts, and why it is not, when one is.
    pub(crate) broken: Option<(u64, u64, String)>,
}

/// What [`scan`] calls with each entry (its offset and bytes).
pub(crate) type OnEntry<'a> = dyn FnMut(u64, &[u8]) + 'a;

/// Reads a segment's groups from its start, checking every entry's CRC and every group end,
/// until the end of the file or the first group that is not whole.
/// `on_entry`, when given, is called with each entry of a whole group, in order (the group's
/// entries are held until its end is checked, so only then).
pub(crate) fn scan(
    file: &File,
    path: &Path,
    first: u64,
    mut on_entry: Option<&mut OnEntry<'_>>,
) -> Result<Scan, RecordError> {
    let len = file.metadata().map_err(io_error(path))?.len();
    let mut frames = Frames::new(file, path, 0, len);
    let mut sparse = Sparse { marks: Vec::new(), end_offset: first, end_pos: 0 };
    let mut offset = first;
    let mut group_start = 0u64;
    let mut group_crc = crc_fast::Digest::new(CrcAlgorithm::Crc32Iscsi);
    let mut group_marks = Vec::new();
    let mut group_entries: Vec<Vec<u8>> = Vec::new();
    let broken = loop {
        let at = frames.position();
        let frame = match frames.next() {
            Ok(Some(f)) => f,
            Ok(None) if at == group_start => break None,
            Ok(None) => {
                break Some((group_start, sparse.end_offset, "the last group has no end".to_string()))
            }
            Err(RecordError::DamagedSegment { reason, .. }) => {
                break Some((group_start, sparse.end_offset, reason))
            }
            Err(e) => return Err(e),
        };
        match frame {
            Frame::Entry(bytes) => {
                if (offset - first).is_multiple_of(INDEX_EVERY) {
                    group_marks.push((offset, at));
                }
                let len = bytes.len() as u32;
                group_crc.update(&len.to_le_bytes());
                group_crc.update(&crc(bytes).to_le_bytes());
                group_crc.update(bytes);
                if on_entry.is_some() {
                    group_entries.push(bytes.to_vec());
                }
                offset += 1;
            }
            Frame::GroupEnd { crc: sum } => {
                if at == group_start || group_crc.finalize() as u32 != sum {
                    let why = if at == group_start {
                        "a group without entries"
                    } else {
                        "a group's CRC-32C does not match"
                    };
                    break Some((group_start, sparse.end_offset, why.to_string()));
                }
                sparse.marks.append(&mut group_marks);
                if let Some(f) = on_entry.as_mut() {
                    for (i, e) in group_entries.drain(..).enumerate() {
                        f(sparse.end_offset + i as u64, &e);
                    }
                }
                sparse.end_offset = offset;
                group_start = frames.position();
                sparse.end_pos = group_start;
                group_crc = crc_fast::Digest::new(CrcAlgorithm::Crc32Iscsi);
            }
        }
    };
    Ok(Scan { sparse, broken })
}

/// One segment file.
pub(crate) struct Segment {
    pub(crate) first: u64,
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    /// Loaded on first use for a sealed segment; always loaded (and growing) for the open one.
    sparse: RwLock<Option<Arc<Sparse>>>,
}

impl Segment {
    /// The error for `offset`, which this segment, ending at `end`, does not lead up to.
    fn ends_before(&self, offset: u64, end: u64, and: &str) -> RecordError {
        RecordError::Corrupt { offset, reason: format!("{} ends at offset {end}{and}", self.path.display()) }
    }

    /// This segment's sparse index: kept, read from its `.idx`, or rebuilt by a scan.
    fn sparse(&self) -> Result<Arc<Sparse>, RecordError> {
        if let Some(s) = &*self.sparse.read().expect("segment index lock") {
            return Ok(Arc::clone(s));
        }
        let len = self.file.metadata().map_err(io_error(&self.path))?.len();
        let from_file = std::fs::read(index_path(&self.path))
            .ok()
            .and_then(|b| Sparse::decode(&b))
            .filter(|s| s.end_pos == len);
        let sparse = match from_file {
            Some(s) => s,
            None => {
                let scan = scan(&self.file, &self.path, self.first, None)?;
                if let Some((at, _, why)) = scan.broken {
                    return Err(damaged(&self.path, at, format!("a sealed segment: {why}")));
                }
                scan.sparse
            }
        };
        let sparse = Arc::new(sparse);
        *self.sparse.write().expect("segment index lock") = Some(Arc::clone(&sparse));
        Ok(sparse)
    }
}

/// The segments of one record, by first offset; the last is the open one, appended to.
pub(crate) struct Segments {
    pub(crate) dir: PathBuf,
    /// The open segment is sealed once it holds this many bytes ([`SEGMENT_BYTES`]).
    seal_at: u64,
    set: RwLock<BTreeMap<u64, Arc<Segment>>>,
    writer: Mutex<Vec<u8>>,
}

/// What opening the segments found.
pub(crate) struct Opened {
    pub(crate) segments: Segments,
    /// The offset after the last whole entry: the open segment's end, which for an empty open
    /// segment is its first offset (`segments_from` when there is no segment).
    pub(crate) next_offset: u64,
}

impl Segments {
    /// Opens the segments in `dir` (created when missing). The open segment is scanned: a last
    /// group that is not whole, and not below `acknowledged` (which every event below was), is
    /// a write torn by a crash and is cut off; any other failing group is damage.
    pub(crate) fn open(
        dir: &Path,
        segments_from: u64,
        acknowledged: u64,
        seal_at: u64,
    ) -> Result<Opened, RecordError> {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir).map_err(io_error(dir))?;
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        let mut firsts = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
            let entry = entry.map_err(io_error(dir))?;
            let name = entry.file_name();
            let Some(first) =
                name.to_str().and_then(|n| n.strip_suffix(".seg")).and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            firsts.push(first);
        }
        firsts.sort_unstable();
        if let Some(&lowest) = firsts.first() {
            if lowest != segments_from {
                return Err(damaged(
                    &segment_path(dir, lowest),
                    0,
                    format!("the first segment starts at offset {lowest}, but the record's segments begin at {segments_from}"),
                ));
            }
        }
        let mut set = BTreeMap::new();
        let mut next_offset = segments_from;
        for (i, &first) in firsts.iter().enumerate() {
            let path = segment_path(dir, first);
            let file = File::options().read(true).write(true).open(&path).map_err(io_error(&path))?;
            let mut sparse = None;
            if i + 1 == firsts.len() {
                let scan = scan(&file, &path, first, None)?;
                if let Some((at, from_offset, why)) = scan.broken {
                    if from_offset < acknowledged {
                        return Err(damaged(
                            &path,
                            at,
                            format!("{why}, at offset {from_offset}, below {acknowledged}, which was acknowledged"),
                        ));
                    }
                    let len = file.metadata().map_err(io_error(&path))?.len();
                    tracing::warn!(
                        segment = %path.display(),
                        cut_at = at,
                        bytes = len - at,
                        reason = %why,
                        "the record's last group was torn by a crash before it was acknowledged; cutting it off"
                    );
                    file.set_len(at).and_then(|()| file.sync_all()).map_err(io_error(&path))?;
                }
                next_offset = scan.sparse.end_offset;
                sparse = Some(Arc::new(scan.sparse));
            }
            set.insert(first, Arc::new(Segment { first, path, file, sparse: RwLock::new(sparse) }));
        }
        Ok(Opened {
            segments: Segments {
                dir: dir.to_path_buf(),
                seal_at,
                set: RwLock::new(set),
                writer: Mutex::new(Vec::new()),
            },
            next_offset,
        })
    }

    /// The segment holding `offset` (the one with the greatest first offset at or below it).
    fn holding(&self, offset: u64) -> Option<Arc<Segment>> {
        self.set.read().expect("segments lock").range(..=offset).next_back().map(|(_, s)| Arc::clone(s))
    }

    /// Calls `f` with each entry from offset `from` up to `to` (exclusive), in order, until it
    /// returns false. Every offset in the range must be stored.
    pub(crate) fn for_each(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(u64, &[u8]) -> Result<bool, RecordError>,
    ) -> Result<(), RecordError> {
        let mut at = from;
        while at < to {
            let seg = self.holding(at).ok_or_else(|| RecordError::Corrupt {
                offset: at,
                reason: format!("no segment in {} holds it", self.dir.display()),
            })?;
            let sparse = seg.sparse()?;
            if at >= sparse.end_offset {
                return Err(seg.ends_before(at, sparse.end_offset, ", and no segment follows it"));
            }
            let (pos, mut offset) = sparse.seek(seg.first, at);
            // The entries from the mark to `to` (plus the group ends among them).
            let entries = to.min(sparse.end_offset) - offset + 1;
            let mut frames = Frames::for_entries(&seg.file, &seg.path, pos, sparse.end_pos, entries);
            while offset < to {
                let Some(frame) = frames.next()? else { break };
                let Frame::Entry(bytes) = frame else { continue };
                if offset >= at && !f(offset, bytes)? {
                    return Ok(());
                }
                offset += 1;
            }
            at = offset.max(at);
            if offset < to && offset < sparse.end_offset {
                return Err(damaged(
                    &seg.path,
                    frames.position(),
                    format!("the segment ends before offset {offset}"),
                ));
            }
        }
        Ok(())
    }

    /// A group to write: fill it with [`Group::entry`], then [`Group::commit`] it.
    pub(crate) fn group(&self) -> Group<'_> {
        let mut buf = self.writer.lock().expect("segment writer lock");
        buf.clear();
        Group { segments: self, buf, starts: Vec::new() }
    }

    /// The segment the group from offset `first` goes to: the open one, or a new one when the
    /// open one is full (sealed here) or there is none.
    fn open_for(&self, first: u64) -> Result<Arc<Segment>, RecordError> {
        let last = self.set.read().expect("segments lock").values().next_back().cloned();
        if let Some(seg) = last {
            let sparse = seg.sparse()?;
            if sparse.end_offset != first {
                return Err(seg.ends_before(first, sparse.end_offset, ", where the next group was to start"));
            }
            if sparse.end_pos < self.seal_at {
                return Ok(seg);
            }
            let idx = index_path(&seg.path);
            let write = || -> std::io::Result<()> {
                let mut f = File::create(&idx)?;
                f.write_all(&sparse.encode())?;
                f.sync_all()
            };
            write().map_err(io_error(&idx))?;
        }
        let path = segment_path(&self.dir, first);
        let file =
            File::options().read(true).write(true).create_new(true).open(&path).map_err(io_error(&path))?;
        sync_dir(&self.dir)?;
        let sparse = Sparse { marks: Vec::new(), end_offset: first, end_pos: 0 };
        let seg = Arc::new(Segment { first, path, file, sparse: RwLock::new(Some(Arc::new(sparse))) });
        self.set.write().expect("segments lock").insert(first, Arc::clone(&seg));
        Ok(seg)
    }

    /// Every segment, in offset order.
    pub(crate) fn all(&self) -> Vec<Arc<Segment>> {
        self.set.read().expect("segments lock").values().cloned().collect()
    }
}

/// One group's entries, encoded into the writer's buffer.
pub(crate) struct Group<'s> {
    segments: &'s Segments,
    buf: std::sync::MutexGuard<'s, Vec<u8>>,
    /// Where each entry's frame starts in `buf`.
    starts: Vec<usize>,
}

impl Group<'_> {
    /// Adds the next entry, whose bytes `encode` appends.
    pub(crate) fn entry(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; HEADER]);
        encode(&mut self.buf);
        let body = &self.buf[start + HEADER..];
        let len = u32::try_from(body.len()).expect("an entry is far below 4 GiB");
        let sum = crc(body);
        self.buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
        self.buf[start + 4..start + HEADER].copy_from_slice(&sum.to_le_bytes());
        self.starts.push(start);
    }

    /// Writes the group's entries (the first at offset `first`) and its end at the end of the
    /// open segment, and makes them durable (`fdatasync`). Nothing of a group whose commit
    /// failed may be acknowledged.
    pub(crate) fn commit(mut self, first: u64) -> Result<(), RecordError> {
        if self.starts.is_empty() {
            return Ok(());
        }
        let sum = crc(&self.buf);
        self.buf.extend_from_slice(&0u32.to_le_bytes());
        self.buf.extend_from_slice(&sum.to_le_bytes());
        let seg = self.segments.open_for(first)?;
        let at = seg.sparse()?.end_pos;
        seg.file.write_all_at(&self.buf, at).map_err(io_error(&seg.path))?;
        seg.file.sync_data().map_err(io_error(&seg.path))?;
        let mut guard = seg.sparse.write().expect("segment index lock");
        let sparse = Arc::make_mut(guard.as_mut().expect("the open segment's index is loaded"));
        for (i, &start) in self.starts.iter().enumerate() {
            let offset = first + i as u64;
            if (offset - seg.first).is_multiple_of(INDEX_EVERY) {
                sparse.marks.push((offset, at + start as u64));
            }
        }
        sparse.end_offset = first + self.starts.len() as u64;
        sparse.end_pos = at + self.buf.len() as u64;
        Ok(())
    }
}

/// Checks every segment in order (what `livestate verify` runs on them): each starts where the
/// one before ended (at `expected`, moved past the last whole entry), every entry's and group's
/// CRC-32C, no group without its end, a sealed segment's `.idx` against its scan, and each
/// entry as `decode` reads it (`Some` is what is wrong with it). False when reading stopped
/// before the end.
pub(crate) fn check(
    segments: &Segments,
    expected: &mut u64,
    problems: &mut Vec<String>,
    decode: &mut dyn FnMut(u64, &[u8]) -> Option<String>,
) -> bool {
    let all = segments.all();
    for (i, seg) in all.iter().enumerate() {
        if seg.first != *expected {
            problems.push(format!(
                "{}: the segment starts at offset {}, but the one before it ends at {}",
                seg.path.display(),
                seg.first,
                *expected
            ));
        }
        let mut bad = Vec::new();
        let scanned = scan(
            &seg.file,
            &seg.path,
            seg.first,
            Some(&mut |offset, bytes| {
                if let Some(why) = decode(offset, bytes) {
                    bad.push(format!("{}: offset {offset}: {why}", seg.path.display()));
                }
            }),
        );
        problems.append(&mut bad);
        let scanned = match scanned {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("{}: reading stops: {e}", seg.path.display()));
                return false;
            }
        };
        *expected = scanned.sparse.end_offset;
        if let Some((at, offset, why)) = scanned.broken {
            problems.push(format!("{}: at byte {at} (offset {offset}): {why}", seg.path.display()));
            return false;
        }
        let idx = index_path(&seg.path);
        let sealed = i + 1 < all.len();
        match std::fs::read(&idx) {
            Ok(bytes) if Sparse::decode(&bytes).as_ref() != Some(&scanned.sparse) => problems.push(format!(
                "{}: the sparse index does not match its segment (it is rebuilt by a scan when read)",
                idx.display()
            )),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound && sealed => problems.push(format!(
                "{}: a sealed segment has no sparse index (it is rebuilt by a scan when read)",
                idx.display()
            )),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => problems.push(format!("{}: cannot read: {e}", idx.display())),
        }
    }
    true
}
