/* LD_PRELOAD shim for AArch64 test binaries run under qemu-user without
 * binfmt_misc (containers, CI): re-routes execve() of an AArch64 ELF through
 * qemu-aarch64.
 *
 * Why: Criterion runs every test in a worker that BoxFort starts with
 * fork() + execve(readlink("/proc/self/exe"), "boxfort-worker"). Under
 * qemu-user that execve reaches the host kernel with the path of the AArch64
 * test binary, which the kernel cannot run unless qemu is registered with
 * binfmt_misc: "criterion: Could not spawn test instance: Protocol error".
 * Here such an execve becomes
 *     execve(QEMU, [QEMU, <qemu args>, -0, argv[0], -E, LD_PRELOAD=<this>, path, argv[1..]])
 * so the worker runs under qemu too, in the same process (same pid, which
 * BoxFort relies on).
 *
 * Configuration, in the guest environment (the emulator line in
 * cmake/toolchain-aarch64.cmake sets both with qemu's -E):
 *   LD_PRELOAD=<this .so>   removed from the environment once loaded, so
 *                           host programs started by the tests (popen's
 *                           /bin/sh) do not see an AArch64 preload
 *   FUCINA_QEMU=<qemu> [args...]  space-separated, e.g.
 *                           "/usr/bin/qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu"
 *
 * Built by .ci/aarch64-sysroot.sh with aarch64-linux-gnu-gcc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static char self_path[4096];

__attribute__((constructor)) static void shim_init(void)
{
    Dl_info info;
    if (dladdr((void *)&shim_init, &info) && info.dli_fname) {
        size_t n = strlen(info.dli_fname);
        if (n < sizeof self_path) memcpy(self_path, info.dli_fname, n + 1);
    }
    unsetenv("LD_PRELOAD");
}

/* An ELF file for EM_AARCH64 (183)? */
static int is_aarch64_elf(const char *path)
{
    unsigned char h[20];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, h, sizeof h);
    close(fd);
    if (n != (ssize_t)sizeof h || memcmp(h, "\177ELF", 4) != 0) return 0;
    unsigned machine = h[5] == 2 ? (unsigned)h[18] << 8 | h[19] : (unsigned)h[19] << 8 | h[18];
    return machine == 183;
}

static int raw_execve(const char *path, char *const argv[], char *const envp[])
{
    return (int)syscall(SYS_execve, path, argv, envp);
}

int execve(const char *path, char *const argv[], char *const envp[])
{
    const char *cfg = getenv("FUCINA_QEMU");
    if (!cfg || !*cfg || !self_path[0] || !is_aarch64_elf(path)) return raw_execve(path, argv, envp);

    size_t argc = 0;
    while (argv[argc]) argc++;
    char *words = strdup(cfg);
    size_t cap = argc + 16 + strlen(cfg) / 2 + 1;
    char **nargv = calloc(cap, sizeof *nargv);
    char *preload = malloc(strlen(self_path) + sizeof "LD_PRELOAD=");
    if (!words || !nargv || !preload) {
        errno = ENOMEM;
        return -1;
    }
    strcpy(preload, "LD_PRELOAD=");
    strcat(preload, self_path);

    size_t k = 0;
    char *save = NULL;
    for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) nargv[k++] = w;
    if (k == 0) return raw_execve(path, argv, envp);
    if (argc > 0) {
        nargv[k++] = "-0";
        nargv[k++] = argv[0];
    }
    nargv[k++] = "-E";
    nargv[k++] = preload;
    nargv[k++] = (char *)path;
    for (size_t i = 1; i < argc; i++) nargv[k++] = argv[i];
    nargv[k] = NULL;
    return raw_execve(nargv[0], nargv, envp);
}
