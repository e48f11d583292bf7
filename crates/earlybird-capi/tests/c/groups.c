/* Groups and communicators of the second part: range inclusion and exclusion, union,
 * intersection, difference and compare; MPI_Comm_create_group, MPI_Comm_dup_with_info with
 * MPI_Comm_get_info, MPI_Comm_idup; MPI-1's attribute calls; added error classes, codes and
 * strings; the decoders of a derived datatype (envelope and contents) and a subarray type.
 * Prints "groups: ok <rank>". */
#include <mpi.h>
#include <string.h>
#define NAME "groups"
#include "check.h"

int main(int argc, char **argv) {
    int size, result;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Group world, evens, odds, u, x, d;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int range[1][3] = {{0, size - 1, 2}};
    MPI_Group_range_incl(world, 1, range, &evens);
    MPI_Group_range_excl(world, 1, range, &odds);
    int ne, no;
    MPI_Group_size(evens, &ne);
    MPI_Group_size(odds, &no);
    CHECK(ne == (size + 1) / 2 && no == size / 2, "range sizes %d %d", ne, no);
    MPI_Group_union(evens, odds, &u);
    MPI_Group_compare(u, world, &result);
    CHECK(result == (size > 2 ? MPI_SIMILAR : MPI_IDENT), "union vs world %d", result);
    MPI_Group_intersection(evens, odds, &x);
    CHECK(x == MPI_GROUP_EMPTY || (MPI_Group_size(x, &ne), ne == 0), "intersection not empty");
    MPI_Group_difference(world, odds, &d);
    MPI_Group_compare(d, evens, &result);
    CHECK(result == MPI_IDENT, "difference vs evens %d", result);

    /* A communicator of the even ranks, made by them only. */
    MPI_Comm ec = MPI_COMM_NULL;
    if (rank % 2 == 0) {
        MPI_Comm_create_group(MPI_COMM_WORLD, evens, 7, &ec);
        int r, s;
        MPI_Comm_rank(ec, &r);
        MPI_Comm_size(ec, &s);
        CHECK(r == rank / 2 && s == (size + 1) / 2, "create_group rank %d size %d", r, s);
        MPI_Comm_free(&ec);
    }

    /* Dup with info, and the info read back. */
    MPI_Info info, got;
    MPI_Info_create(&info);
    MPI_Info_set(info, "earlybird_test_hint", "yes");
    MPI_Comm dup;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dup);
    MPI_Comm_get_info(dup, &got);
    char value[16];
    int flag = 0, buflen = sizeof value;
    MPI_Info_get_string(got, "earlybird_test_hint", &buflen, value, &flag);
    CHECK(flag && strcmp(value, "yes") == 0 && buflen == 4, "info back: %d %s %d", flag, value, buflen);
    MPI_Info_free(&info);
    MPI_Info_free(&got);

    /* Idup: the handle is written when the request completes. */
    MPI_Comm idup;
    MPI_Request req;
    MPI_Comm_idup(dup, &idup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Comm_compare(idup, dup, &result);
    CHECK(result == MPI_CONGRUENT, "idup compares %d", result);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, idup);
    CHECK(sum == size * (size - 1) / 2, "allreduce on the idup %d", sum);
    MPI_Comm_free(&idup);
    MPI_Comm_free(&dup);

    /* MPI-1 attributes. */
    int key, *val, stored = 42;
    MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &key, NULL);
    MPI_Attr_put(MPI_COMM_WORLD, key, &stored);
    MPI_Attr_get(MPI_COMM_WORLD, key, &val, &flag);
    CHECK(flag && *val == 42, "attr_get %d", flag);
    MPI_Attr_delete(MPI_COMM_WORLD, key);
    MPI_Attr_get(MPI_COMM_WORLD, key, &val, &flag);
    CHECK(!flag, "attribute still there");
    MPI_Keyval_free(&key);

    /* Added error classes, codes and strings. */
    int cls, code, got_class, len, *last;
    char text[MPI_MAX_ERROR_STRING];
    MPI_Add_error_class(&cls);
    MPI_Add_error_code(cls, &code);
    MPI_Add_error_string(code, "an earlybird test error");
    MPI_Error_class(code, &got_class);
    MPI_Error_string(code, text, &len);
    CHECK(got_class == cls && strcmp(text, "an earlybird test error") == 0, "added error %d %s", got_class, text);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag);
    CHECK(flag && *last >= code, "lastusedcode %d", flag ? *last : -1);

    /* Decoding a vector type, and a subarray. */
    MPI_Datatype vec, sub;
    MPI_Type_vector(3, 2, 5, MPI_DOUBLE, &vec);
    int ni, na, nd, comb, ints[3];
    MPI_Aint addrs[1];
    MPI_Datatype types[1];
    MPI_Type_get_envelope(vec, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nd == 1, "envelope %d %d %d %d", comb, ni, na, nd);
    MPI_Type_get_contents(vec, 3, 0, 1, ints, addrs, types);
    CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == 5 && types[0] == MPI_DOUBLE, "contents %d %d %d", ints[0], ints[1], ints[2]);
    int sizes[2] = {4, 6}, subs[2] = {2, 3}, starts[2] = {1, 2}, tsize;
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub);
    MPI_Type_size(sub, &tsize);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(sub, &lb, &extent);
    CHECK(tsize == 6 * (int)sizeof(int) && extent == 24 * (MPI_Aint)sizeof(int), "subarray size %d extent %ld", tsize, (long)extent);
    MPI_Type_free(&vec);
    MPI_Type_free(&sub);
    MPI_Datatype pairt, nonet;
    MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &pairt);
    MPI_Type_get_value_index(MPI_CHAR, MPI_INT, &nonet);
    CHECK(pairt == MPI_DOUBLE_INT && nonet == MPI_DATATYPE_NULL, "get_value_index %#x %#x", pairt, nonet);

    MPI_Group_free(&world);
    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&u);
    if (x != MPI_GROUP_EMPTY) MPI_Group_free(&x);
    MPI_Group_free(&d);
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("groups: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
