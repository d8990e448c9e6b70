/* SPDX-License-Identifier: MIT */
/* Atomic file replacement: write to a temporary file next to the
 * destination, fsync it, then rename it over the destination. A reader sees
 * either the old file or the complete new one, never a torn write; after a
 * crash the destination is one of the two (a stray temporary may remain only
 * if the process dies between create and rename).
 *
 * Every failure records an FC_ERR_IO message in the context (naming the op,
 * the path and strerror) and removes the temporary file; the destination is
 * never touched until the rename. Shared by the safetensors and GGUF writers. */
#ifndef FC_IO_ATOMIC_FILE_H
#define FC_IO_ATOMIC_FILE_H

#include <stddef.h>

#include "fucina/ctx.h"

typedef struct fc_atomic_file {
    fc_ctx *ctx;
    const char *op;  /* for messages, e.g. "fc_safetensors_save" */
    char *path;      /* the destination */
    char *tmp;       /* the temporary file, NULL once renamed or removed */
    int fd;
} fc_atomic_file;

/* 1 if path may be replaced: it does not exist or is a regular file (a
 * symlink is followed). A directory, device, FIFO or socket is refused: the
 * rename would replace /dev/null with a regular file. Records FC_ERR_IO
 * naming the path and its kind and returns 0 otherwise. fc_atomic_open checks
 * it too; a command calls it before its work so a bad destination fails fast. */
int fc_atomic_check_dest(fc_ctx *ctx, const char *op, const char *path);
/* NULL when path is a regular file (a symlink is followed) or does not
 * exist; else what it is: "a directory", "a FIFO", "a character device",
 * ... (stat only: nothing is opened, so a FIFO cannot block). */
const char *fc_io_nonregular_kind(const char *path);
/* 1 when a and b (either may be NULL) name one existing file (the same
 * device and inode: a link or another spelling of the path counts), so a
 * command can refuse to write its output over its input. */
int fc_same_file(const char *a, const char *b);
/* Create the temporary file "<path>.tmp.<pid>.<n>" (same directory, so the
 * rename cannot cross filesystems; mode 0666 minus the umask, like a plain
 * create). Returns 0 and records the error on failure. */
int fc_atomic_open(fc_atomic_file *af, fc_ctx *ctx, const char *op, const char *path);
/* Append n bytes (retries short writes and EINTR). On failure the file is
 * aborted (fc_atomic_abort) and 0 returned. */
int fc_atomic_write(fc_atomic_file *af, const void *data, size_t n);
/* fsync, close, rename over the destination, fsync the directory. On
 * failure the temporary is removed and 0 returned. */
int fc_atomic_commit(fc_atomic_file *af);
/* Close and remove the temporary; safe to call more than once. */
void fc_atomic_abort(fc_atomic_file *af);

/* Remove the open temporaries on SIGINT, SIGTERM and SIGHUP, then die by
 * the signal as before (the handler uses only unlink, sigaction and raise).
 * A signal the process ignores stays ignored. For a command that writes a
 * large file (quantize, make-model): ^C would leave a *.tmp.PID.N behind. */
void fc_atomic_cleanup_on_signals(void);

/* A path shortened for messages (its last ~120 bytes), into buf. */
const char *fc_io_path_for_msg(const char *path, char *buf, size_t cap);

#endif
