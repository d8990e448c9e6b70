/* SPDX-License-Identifier: MIT */
/* The ranks of a data-parallel `fucina pretrain` / `sft`: fc_lm_parallel
 * over MPI point-to-point and broadcast on MPI_COMM_WORLD. A launcher is
 * recognized by the world size it exports (OpenMPI's OMPI_COMM_WORLD_SIZE,
 * PMI/PMIx's PMI_SIZE), so a plain `fucina pretrain` never starts MPI. */
#include "cli/train_ranks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FUCINA_HAVE_MPI
#include <mpi.h>
#endif

/* The world size a launcher announced, or 1. */
static int launched_size(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1) return atoi(v);
    }
    return 1;
}

#ifdef FUCINA_HAVE_MPI
/* MPI counts are ints: a buffer moves in pieces of at most 1 GiB. */
#define PIECE ((size_t)1 << 30)

typedef enum xfer { XFER_SEND, XFER_RECV, XFER_BCAST } xfer;

static int move(xfer how, int peer, void *data, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += PIECE) {
        char *p = (char *)data + o;
        const int n = (int)(bytes - o < PIECE ? bytes - o : PIECE);
        int rc = MPI_SUCCESS;
        switch (how) {
        case XFER_SEND: rc = MPI_Send(p, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD); break;
        case XFER_RECV: rc = MPI_Recv(p, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); break;
        case XFER_BCAST: rc = MPI_Bcast(p, n, MPI_BYTE, peer, MPI_COMM_WORLD); break;
        }
        if (rc != MPI_SUCCESS) return -1;
    }
    return 0;
}

static int mpi_send(void *user, int to, const void *data, size_t bytes)
{
    (void)user;
    return move(XFER_SEND, to, (void *)(uintptr_t)data, bytes);
}

static int mpi_recv(void *user, int from, void *data, size_t bytes)
{
    (void)user;
    return move(XFER_RECV, from, data, bytes);
}

static int mpi_broadcast(void *user, int root, void *data, size_t bytes)
{
    (void)user;
    return move(XFER_BCAST, root, data, bytes);
}
#endif

int cli_ranks_begin(const char *cmd, cli_ranks *r)
{
    memset(r, 0, sizeof *r);
    r->par.size = 1;
    const int size = launched_size();
    if (size == 1) return 0;
#ifdef FUCINA_HAVE_MPI
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "fucina %s: MPI_Init failed (launched with %d ranks)\n", cmd, size);
        return -1;
    }
    r->mpi = 1;
    /* failures come back as codes: the rank reports what failed, then aborts the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &r->par.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->par.size);
    r->par.send = mpi_send;
    r->par.recv = mpi_recv;
    r->par.broadcast = mpi_broadcast;
    return 0;
#else
    fprintf(stderr,
            "fucina %s: launched as one of %d ranks, but this fucina was built without MPI (install an MPI, e.g. "
            "Debian's libopenmpi-dev, and rebuild); refusing to train %d copies side by side\n",
            cmd, size, size);
    return -1;
#endif
}

void cli_ranks_end(cli_ranks *r, int rc)
{
#ifdef FUCINA_HAVE_MPI
    if (!r->mpi) return;
    if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Finalize();
#else
    (void)r, (void)rc;
#endif
}
