/*
 * A storage fault injector, loaded into the `livestate` binary with LD_PRELOAD by
 * tests/storage_faults.rs. It wraps the libc calls that write file contents or make them durable
 * and fails those on files whose path contains FAULT_PATH, as a full or failing disk would.
 *
 * Configuration (environment):
 *   FAULT_PATH         fail only calls on a file whose path (readlink /proc/self/fd/N) contains this
 *   FAULT_MODE         enospc      write-family calls fail with ENOSPC (a full disk)
 *                      eio-write   write-family calls fail with EIO
 *                      eio-fsync   fsync and fdatasync of a file written since its last sync fail
 *                                  with EIO (the writes themselves succeed), as when the disk
 *                                  cannot write back dirty pages; a sync with nothing to write passes
 *   FAULT_AFTER_BYTES  for enospc and eio-write: this many bytes are written to matching files first
 *                      (a write crossing the limit is cut short there, as a disk filling up does)
 *   FAULT_AFTER_CALLS  this many matching calls succeed first
 *   FAULT_ARM_FILE     inject only while this file exists (so a test can turn the fault on and off
 *                      in a running process)
 *   FAULT_COUNTER      after each injected fault, the total number injected is written to this file,
 *                      so the test can check the fault really fired
 *
 * Build: cc -shared -fPIC -o libinject.so inject.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum mode { MODE_NONE, MODE_ENOSPC, MODE_EIO_WRITE, MODE_EIO_FSYNC };

static enum mode fault_mode = MODE_NONE;
static const char *fault_path;
static const char *arm_file;
static const char *counter_file;
static long long after_bytes = -1;
static long long after_calls = -1;
static long long bytes_written;
static long long calls_seen;
static long long injected;
/* Descriptors with writes not yet synced (eio-fsync fails only their syncs). */
#define MAX_FD 65536
static unsigned char dirty[MAX_FD];

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off64_t);
static ssize_t (*real_pwritev64v2)(int, const struct iovec *, int, off64_t, int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);

__attribute__((constructor)) static void fault_init(void) {
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_pwritev64 = dlsym(RTLD_NEXT, "pwritev64");
    real_pwritev64v2 = dlsym(RTLD_NEXT, "pwritev64v2");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_close = dlsym(RTLD_NEXT, "close");
    const char *m = getenv("FAULT_MODE");
    if (m == NULL) return;
    if (strcmp(m, "enospc") == 0) fault_mode = MODE_ENOSPC;
    else if (strcmp(m, "eio-write") == 0) fault_mode = MODE_EIO_WRITE;
    else if (strcmp(m, "eio-fsync") == 0) fault_mode = MODE_EIO_FSYNC;
    fault_path = getenv("FAULT_PATH");
    arm_file = getenv("FAULT_ARM_FILE");
    counter_file = getenv("FAULT_COUNTER");
    const char *b = getenv("FAULT_AFTER_BYTES");
    if (b != NULL) after_bytes = atoll(b);
    const char *c = getenv("FAULT_AFTER_CALLS");
    if (c != NULL) after_calls = atoll(c);
}

/* Whether `fd` is a file the fault applies to. */
static int matches(int fd) {
    if (fault_mode == MODE_NONE || fault_path == NULL) return 0;
    if (arm_file != NULL && access(arm_file, F_OK) != 0) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = '\0';
    return strstr(target, fault_path) != NULL;
}

