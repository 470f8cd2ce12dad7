//! The OpenDAL operator a local warehouse's tables are read and written through: the filesystem
//! service, with reads sized to what they return.
//!
//! The `paimon` crate reads a whole file (a snapshot, a manifest, a schema, a hint, a tag) with
//! an unbounded read. OpenDAL's filesystem service answers one with positioned reads of up to
//! 2 MiB: it zero-fills a 2 MiB buffer for a file of a few kilobytes, then takes a second 2 MiB
//! buffer to learn that the file has ended, and the bytes it returns are a slice of that buffer,
//! so the whole buffer stays allocated while anything holds them; the service also keeps up to
//! 16 such buffers pooled for later reads. Under a steady load that was most of the server's
//! memory growth and, at the end of an hour, most of its CPU (docs/BENCHMARKS.md, "Soak").
//!
//! [`ExactReads`] asks the file's length first and reads exactly that many bytes, and it copies
//! every buffer it returns into an allocation of the buffer's own length, so nothing a caller
//! keeps pins a pooled buffer. It also reads in pieces of at most 256 KiB, the size the service's
//! pooled buffers start at: a pooled buffer grows to the largest read it serves and never
//! shrinks, so with OpenDAL's 2 MiB pieces every read of a file over 2 MiB (compaction reads
//! whole data files) left one more of the 16 pooled buffers at 2 MiB, and the pool grew toward
//! 32 MiB over a long run. A read of a range with an end passes through unchanged but for the
//! copy and the pieces. What an unbounded read returns is the file as long as it was when the
//! read began: Paimon writes its data and manifest files once, and a file rewritten in place (a
//! hint or a tag) can be met half-written by either kind of read.

use std::sync::Arc;

use opendal::raw::oio::{self, ReadStreamDyn};
use opendal::raw::{
    Layer, OpCopier, OpCopy, OpCreateDir, OpList, OpPresign, OpRead, OpRename, OpStat, OpWrite, RpCreateDir,
    RpPresign, RpRead, RpRename, RpStat, Service, ServiceInfo, Servicer,
};
use opendal::{Buffer, BytesRange, Capability, ErrorKind, OperationContext, Operator, Result};
use opendal_service_fs::FsConfig;

/// Largest single positioned read: the filesystem service's pooled buffers are created with
/// this capacity (opendal-service-fs's backend), and a read no bigger never grows one.
const MAX_READ: u64 = 256 * 1024;

/// The local filesystem, rooted at `/` as the `paimon` crate roots its own, with [`ExactReads`].
///
/// # Errors
/// OpenDAL's, if the filesystem service cannot be configured.
pub fn operator() -> Result<Operator> {
    let mut cfg = FsConfig::default();
    cfg.root = Some("/".to_string());
    Ok(Operator::from_config(cfg)?.layer(ExactReads))
}

/// An OpenDAL layer: unbounded reads are read to the length the file has, and every returned
/// buffer owns an allocation of its own length.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExactReads;

impl Layer for ExactReads {
    fn apply_service(&self, inner: Servicer) -> Servicer {
        Arc::new(ExactReadService { inner })
    }
}

#[derive(Debug)]
struct ExactReadService {
    inner: Servicer,
}

impl Service for ExactReadService {
    type Reader = oio::Reader;
    type Writer = oio::Writer;
    type Lister = oio::Lister;
    type Deleter = oio::Deleter;
    type Copier = oio::Copier;

    fn info(&self) -> ServiceInfo {
        self.inner.info()
    }

    fn capability(&self) -> Capability {
        self.inner.capability()
    }

    async fn create_dir(&self, ctx: &OperationContext, path: &str, args: OpCreateDir) -> Result<RpCreateDir> {
        self.inner.create_dir(ctx, path, args).await
    }

    async fn stat(&self, ctx: &OperationContext, path: &str, args: OpStat) -> Result<RpStat> {
        self.inner.stat(ctx, path, args).await
    }

    fn read(&self, ctx: &OperationContext, path: &str, args: OpRead) -> Result<Self::Reader> {
        Ok(Box::new(ExactReader {
            inner: Arc::new(self.inner.read(ctx, path, args)?),
            srv: self.inner.clone(),
            ctx: ctx.clone(),
            path: path.to_string(),
        }))
    }

