/* Test vectors of x87 80-bit long double arithmetic, from the hardware: each line is a, b,
 * a + b and a * b as (sign and exponent, significand) in hex. Made by
 *   cc -O0 -o gen x87_vectors.c && ./gen > x87_vectors.txt
 * on x86-64 (gcc computes long double with the x87, round to nearest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
static long double rnd(void) {
    unsigned char b[16] = {0};
    for (int i = 0; i < 10; i++) b[i] = rand() & 0xff;
    int kind = rand() % 8;
    uint16_t se; memcpy(&se, b + 8, 2);
    if (kind < 5) { se = (se & 0x8000) | (0x3fff - 40 + rand() % 80); b[7] |= 0x80; }
    else if (kind == 5) { se = (se & 0x8000); b[7] &= 0x7f; }              /* denormal */
    else if (kind == 6) { se = (se & 0x8000) | (0x7ffe - rand() % 3); b[7] |= 0x80; } /* huge */
    else { se = (se & 0x8000) | (1 + rand() % 3); b[7] |= 0x80; }          /* tiny normal */
    memcpy(b + 8, &se, 2);
    long double x; memcpy(&x, b, 16); return x;
}
static void put(long double x) { unsigned char b[16] = {0}; memcpy(b, &x, 10); uint16_t se; uint64_t m; memcpy(&m, b, 8); memcpy(&se, b + 8, 2); printf("%04x %016llx ", se, (unsigned long long)m); }
int main(void) {
    srand(7);
    for (int i = 0; i < 1500; i++) {
        long double a = rnd(), b = rnd();
        if (rand() % 4 == 0) b = -a * (1 + (rand() % 3) * 1e-18L);
        put(a); put(b); put(a + b); put(a * b); printf("\n");
    }
}
