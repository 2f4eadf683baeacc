/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) for storage/bookie/addpath.pyx:
 * the SSE4.2 crc32 instruction where the CPU has it, a byte table elsewhere; and the
 * combination of two CRCs (the CRC of A || B from those of A and B and the length of B),
 * by multiplication with x^(8 len B) modulo the polynomial in GF(2). All values are the
 * finished CRC (pre- and post-inverted), as the `crc32c` wheel returns them. */
#ifndef ADDPATH_CRC_H
#define ADDPATH_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ADDPATH_POLY 0x82F63B78u

static uint32_t addpath_table[256];
static uint32_t addpath_x2n[64]; /* x^(2^k) mod P */
static int addpath_hw = 0;

static uint32_t addpath_multmod(uint32_t a, uint32_t b) {
    /* a * b mod P, reflected: bit 31 is x^0 */
    uint32_t product = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m) product ^= b;
        b = (b & 1) ? (b >> 1) ^ ADDPATH_POLY : b >> 1;
    }
    return product;
}

static uint32_t addpath_x8n(uint64_t n) {
    /* x^(8 n) mod P */
    uint32_t p = 1u << 31;
    unsigned k = 3;
    while (n) {
        if (n & 1) p = addpath_multmod(addpath_x2n[k & 63], p);
        n >>= 1;
        k++;
    }
    return p;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
__attribute__((target("sse4.2")))
static uint32_t addpath_crc_hw(uint32_t reg, const unsigned char *p, size_t n) {
    uint64_t r = reg;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        r = _mm_crc32_u64(r, word);
        p += 8;
        n -= 8;
    }
    reg = (uint32_t)r;
    while (n--) reg = _mm_crc32_u8(reg, *p++);
    return reg;
}
#define ADDPATH_HAVE_HW 1
#else
#define ADDPATH_HAVE_HW 0
#endif

static void addpath_crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ ADDPATH_POLY : c >> 1;
        addpath_table[i] = c;
    }
    addpath_x2n[0] = 1u << 30; /* x^1 */
    for (int k = 1; k < 64; k++) addpath_x2n[k] = addpath_multmod(addpath_x2n[k - 1], addpath_x2n[k - 1]);
#if ADDPATH_HAVE_HW
    __builtin_cpu_init();
    addpath_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* The CRC of `crc`'s data followed by p[0:n]. */
static uint32_t addpath_crc(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t reg = ~crc;
#if ADDPATH_HAVE_HW
    if (addpath_hw) return ~addpath_crc_hw(reg, p, n);
#endif
    while (n--) reg = addpath_table[(reg ^ *p++) & 0xff] ^ (reg >> 8);
    return ~reg;
}

/* The CRC of A || B from crc_a, crc_b and len(B); `shift` = addpath_x8n(len(B)). */
static uint32_t addpath_combine(uint32_t crc_a, uint32_t crc_b, uint32_t shift) {
    return addpath_multmod(shift, crc_a) ^ crc_b;
}

static inline int64_t addpath_be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline uint32_t addpath_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void addpath_put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

#endif