    fn write(&self, ctx: &OperationContext, path: &str, args: OpWrite) -> Result<Self::Writer> {
        let Some(tmp) = replaced_through(path) else {
            return self.inner.write(ctx, path, args);
        };
        Ok(Box::new(RenameOnClose {
            inner: self.inner.write(ctx, &tmp, args)?,
            srv: self.inner.clone(),
            ctx: ctx.clone(),
            tmp,
            path: path.to_string(),
        }))
    }

    fn delete(&self, ctx: &OperationContext) -> Result<Self::Deleter> {
        self.inner.delete(ctx)
    }

    fn list(&self, ctx: &OperationContext, path: &str, args: OpList) -> Result<Self::Lister> {
        self.inner.list(ctx, path, args)
    }

    fn copy(
        &self,
        ctx: &OperationContext,
        from: &str,
        to: &str,
        args: OpCopy,
        opts: OpCopier,
    ) -> Result<Self::Copier> {
        self.inner.copy(ctx, from, to, args, opts)
    }

    async fn rename(&self, ctx: &OperationContext, from: &str, to: &str, args: OpRename) -> Result<RpRename> {
        self.inner.rename(ctx, from, to, args).await
    }

    async fn presign(&self, ctx: &OperationContext, path: &str, args: OpPresign) -> Result<RpPresign> {
        self.inner.presign(ctx, path, args).await
    }
}

/// The temporary file through which a file the `paimon` crate writes in place must be written:
/// a tag (`tag/tag-NAME`) or a snapshot hint (`snapshot/LATEST`, `snapshot/EARLIEST`). Written in
/// place, a `kill -9` mid-write leaves an empty or cut file that no Paimon reader accepts; written
/// to `.NAME.<uuid>.tmp` beside it and renamed, it is whole or absent. The temporary name starts
/// with a dot, as Java Paimon's do, so no listing of tags or snapshots takes it for one.
/// `None` for every other file (data files, manifests and snapshots are written once, under
/// names that nothing reads before a commit names them).
fn replaced_through(path: &str) -> Option<String> {
    let (dir, name) = path.rsplit_once('/')?;
    let in_place = (dir.ends_with("/tag") && name.starts_with("tag-"))
        || (dir.ends_with("/snapshot") && (name == "LATEST" || name == "EARLIEST"));
    in_place.then(|| format!("{dir}/.{name}.{}.tmp", uuid::Uuid::new_v4()))
}

/// Writes a file through its temporary file ([`replaced_through`]) and renames it into place
/// when the write closes.
struct RenameOnClose {
    inner: oio::Writer,
    srv: Servicer,
    ctx: OperationContext,
    tmp: String,
    path: String,
}

impl oio::Write for RenameOnClose {
    async fn write(&mut self, bs: Buffer) -> Result<()> {
        oio::WriteDyn::write_dyn(self.inner.as_mut(), bs).await
    }

    async fn close(&mut self) -> Result<opendal::Metadata> {
        let meta = oio::WriteDyn::close_dyn(self.inner.as_mut()).await?;
        self.srv.rename(&self.ctx, &self.tmp, &self.path, OpRename::new()).await?;
        Ok(meta)
    }

    async fn abort(&mut self) -> Result<()> {
        oio::WriteDyn::abort_dyn(self.inner.as_mut()).await
    }
}

struct ExactReader {
    inner: Arc<oio::Reader>,
    srv: Servicer,
    ctx: OperationContext,
    path: String,
}

impl oio::Read for ExactReader {
    async fn open(&self, range: BytesRange) -> Result<(RpRead, Box<dyn ReadStreamDyn>)> {
        match range.size() {
            None => {
                // The length, so that no read asks for more than the file holds. Should the file
                // not stat, the read below fails (or succeeds) exactly as it would have.
                if let Ok(stat) = self.srv.stat(&self.ctx, &self.path, OpStat::new()).await {
                    let end = stat.into_metadata().content_length();
                    let stream =
                        Pieces { reader: self.inner.clone(), pos: range.offset(), end, to_eof: true };
                    return Ok((RpRead::default(), Box::new(stream)));
                }
            }
            Some(size) if size > MAX_READ => {
                let (pos, end) = (range.offset(), range.offset().saturating_add(size));
                let stream = Pieces { reader: self.inner.clone(), pos, end, to_eof: false };
                return Ok((RpRead::default(), Box::new(stream)));
            }
            Some(_) => {}
        }
        let (rp, stream) = self.inner.open(range).await?;
        Ok((rp, Box::new(Owned(stream))))
    }

