/* Communicator attributes with C callbacks: a copy function that doubles the value and a
 * delete function that counts (both told their communicator and extra state), the predefined
 * MPI_COMM_DUP_FN and MPI_COMM_NULL_COPY_FN, delete on MPI_Comm_delete_attr and on free, and
 * freed keyvals; datatype attributes the same way (copied by MPI_Type_dup, deleted by
 * MPI_Type_free), on a derived and a predefined datatype. Prints "attributes: ok <rank>". */
#include <mpi.h>
#include <stdint.h>
#define NAME "attributes"
#include "check.h"

static int copies = 0, deletes = 0;
static MPI_Comm last_comm = MPI_COMM_NULL;

static int doubling_copy(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag) {
    (void)key;
    copies += *(int *)extra;
    last_comm = old;
    *(void **)out = (void *)((intptr_t)in * 2);
    *flag = 1;
    return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int key, void *value, void *extra) {
    (void)key, (void)value;
    deletes += *(int *)extra;
    last_comm = comm;
    return MPI_SUCCESS;
}

static int type_copies = 0, type_deletes = 0;
static MPI_Datatype last_type = MPI_DATATYPE_NULL;

static int type_copy(MPI_Datatype old, int key, void *extra, void *in, void *out, int *flag) {
    (void)key, (void)extra;
    type_copies++;
    last_type = old;
    *(void **)out = (void *)((intptr_t)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}

static int type_delete(MPI_Datatype dt, int key, void *value, void *extra) {
    (void)key, (void)value, (void)extra;
    type_deletes++;
    last_type = dt;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    static int one = 1;
    int k1, k2, k3, flag = 0;
    void *v = NULL;
    MPI_Comm_create_keyval(doubling_copy, counting_delete, &k1, &one);
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k2, NULL);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, counting_delete, &k3, &one);
    MPI_Comm a;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_set_attr(a, k1, (void *)(intptr_t)(rank + 10));
    MPI_Comm_set_attr(a, k2, (void *)(intptr_t)77);
    MPI_Comm_set_attr(a, k3, (void *)(intptr_t)5);
    MPI_Comm_get_attr(a, k1, &v, &flag);
    CHECK(flag && (intptr_t)v == rank + 10, "get k1 %ld", (long)(intptr_t)v);
    MPI_Comm b;
    MPI_Comm_dup(a, &b);
    CHECK(copies == 1 && last_comm == a, "copy ran %d times, told comm %#x", copies, (unsigned)last_comm);
    MPI_Comm_get_attr(b, k1, &v, &flag);
    CHECK(flag && (intptr_t)v == 2 * (rank + 10), "copied k1 %ld", (long)(intptr_t)v);
    MPI_Comm_get_attr(b, k2, &v, &flag);
    CHECK(flag && (intptr_t)v == 77, "MPI_COMM_DUP_FN copy %ld", (long)(intptr_t)v);
    MPI_Comm_get_attr(b, k3, &v, &flag);
    CHECK(!flag, "MPI_COMM_NULL_COPY_FN copied the attribute");
    MPI_Comm_delete_attr(a, k1);
    CHECK(deletes == 1 && last_comm == a, "delete_attr ran the delete %d times", deletes);
    MPI_Comm_get_attr(a, k1, &v, &flag);
    CHECK(!flag, "deleted attribute still there");
    MPI_Comm_free(&a); /* deletes k3 */
    CHECK(deletes == 2, "free ran the delete, %d in all", deletes);
    MPI_Comm saved = b;
    MPI_Comm_free(&b); /* deletes k1's copy */
    CHECK(deletes == 3 && last_comm == saved, "free of the dup: %d deletes, comm %#x", deletes, (unsigned)last_comm);
    MPI_Comm_free_keyval(&k1);
    MPI_Comm_free_keyval(&k2);
    MPI_Comm_free_keyval(&k3);
    CHECK(k1 == MPI_KEYVAL_INVALID, "freed keyval not invalidated");

    int tk;
    MPI_Datatype t1, t2;
    MPI_Type_create_keyval(type_copy, type_delete, &tk, NULL);
    MPI_Type_contiguous(2, MPI_INT, &t1);
    MPI_Type_set_attr(t1, tk, (void *)(intptr_t)40);
    MPI_Type_dup(t1, &t2);
    CHECK(type_copies == 1 && last_type == t1, "Type_dup ran the copy %d times", type_copies);
    MPI_Type_get_attr(t2, tk, &v, &flag);
    CHECK(flag && (intptr_t)v == 41, "the dup's attribute is %ld (flag %d)", (long)(intptr_t)v, flag);
    MPI_Type_set_attr(t2, tk, (void *)(intptr_t)50);
    CHECK(type_deletes == 1 && last_type == t2, "replacing ran the delete %d times", type_deletes);
    MPI_Datatype saved_t1 = t1;
    MPI_Type_free(&t1);
    CHECK(type_deletes == 2 && last_type == saved_t1, "Type_free ran the delete, %d in all", type_deletes);
    MPI_Type_delete_attr(t2, tk);
    CHECK(type_deletes == 3, "Type_delete_attr ran the delete, %d in all", type_deletes);
    MPI_Type_get_attr(t2, tk, &v, &flag);
    CHECK(!flag, "a deleted datatype attribute is still there");
    MPI_Type_free(&t2);
    MPI_Type_set_attr(MPI_INT, tk, (void *)(intptr_t)7);
    MPI_Type_get_attr(MPI_INT, tk, &v, &flag);
    CHECK(flag && (intptr_t)v == 7, "MPI_INT's attribute is %ld", (long)(intptr_t)v);
    MPI_Type_delete_attr(MPI_INT, tk);
    MPI_Type_free_keyval(&tk);
    CHECK(tk == MPI_KEYVAL_INVALID, "freed datatype keyval not invalidated");
    /* A freed keyval (MPI 4.1 §7.7.2): its attributes stay, to be read and deleted through
     * the handle the program kept; no attribute is set with it; freeing it again (a delete
     * function that frees its keyval, then the program) does nothing. Datatype keyvals too. */
    int fk, kept;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, counting_delete, &fk, &one);
    kept = fk;
    MPI_Comm_set_attr(MPI_COMM_WORLD, fk, (void *)(intptr_t)5);
    MPI_Comm_free_keyval(&fk);
    CHECK(fk == MPI_KEYVAL_INVALID, "freed keyval not invalidated");
    MPI_Comm_get_attr(MPI_COMM_WORLD, kept, &v, &flag);
    CHECK(flag && (intptr_t)v == 5, "a freed keyval's attribute reads %ld (flag %d)", (long)(intptr_t)v, flag);
    int before = deletes;
    CHECK(MPI_Comm_delete_attr(MPI_COMM_WORLD, kept) == MPI_SUCCESS && deletes == before + 1,
          "delete through a freed keyval: %d deletes", deletes - before);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_set_attr(MPI_COMM_WORLD, kept, (void *)(intptr_t)6), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_KEYVAL, "set with a freed keyval: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    fk = kept;
    CHECK(MPI_Comm_free_keyval(&fk) == MPI_SUCCESS, "a second free of a keyval");
    int tk2, tkept;
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &tk2, NULL);
    tkept = tk2;
    MPI_Type_free_keyval(&tk2);
    tk2 = tkept;
    CHECK(MPI_Type_free_keyval(&tk2) == MPI_SUCCESS, "a second free of a datatype keyval");
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &tk2, NULL);
    CHECK(tk2 != tkept, "a freed datatype keyval's handle given again");
    MPI_Type_free_keyval(&tk2);

    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("attributes: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
