/* Beyond INT_MAX: datatypes of more than 2^31 bytes built by the `_c` constructors and
 * measured by the `_c` queries (the `int` queries saying MPI_UNDEFINED), a message of
 * 2^31 + 16 bytes sent and received by MPI_Send_c / MPI_Recv_c, and packing datatypes that
 * reach below their buffer's address (negative displacements and strides, MPI_BOTTOM). */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define NAME "large_counts"
#include "check.h"

/* The size and true extent of `t`, which covers `expected` bytes from displacement 0. */
static void measure(MPI_Datatype t, MPI_Count expected, const char *what) {
    MPI_Count size = -1, lb = -1, extent = -1;
    int isize = 0;
    MPI_Type_size_c(t, &size);
    MPI_Type_get_true_extent_c(t, &lb, &extent);
    MPI_Type_size(t, &isize);
    CHECK(size == expected, "%s: size %lld, not %lld", what, (long long)size, (long long)expected);
    CHECK(lb == 0 && extent == expected, "%s: true extent [%lld, +%lld)", what, (long long)lb,
          (long long)extent);
    CHECK(isize == MPI_UNDEFINED, "%s: MPI_Type_size gave %d, not MPI_UNDEFINED", what, isize);
}

static void large_types(void) {
    const MPI_Count contig = 1024LL * 1024 * 2400 * 2, blocks = 2346319872LL * 3;
    MPI_Datatype t;
    MPI_Type_contiguous_c(contig, MPI_CHAR, &t);
    MPI_Type_commit(&t);
    measure(t, contig, "contiguous_c");
    MPI_Count lb = -1, ext = -1;
    MPI_Type_get_extent_c(t, &lb, &ext);
    CHECK(lb == 0 && ext == contig, "contiguous_c: extent [%lld, +%lld)", (long long)lb,
          (long long)ext);
    /* The decoders: the large-count ones give a count beyond an int among the large counts;
     * the int ones cannot, and say so rather than wrap it. */
    MPI_Count ni = -1, na = -1, nc = -1, nd = -1, got = -1;
    int comb = -1, ii = -1, ia = -1, id = -1, dcls = -1;
    MPI_Datatype inner = MPI_DATATYPE_NULL;
    MPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &comb);
    CHECK(comb == MPI_COMBINER_CONTIGUOUS && ni == 0 && na == 0 && nc == 1 && nd == 1,
          "envelope_c of contiguous_c: %lld %lld %lld %lld (combiner %d)", (long long)ni, (long long)na,
          (long long)nc, (long long)nd, comb);
    MPI_Type_get_contents_c(t, 0, 0, 1, 1, NULL, NULL, &got, &inner);
    CHECK(got == contig && inner == MPI_CHAR, "contents_c of contiguous_c: %lld", (long long)got);
    MPI_Error_class(MPI_Type_get_envelope(t, &ii, &ia, &id, &comb), &dcls);
    CHECK(dcls == MPI_ERR_VALUE_TOO_LARGE, "int envelope of contiguous_c: class %d", dcls);
    MPI_Type_free(&t);

    MPI_Count blklen = blocks / 256 / sizeof(int), displs[256];
    for (int i = 0; i < 256; i++) displs[i] = i * blklen;
    MPI_Type_create_indexed_block_c(256, blklen, displs, MPI_INT, &t);
    MPI_Type_commit(&t);
    measure(t, blocks, "indexed_block_c");
    MPI_Type_free(&t);

    MPI_Count lens[4] = {0, 1, 2, 0}, at[4] = {0, 0, 1, 3};
    lens[3] = blocks + 1 - 3;
    MPI_Type_create_hindexed_c(4, lens, at, MPI_CHAR, &t);
    MPI_Type_commit(&t);
    measure(t, blocks + 1, "hindexed_c");
    MPI_Type_free(&t);

    MPI_Type_vector_c(3, 1LL << 30, 1LL << 30, MPI_SHORT, &t);
    MPI_Type_commit(&t);
    measure(t, 3 * (2LL << 30), "vector_c");
    /* Arguments that fit in an int are described as the int constructor takes them. */
    MPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &comb);
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && nc == 0 && nd == 1, "envelope_c of vector_c: %lld %lld",
          (long long)ni, (long long)nc);
    MPI_Type_free(&t);

    /* A count that fits an int goes on as it is; a negative one is MPI_ERR_COUNT. */
    int rc = MPI_Type_contiguous_c(-5, MPI_INT, &t), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "contiguous_c of -5: class %d", cls);
    MPI_Count psize = 0;
    MPI_Pack_size_c(3LL << 30, MPI_INT, MPI_COMM_WORLD, &psize);
    CHECK(psize >= (12LL << 30), "pack_size_c of 3 Gi ints: %lld", (long long)psize);
    /* Counts no memory holds are errors, not a crash. */
    int one = 1;
    rc = MPI_Send_c(&one, 1LL << 62, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS, "send_c of 2^62 ints succeeded");
    char small[64];
    MPI_Count where = 0;
    rc = MPI_Pack_c(&one, 1LL << 61, MPI_INT, small, sizeof(small), &where, MPI_COMM_SELF);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "pack_c of 2^61 ints: class %d", cls);
    int ipsize = 0;
    rc = MPI_Pack_size(1 << 30, MPI_INT, MPI_COMM_WORLD, &ipsize);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_VALUE_TOO_LARGE, "pack_size of 1 Gi ints: class %d, size %d", cls,
          ipsize);
}