    async fn read(&self, range: BytesRange) -> Result<(RpRead, Buffer)> {
        if range.size().is_some_and(|size| size > MAX_READ) {
            // The pieces, each already in an allocation of its own, as one buffer.
            let (rp, mut stream) = oio::Read::open(self, range).await?;
            let mut pieces = Vec::new();
            loop {
                let buf = oio::ReadStream::read(&mut stream).await?;
                if buf.is_empty() {
                    return Ok((rp, pieces.into_iter().flatten().collect()));
                }
                pieces.push(buf);
            }
        }
        let (rp, buf) = self.inner.read(range).await?;
        Ok((rp, owned(buf)))
    }
}

/// Reads `[pos, end)` in bounded reads of at most [`MAX_READ`], each copied into a buffer of its
/// own. Reading to the end of the file (`to_eof`), it ends early, as an unbounded read would,
/// should the file have become shorter; reading a range, it fails as the range read would.
struct Pieces {
    reader: Arc<oio::Reader>,
    pos: u64,
    end: u64,
    to_eof: bool,
}

impl oio::ReadStream for Pieces {
    async fn read(&mut self) -> Result<Buffer> {
        if self.pos >= self.end {
            return Ok(Buffer::new());
        }
        let want = (self.end - self.pos).min(MAX_READ);
        let (_, mut stream) = oio::Read::open(&*self.reader, BytesRange::new(self.pos, Some(want))).await?;
        let mut piece = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
        loop {
            match oio::ReadStream::read(&mut stream).await {
                Ok(buf) if buf.is_empty() => break,
                Ok(buf) => buf.into_iter().for_each(|b| piece.extend_from_slice(&b)),
                Err(e) if self.to_eof && e.kind() == ErrorKind::RangeNotSatisfied => break,
                Err(e) => return Err(e),
            }
        }
        if (piece.len() as u64) < want {
            if !self.to_eof {
                return Err(opendal::Error::new(
                    ErrorKind::RangeNotSatisfied,
                    "range exceeds content length",
                )
                .with_context("offset", self.pos + piece.len() as u64)
                .with_context("remaining", self.end - self.pos - piece.len() as u64));
            }
            // The file is shorter than it was when the read began.
            self.end = self.pos + piece.len() as u64;
        }
        self.pos += piece.len() as u64;
        Ok(Buffer::from(piece))
    }
}

/// A stream whose every buffer is copied into one of its own.
struct Owned(Box<dyn ReadStreamDyn>);

impl oio::ReadStream for Owned {
    async fn read(&mut self) -> Result<Buffer> {
        oio::ReadStream::read(&mut self.0).await.map(owned)
    }
}