static void count_injection(void) {
    long long n = __atomic_add_fetch(&injected, 1, __ATOMIC_SEQ_CST);
    if (counter_file == NULL) return;
    int fd = open(counter_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    char text[32];
    int len = snprintf(text, sizeof text, "%lld\n", n);
    real_write(fd, text, (size_t)len);
    close(fd);
}

/*
 * For a write-family call of `len` bytes on a matching file: how many bytes may be written
 * (len when the call passes untouched), or -1 with errno set when the call fails. With `whole`,
 * a call the limit would cut short fails instead (vectored writes are not split).
 */
static ssize_t write_budget(int fd, size_t len, int whole) {
    if (fault_mode != MODE_ENOSPC && fault_mode != MODE_EIO_WRITE) return (ssize_t)len;
    if (!matches(fd)) return (ssize_t)len;
    if (after_calls >= 0 && __atomic_add_fetch(&calls_seen, 1, __ATOMIC_SEQ_CST) <= after_calls)
        return (ssize_t)len;
    if (after_bytes >= 0) {
        long long before = __atomic_fetch_add(&bytes_written, (long long)len, __ATOMIC_SEQ_CST);
        if (before + (long long)len <= after_bytes) return (ssize_t)len;
        if (before < after_bytes && !whole) return (ssize_t)(after_bytes - before); /* cut short */
    }
    count_injection();
    errno = fault_mode == MODE_ENOSPC ? ENOSPC : EIO;
    return -1;
}

static void mark_dirty(int fd, ssize_t written) {
    if (fault_mode == MODE_EIO_FSYNC && written > 0 && fd >= 0 && fd < MAX_FD) dirty[fd] = 1;
}

static int sync_fails(int fd) {
    if (fault_mode != MODE_EIO_FSYNC || fd < 0 || fd >= MAX_FD || !dirty[fd] || !matches(fd)) return 0;
    if (after_calls >= 0 && __atomic_add_fetch(&calls_seen, 1, __ATOMIC_SEQ_CST) <= after_calls) return 0;
    count_injection();
    errno = EIO;
    return 1;
}

static size_t iov_len(const struct iovec *iov, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += iov[i].iov_len;
    return total;
}

ssize_t write(int fd, const void *buf, size_t len) {
    ssize_t ok = write_budget(fd, len, 0);
    if (ok < 0) return -1;
    ssize_t n = real_write(fd, buf, (size_t)ok);
    mark_dirty(fd, n);
    return n;
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off) {
    ssize_t ok = write_budget(fd, len, 0);
    if (ok < 0) return -1;
    ssize_t n = real_pwrite64(fd, buf, (size_t)ok, off);
    mark_dirty(fd, n);
    return n;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off) {
    return pwrite64(fd, buf, len, (off64_t)off);
}

/* Vectored writes pass whole or fail whole. */
ssize_t writev(int fd, const struct iovec *iov, int n) {
    size_t len = iov_len(iov, n);
    if (write_budget(fd, len, 1) < 0) return -1;
    ssize_t w = real_writev(fd, iov, n);
    mark_dirty(fd, w);
    return w;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off64_t off) {
    size_t len = iov_len(iov, n);
    if (write_budget(fd, len, 1) < 0) return -1;
    ssize_t w = real_pwritev64(fd, iov, n, off);
    mark_dirty(fd, w);
    return w;
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off) {
    return pwritev64(fd, iov, n, (off64_t)off);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off64_t off, int flags) {
    size_t len = iov_len(iov, n);
    if (write_budget(fd, len, 1) < 0) return -1;
    ssize_t w = real_pwritev64v2(fd, iov, n, off, flags);
    mark_dirty(fd, w);
    return w;
}

ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags) {
    return pwritev64v2(fd, iov, n, (off64_t)off, flags);
}

/* A failed sync leaves the descriptor dirty: as after a real EIO, what reached the disk is unknown. */
int fsync(int fd) {
    if (sync_fails(fd)) return -1;
    int r = real_fsync(fd);
    if (r == 0 && fd >= 0 && fd < MAX_FD) dirty[fd] = 0;
    return r;
}

int fdatasync(int fd) {
    if (sync_fails(fd)) return -1;
    int r = real_fdatasync(fd);
    if (r == 0 && fd >= 0 && fd < MAX_FD) dirty[fd] = 0;
    return r;
}

/* A closed descriptor's number is reused for another file, which starts clean. */
int close(int fd) {
    if (fd >= 0 && fd < MAX_FD) dirty[fd] = 0;
    return real_close(fd);
}
