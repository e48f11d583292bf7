/* The checks of the C test programs: CHECK(cond, printf-style message) counts a failure and
 * says where, under the program's NAME; `rank` and `failures` are the program's. */
#include <stdio.h>

static int failures = 0, rank = -1;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s: rank %d: ", NAME, rank);                  \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, " (line %d)\n", __LINE__);                     \
            failures++;                                                    \
        }                                                                  \
    } while (0)