/// `buf` in an allocation of its own length (the service's buffers are slices of larger ones).
fn owned(buf: Buffer) -> Buffer {
    if buf.is_empty() {
        buf
    } else {
        Buffer::from(buf.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound OpenDAL's positioned reads use for their pieces, and its pooled buffers grow to.
    const OPENDAL_PIECE: usize = 2 * 1024 * 1024;

    fn path_of(p: &std::path::Path) -> String {
        p.to_string_lossy().trim_start_matches('/').to_string()
    }

    #[tokio::test]
    async fn whole_file_reads_return_every_byte_of_files_of_every_size() {
        let dir = tempfile::tempdir().unwrap();
        let op = operator().unwrap();
        let (piece, opendal) = (MAX_READ as usize, OPENDAL_PIECE);
        for len in [
            0,
            1,
            1000,
            piece - 1,
            piece,
            piece + 1,
            3 * piece + 5,
            opendal - 1,
            opendal,
            opendal + 1,
            2 * opendal + 17,
        ] {
            let content: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let file = dir.path().join(format!("f{len}"));
            std::fs::write(&file, &content).unwrap();
            let got = op.read(&path_of(&file)).await.unwrap();
            assert_eq!(got.len(), len, "length of a {len}-byte file");
            assert!(got.to_vec() == content, "bytes of a {len}-byte file");
            // From an offset to the end, and a bounded range, as the `paimon` crate asks for both.
            if len > 10 {
                let tail = op.read_with(&path_of(&file)).range(10..).await.unwrap();
                assert!(tail.to_vec() == content[10..], "tail of a {len}-byte file");
                let mid = op.read_with(&path_of(&file)).range(3..10).await.unwrap();
                assert_eq!(mid.to_vec(), content[3..10]);
                // A bounded range over several pieces.
                let inner = 7..len - 3;
                let got =
                    op.read_with(&path_of(&file)).range(inner.start as u64..inner.end as u64).await.unwrap();
                assert!(got.to_vec() == content[inner.clone()], "range {inner:?} of a {len}-byte file");
                // The same range fetched, as a Parquet reader asks for column chunks (a read of a
                // bounded range rather than a stream).
                let reader = op.reader(&path_of(&file)).await.unwrap();
                let fetched = reader.fetch(vec![0..3, inner.start as u64..inner.end as u64]).await.unwrap();
                assert_eq!(fetched[0].to_vec(), content[0..3]);
                assert!(
                    fetched[1].to_vec() == content[inner.clone()],
                    "fetched {inner:?} of a {len}-byte file"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_tag_is_absent_under_its_name_until_its_write_closes() {
        let dir = tempfile::tempdir().unwrap();
        let op = operator().unwrap();
        let tag_dir = dir.path().join("t/tag");
        std::fs::create_dir_all(&tag_dir).unwrap();
        let tag = tag_dir.join("tag-proposal-p1-s3");
        let mut w = op.writer(&path_of(&tag)).await.unwrap();
        w.write(b"{\"id\":3}".to_vec()).await.unwrap();
        // A kill now would leave no tag at all: only the temporary file, which no listing of
        // tags takes for one.
        assert!(!tag.exists(), "nothing at the tag's name before the write closes");
        let names: Vec<String> = std::fs::read_dir(&tag_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            names.len() == 1 && names[0].starts_with(".tag-proposal-p1-s3.") && names[0].ends_with(".tmp"),
            "{names:?}"
        );
        w.close().await.unwrap();
        assert_eq!(std::fs::read(&tag).unwrap(), b"{\"id\":3}");
        assert_eq!(std::fs::read_dir(&tag_dir).unwrap().count(), 1, "the temporary file was renamed");
    }

    #[tokio::test]
    async fn a_rewritten_hint_is_replaced_whole_and_data_files_are_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let op = operator().unwrap();
        let hint = dir.path().join("t/snapshot/LATEST");
        op.write(&path_of(&hint), b"12".to_vec()).await.unwrap();
        op.write(&path_of(&hint), b"9".to_vec()).await.unwrap();
        assert_eq!(std::fs::read(&hint).unwrap(), b"9");
        assert_eq!(replaced_through("w/t/bucket-0/data-1.parquet"), None);
        assert_eq!(replaced_through("w/t/snapshot/snapshot-3"), None);
        assert_eq!(replaced_through("w/t/manifest/manifest-1"), None);
    }

    #[tokio::test]
    async fn a_missing_file_fails_as_it_does_without_the_layer() {
        let dir = tempfile::tempdir().unwrap();
        let op = operator().unwrap();
        let missing = path_of(&dir.path().join("nothing-here"));
        let e = op.read(&missing).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    }

    #[tokio::test]
    async fn a_range_past_the_end_fails_as_it_does_without_the_layer() {
        let dir = tempfile::tempdir().unwrap();
        let op = operator().unwrap();
        let file = dir.path().join("short");
        std::fs::write(&file, b"0123456789").unwrap();
        let e = op.read_with(&path_of(&file)).range(5..50).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RangeNotSatisfied, "{e}");
        // And a range of several pieces that runs past the end.
        let big = dir.path().join("big");
        std::fs::write(&big, vec![7u8; MAX_READ as usize + 10]).unwrap();
        let e = op.read_with(&path_of(&big)).range(5..3 * MAX_READ).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RangeNotSatisfied, "{e}");
    }

    #[tokio::test]
    async fn a_file_that_shrinks_after_it_was_measured_is_read_to_its_new_end() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hint");
        std::fs::write(&file, b"12345").unwrap();
        let op = operator().unwrap();
        let reader = op.reader(&path_of(&file)).await.unwrap();
        // The stream measures the file when it opens; the file is then rewritten shorter.
        let mut stream = reader.into_bytes_stream(..).await.unwrap();
        std::fs::write(&file, b"12").unwrap();
        let mut got = Vec::new();
        use futures::TryStreamExt;
        while let Some(b) = stream.try_next().await.unwrap() {
            got.extend_from_slice(&b);
        }
        assert_eq!(got, b"12");
    }
}
