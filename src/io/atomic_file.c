/* SPDX-License-Identifier: MIT */
/* Temp + fsync + rename (atomic_file.h). */
#define _POSIX_C_SOURCE 200809L

#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/ctx.h"

/* Distinguishes temporaries of concurrent saves within one process (the pid
 * distinguishes processes). */
static atomic_uint tmp_counter;

/* The open temporaries, for the signal handler: a slot holds a path while
 * its file may exist (cleared before the path is freed). */
#define LIVE_SLOTS 16
static _Atomic(char *) live_tmp[LIVE_SLOTS];

static void live_add(char *tmp)
{
    for (int i = 0; i < LIVE_SLOTS; i++) {
        char *expect = NULL;
        if (atomic_compare_exchange_strong(&live_tmp[i], &expect, tmp)) return;
    }
    /* more concurrent saves than slots: that one is not cleaned on a signal */
}

static void live_remove(const char *tmp)
{
    for (int i = 0; i < LIVE_SLOTS; i++) {
        char *expect = (char *)tmp;
        if (tmp && atomic_compare_exchange_strong(&live_tmp[i], &expect, NULL)) return;
    }
}

static void on_fatal_signal(int sig)
{
    int saved = errno;
    for (int i = 0; i < LIVE_SLOTS; i++) {
        char *p = atomic_load(&live_tmp[i]);
        if (p) unlink(p);
    }
    errno = saved;
    /* SA_RESETHAND restored the default action; the signal is blocked while
     * the handler runs, so it is delivered (and kills) once it returns */
    raise(sig);
}

void fc_atomic_cleanup_on_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        (void)sigaction(sigs[i], &sa, NULL);
    }
}

const char *fc_io_path_for_msg(const char *path, char *buf, size_t cap)
{
    size_t n = strlen(path);
    if (n + 1 <= cap || cap < 8) return path;
    snprintf(buf, cap, "...%s", path + n - (cap - 4));
    return buf;
}

static void *io_fail(fc_atomic_file *af, const char *what, const char *file, int err)
{
    char pb[160];
    return fc_fail(af->ctx, FC_ERR_IO, "%s: cannot %s %s: %s", af->op, what, fc_io_path_for_msg(file, pb, sizeof pb),
                   strerror(err));
}

int fc_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

const char *fc_io_nonregular_kind(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || S_ISREG(st.st_mode)) return NULL;
    return S_ISDIR(st.st_mode)    ? "a directory"
           : S_ISCHR(st.st_mode)  ? "a character device"
           : S_ISBLK(st.st_mode)  ? "a block device"
           : S_ISFIFO(st.st_mode) ? "a FIFO"
           : S_ISSOCK(st.st_mode) ? "a socket"
                                  : "not a regular file";
}

int fc_atomic_check_dest(fc_ctx *ctx, const char *op, const char *path)
{
    const char *kind = fc_io_nonregular_kind(path);
    if (!kind) return 1; /* missing: the open reports a bad directory */
    char pb[160];
    fc_fail(ctx, FC_ERR_IO, "%s: %s exists and is %s; refusing to replace it with a regular file", op,
            fc_io_path_for_msg(path, pb, sizeof pb), kind);
    return 0;
}

int fc_atomic_open(fc_atomic_file *af, fc_ctx *ctx, const char *op, const char *path)
{
    memset(af, 0, sizeof *af);
    af->ctx = ctx;
    af->op = op;
    af->fd = -1;
    if (!fc_atomic_check_dest(ctx, op, path)) return 0;
    size_t n = strlen(path);
    af->path = malloc(n + 1);
    af->tmp = malloc(n + 48);
    if (!af->path || !af->tmp) {
        free(af->path);
        free(af->tmp);
        af->path = af->tmp = NULL;
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
        return 0;
    }
    memcpy(af->path, path, n + 1);
    /* O_EXCL with a fresh name: never opens someone else's file; a few
     * retries cover a stale temporary of an earlier crashed run with our pid. */
    for (int tries = 0; tries < 16; tries++) {
        snprintf(af->tmp, n + 48, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&tmp_counter, 1u));
        af->fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (af->fd >= 0) {
            live_add(af->tmp);
            return 1;
        }
        if (errno != EEXIST) break;
    }
    io_fail(af, "create the temporary file", af->tmp, errno);
    free(af->tmp);
    af->tmp = NULL;
    free(af->path);
    af->path = NULL;
    return 0;
}

void fc_atomic_abort(fc_atomic_file *af)
{
    if (af->fd >= 0) close(af->fd);
    af->fd = -1;
    if (af->tmp) unlink(af->tmp);
    live_remove(af->tmp);
    free(af->tmp);
    free(af->path);
    af->tmp = af->path = NULL;
}

int fc_atomic_write(fc_atomic_file *af, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        /* Linux writes at most ~2 GiB per call; smaller chunks keep every
         * platform's limit happy. */
        size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(af->fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            io_fail(af, "write", af->tmp, errno);
            fc_atomic_abort(af);
            return 0;
        }
        p += w;
        n -= (size_t)w;
    }
    return 1;
}

/* The directory holding path ("." for a bare name), into a new string. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = 0;
    }
    return d;
}

int fc_atomic_commit(fc_atomic_file *af)
{
    if (fsync(af->fd) != 0) {
        io_fail(af, "fsync", af->tmp, errno);
        fc_atomic_abort(af);
        return 0;
    }
    int fd = af->fd;
    af->fd = -1;
    if (close(fd) != 0) {
        io_fail(af, "close", af->tmp, errno);
        fc_atomic_abort(af);
        return 0;
    }
    if (rename(af->tmp, af->path) != 0) {
        io_fail(af, "rename the temporary file onto", af->path, errno);
        fc_atomic_abort(af);
        return 0;
    }
    live_remove(af->tmp);
    free(af->tmp);
    af->tmp = NULL;
    /* Make the rename itself durable. Best effort: the new file is already
     * in place and complete, and some filesystems refuse fsync on a
     * directory, so a failure here is not reported. */
    char *dir = dir_of(af->path);
    if (dir) {
        int dfd = open(dir, O_RDONLY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    free(af->path);
    af->path = NULL;
    return 1;
}