/* Datatypes whose first byte is below the buffer's address, packed and unpacked. */
static void below_the_buffer(void) {
    int src[6] = {1, 2, 3, 4, 5, 6}, back[6] = {-1, -1, -1, -1, -1, -1}, packed[4] = {0};
    MPI_Aint disps[2] = {0, -(MPI_Aint)sizeof(int)};
    int blks[2] = {1, 1}, pos = 0;
    MPI_Datatype types[2] = {MPI_INT, MPI_INT}, st, vec;
    MPI_Type_create_struct(2, blks, disps, types, &st);
    MPI_Type_commit(&st);
    /* Two elements at src + 2: {src[2], src[1]}, then {src[4], src[3]} (extent 8 bytes). */
    MPI_Pack(src + 2, 2, st, packed, sizeof(packed), &pos, MPI_COMM_SELF);
    CHECK(pos == 16 && packed[0] == 3 && packed[1] == 2 && packed[2] == 5 && packed[3] == 4,
          "struct with a negative displacement packed %d bytes: %d %d %d %d", pos, packed[0],
          packed[1], packed[2], packed[3]);
    pos = 0;
    MPI_Unpack(packed, sizeof(packed), &pos, back + 3, 1, st, MPI_COMM_SELF);
    CHECK(back[2] == 2 && back[3] == 3 && back[1] == -1 && back[4] == -1,
          "unpacked below the buffer: %d %d %d %d", back[1], back[2], back[3], back[4]);
    /* The same by MPI_Pack_c / MPI_Unpack_c, positions as MPI_Count. */
    MPI_Count cpos = 4;
    int cpacked[5] = {0}, cback[4] = {0};
    MPI_Pack_c(src + 2, 2, st, cpacked, sizeof(cpacked), &cpos, MPI_COMM_SELF);
    CHECK(cpos == 20 && cpacked[1] == 3 && cpacked[4] == 4, "pack_c: position %lld",
          (long long)cpos);
    cpos = 4;
    MPI_Unpack_c(cpacked, sizeof(cpacked), &cpos, cback + 1, 2, st, MPI_COMM_SELF);
    CHECK(cpos == 20 && cback[0] == 2 && cback[1] == 3 && cback[2] == 4 && cback[3] == 5,
          "unpack_c: position %lld, %d %d %d %d", (long long)cpos, cback[0], cback[1], cback[2],
          cback[3]);
    MPI_Type_free(&st);

    MPI_Type_vector(3, 1, -2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    pos = 0;
    MPI_Pack(src + 5, 1, vec, packed, sizeof(packed), &pos, MPI_COMM_SELF);
    CHECK(pos == 12 && packed[0] == 6 && packed[1] == 4 && packed[2] == 2,
          "vector of stride -2: %d %d %d", packed[0], packed[1], packed[2]);
    MPI_Type_free(&vec);

    /* MPI_BOTTOM: absolute addresses. */
    MPI_Aint abs[2];
    MPI_Get_address(&src[4], &abs[0]);
    MPI_Get_address(&src[0], &abs[1]);
    MPI_Datatype at;
    MPI_Type_create_hindexed(2, blks, abs, MPI_INT, &at);
    MPI_Type_commit(&at);
    pos = 0;
    MPI_Pack(MPI_BOTTOM, 1, at, packed, sizeof(packed), &pos, MPI_COMM_SELF);
    CHECK(pos == 8 && packed[0] == 5 && packed[1] == 1, "packed from MPI_BOTTOM: %d %d",
          packed[0], packed[1]);
    MPI_Type_free(&at);
}

/* 2^31 + 16 bytes from rank 0 to the last rank (to itself when alone). */
static void large_message(int size) {
    const MPI_Count n = (1LL << 31) + 16;
    int last = size - 1;
    if (rank != 0 && rank != last) return;
    /* calloc'd pages read as zeros without being touched: only the marked ones cost memory. */
    unsigned char *buf = calloc((size_t)n, 1);
    CHECK(buf != NULL, "no memory for %lld bytes", (long long)n);
    if (buf == NULL) return;
    MPI_Request req = MPI_REQUEST_NULL;
    if (rank == 0) {
        buf[0] = 7, buf[(size_t)1 << 31] = 8, buf[n - 1] = 9;
        MPI_Isend_c(buf, n, MPI_BYTE, last, 5, MPI_COMM_WORLD, &req);
    }
    if (rank == last) {
        unsigned char *in = rank == 0 ? malloc((size_t)n) : buf;
        MPI_Status st;
        int rc = MPI_Recv_c(in, n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &st);
        MPI_Count got = -1;
        int igot = 0;
        MPI_Get_count_c(&st, MPI_BYTE, &got);
        MPI_Get_count(&st, MPI_BYTE, &igot);
        CHECK(rc == MPI_SUCCESS && got == n && igot == MPI_UNDEFINED,
              "recv_c of %lld bytes: rc %d, count_c %lld, count %d", (long long)n, rc,
              (long long)got, igot);
        CHECK(in[0] == 7 && in[(size_t)1 << 31] == 8 && in[n - 1] == 9 && in[n / 2] == 0,
              "the bytes received: %d %d %d %d", in[0], in[(size_t)1 << 31], in[n - 1],
              in[n / 2]);
        if (in != buf) free(in);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    free(buf);
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    large_types();
    below_the_buffer();
    large_message(size);

    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("large_counts: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
