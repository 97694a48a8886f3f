/* Dmodc's closed-form routes (eq. 1-4) of smroute.routing.kernel, compiled:
 * the same tables as the numpy kernel (the reference, tested against this).
 *
 * Per switch: the closer port groups of every distinct target (eq. 1) as a
 * bit mask over the switch's group positions, one pass per group over the
 * targets' cost row of its remote; equal masks share one ordered slot list
 * (a hash table); then per destination eq. 3-4: q = nid / Pi[s], the slot
 * q mod (the closer groups), and in a group of parallel cables the cable
 * (q div (the closer groups)) mod (its cables).
 *
 * Built by scripts/setup.sh into build/kernel/libsmroute_kernel.so (C99, no deps).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { INF = 255, UP_PHASE = 128, NO_ROUTE = 255 };
/* a run of destinations: one eq. 3 quotient, consecutive ones, any */
enum { RUN_ANY = 0, RUN_SAME = 1, RUN_STEP = 2 };
/* targets per tile of the masks' computation */
#define TILE 1024

static uint64_t hash_words(const uint64_t *w, int64_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int64_t i = 0; i < n; i++) {
        h ^= w[i];
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
    return h;
}

/* Group k's closer bits for every target u, as bit `sh` of bits[u]: the
 * remote's cost row read as a down move sees it (its down-only cost) or as an
 * up move does (UP_PHASE plus its hop count), below the switch's own cost. */
static inline void closer_bits(int64_t n_t, const uint8_t *row, int down, const uint8_t *cs,
                               int sh, uint8_t *bits)
{
    if (down)
        for (int64_t u = 0; u < n_t; u++) {
            uint8_t v = row[u];
            uint8_t seen = v < UP_PHASE ? v : INF;
            bits[u] |= (uint8_t)((seen < cs[u]) << sh);
        }
    else
        for (int64_t u = 0; u < n_t; u++) {
            uint8_t v = row[u];
            uint8_t seen = v < INF ? (uint8_t)((v & (UP_PHASE - 1)) | UP_PHASE) : INF;
            bits[u] |= (uint8_t)((seen < cs[u]) << sh);
        }
}

/* One switch's closer-group masks of targets u0 .. u1 - 1 (at most TILE),
 * switch x's costs in row ridx[x] of rows:
 * mask[u * nw ..], eight groups a byte at a time into bits (nw * 8 rows of
 * TILE bytes), then put together (vectorised: AVX2 where the processor has it). */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void closer_masks(int64_t s, int64_t n_t, int64_t u0, int64_t u1, const uint8_t *rows,
                         const int32_t *ridx, const int64_t *rank, const int64_t *grp_first,
                         const int64_t *grp_count, const int64_t *grp_remote, int64_t nw,
                         uint8_t *cs, uint8_t *bits, uint64_t *mask)
{
    const uint8_t *own = rows + ridx[s] * n_t + u0;
    int64_t n = u1 - u0;
    /* a switch without a route to u (INF) has no closer group: compare with 0 */
    for (int64_t u = 0; u < n; u++)
        cs[u] = own[u] == INF ? 0 : own[u];
    int64_t ng = grp_count[s];
    int64_t n_bytes = (ng + 7) / 8;
    memset(bits, 0, (size_t)(nw * 8 * TILE));
    for (int64_t k0 = 0; k0 < ng; k0 += 8) {
        uint8_t *byte = bits + (k0 / 8) * TILE;
        for (int64_t k = k0; k < ng && k < k0 + 8; k++) {
            int64_t r = grp_remote[grp_first[s] + k];
            closer_bits(n, rows + ridx[r] * n_t + u0, rank[r] < rank[s], cs, (int)(k - k0),
                        byte);
        }
    }
    mask += u0 * nw;
    for (int64_t w = 0; w < nw; w++) {
        const uint8_t *b8 = bits + w * 8 * TILE;
        if (w * 8 >= n_bytes) {
            for (int64_t u = 0; u < n; u++)
                mask[u * nw + w] = 0;
            continue;
        }
        for (int64_t u = 0; u < n; u++)
            mask[u * nw + w] = (uint64_t)b8[u] | (uint64_t)b8[TILE + u] << 8
                | (uint64_t)b8[2 * TILE + u] << 16 | (uint64_t)b8[3 * TILE + u] << 24
                | (uint64_t)b8[4 * TILE + u] << 32 | (uint64_t)b8[5 * TILE + u] << 40
                | (uint64_t)b8[6 * TILE + u] << 48 | (uint64_t)b8[7 * TILE + u] << 56;
    }
}

/* A pattern: its slots' first index, their count and its fastmod multiplier
 * (Lemire et al., exact for 32-bit operands; 0 for one slot). */
typedef struct {
    int64_t start;
    uint64_t mul;
    uint32_t len;
} pattern;

static inline uint32_t fast_mod(uint32_t q, uint64_t mul, uint32_t len)
{
    return (uint32_t)(((__uint128_t)(mul * q) * len) >> 64);
}

static inline uint32_t fast_div(uint32_t q, uint64_t mul, uint32_t len)
{
    return len == 1 ? q : (uint32_t)(((__uint128_t)mul * q) >> 64);
}

/* One value into the columns of destinations d0 .. d1 - 1. */
static void put_same(uint8_t *row, const int64_t *cols, int64_t col0, int64_t d0, int64_t d1,
                     uint8_t v)
{
    if (cols == NULL)
        memset(row + col0 + d0, v, (size_t)(d1 - d0));
    else
        for (int64_t d = d0; d < d1; d++)
            row[cols[d]] = v;
}

/* switches: (B) the rows to route, out row b = switches[b]
 * n_t, n_sw, rows: (n_sw, n_t) uint8 the switches' encoded costs to the targets
 * tgt: (D) int64 each destination's target index; nid (D) int64 (< 2**32);
 *      cols (D) int64 the table column of each destination, or NULL: col0 + d
 * pi: (S) int64 the dividers (< 2**32)
 * pi, rank: (S) int64; grp_*: the SwitchGraph's port groups
 * out: (B, width) uint8; the destinations' columns are written
 * collapse: targets are collapsed into classes where collapse x (the rows
 *      the block reads) < (its port groups)
 * Returns 0, or -1 if memory ran out. */
int smroute_route(int64_t n_b, const int64_t *switches, int64_t n_t, int64_t n_sw,
                  const uint8_t *rows,
                  int64_t n_d, const int64_t *tgt, const int64_t *nid, const int64_t *cols,
                  int64_t col0,
                  const int64_t *pi, const int64_t *rank, const int64_t *grp_first,
                  const int64_t *grp_count, const int64_t *grp_remote,
                  const int64_t *grp_port_first, const int64_t *grp_port_count,
                  const int64_t *grp_ports, uint8_t *out, int64_t width, int64_t collapse)
{
    int64_t gmax = 1;
    for (int64_t b = 0; b < n_b; b++)
        if (grp_count[switches[b]] > gmax)
            gmax = grp_count[switches[b]];
    int64_t nw = (gmax + 63) / 64;
    int64_t hsize = 1;
    while (hsize < 2 * n_t + 2)
        hsize <<= 1;
    uint8_t *cs = malloc((size_t)n_t + 1);
    uint8_t *bits = malloc((size_t)(nw * 8 * TILE));
    uint64_t *masks = malloc(sizeof(uint64_t) * (size_t)(n_b * n_t * nw + 1));
    int32_t *ridx = malloc(sizeof(int32_t) * (size_t)(n_sw + 1));
    int64_t n_rmax = n_b;
    for (int64_t b = 0; b < n_b; b++)
        n_rmax += grp_count[switches[b]];
    int64_t *rlist = malloc(sizeof(int64_t) * (size_t)(n_rmax + 1));
    uint32_t *th = malloc(sizeof(uint32_t) * (size_t)(n_t + 1));
    int32_t *cls = malloc(sizeof(int32_t) * (size_t)(n_t + 1));
    int32_t *crep = malloc(sizeof(int32_t) * (size_t)(n_t + 1));
    int32_t *pat_c = malloc(sizeof(int32_t) * (size_t)(n_t + 1));
    uint8_t *okv = malloc((size_t)n_t + 1);
    uint8_t *sub = NULL;
    int32_t *pat = malloc(sizeof(int32_t) * (size_t)(n_t + 1));
    int32_t *table = malloc(sizeof(int32_t) * (size_t)hsize);
    int32_t *rep = malloc(sizeof(int32_t) * (size_t)(n_t + 1));  /* a target per pattern */
    pattern *pats = malloc(sizeof(pattern) * (size_t)(n_t + 1));
    uint32_t *quot = malloc(sizeof(uint32_t) * (size_t)(n_d + 1));
    int64_t *runs = malloc(sizeof(int64_t) * (size_t)(n_d + 1));
    uint8_t *kind = malloc((size_t)n_d + 1);
    int64_t cap = 4 * gmax + 64; /* slots, grown as patterns come */
    int64_t *slot_grp = malloc(sizeof(int64_t) * (size_t)cap);
    uint8_t *slot_port = malloc((size_t)cap);
    int rc = 0;
    if (!cs || !bits || !masks || !pat || !table || !rep || !pats || !quot || !runs || !kind
        || !slot_grp || !slot_port || !ridx || !rlist || !th || !cls || !crep || !pat_c
        || !okv) {
        rc = -1;
        goto done;
    }
    int64_t n_runs = 0; /* runs of destinations of one target */
    for (int64_t d = 0; d < n_d; d++)
        if (d == 0 || tgt[d] != tgt[d - 1])
            runs[n_runs++] = d;
    runs[n_runs] = n_d;
    /* the rows the block reads: its switches' and their remotes' */
    for (int64_t x = 0; x < n_sw; x++)
        ridx[x] = -1;
    int64_t n_r = 0;
    for (int64_t b = 0; b < n_b; b++) {
        int64_t s = switches[b];
        if (ridx[s] < 0) {
            ridx[s] = (int32_t)n_r;
            rlist[n_r++] = s;
        }
        for (int64_t k = 0; k < grp_count[s]; k++) {
            int64_t r = grp_remote[grp_first[s] + k];
            if (ridx[r] < 0) {
                ridx[r] = (int32_t)n_r;
                rlist[n_r++] = r;
            }
        }
    }
    /* targets whose cost columns agree on those rows have the same closer
     * groups: one class each (hashed, then checked byte for byte; a target
     * that differs from its class's first is a class of its own).  Worth it
     * where the rows read are few beside the groups compared (a block of
     * leaves): else every target is a class of its own. */
    int64_t n_c = n_t, gsum = n_rmax - n_b;
    const uint8_t *crows = rows;
    if (collapse * n_r < gsum) {
        for (int64_t u = 0; u < n_t; u++)
            th[u] = 2166136261u;
        for (int64_t i = 0; i < n_r; i++) {
            const uint8_t *row = rows + rlist[i] * n_t;
            for (int64_t u = 0; u < n_t; u++)
                th[u] = (th[u] ^ row[u]) * 16777619u;
        }
        for (int64_t i = 0; i < hsize; i++)
            table[i] = -1;
        n_c = 0;
        for (int64_t u = 0; u < n_t; u++) {
            uint64_t h = ((uint64_t)th[u] * 0x9e3779b97f4a7c15ULL >> 32) & (uint64_t)(hsize - 1);
            for (;;) {
                int32_t c = table[h];
                if (c < 0) {
                    table[h] = (int32_t)n_c;
                    crep[n_c] = (int32_t)u;
                    cls[u] = (int32_t)n_c++;
                    break;
                }
                if (th[crep[c]] == th[u]) {
                    cls[u] = c;
                    break;
                }
                h = (h + 1) & (uint64_t)(hsize - 1);
            }
            okv[u] = 1;
        }
        for (int64_t i = 0; i < n_r; i++) {
            const uint8_t *row = rows + rlist[i] * n_t;
            for (int64_t u = 0; u < n_t; u++)
                okv[u] &= row[u] == row[crep[cls[u]]];
        }
        for (int64_t u = 0; u < n_t; u++)
            if (!okv[u]) {
                crep[n_c] = (int32_t)u;
                cls[u] = (int32_t)n_c++;
            }
        sub = malloc((size_t)(n_r * n_c + 1)); /* the rows read, one column per class */
        if (!sub) {
            rc = -1;
            goto done;
        }
        for (int64_t i = 0; i < n_r; i++) {
            const uint8_t *row = rows + rlist[i] * n_t;
            for (int64_t c = 0; c < n_c; c++)
                sub[i * n_c + c] = row[crep[c]];
        }
        crows = sub;
    } else {
        for (int64_t x = 0; x < n_sw; x++)
            ridx[x] = (int32_t)x;
        for (int64_t u = 0; u < n_t; u++)
            cls[u] = (int32_t)u;
    }
    /* the block's masks per class, a tile of classes at a time: the remotes'
     * cost rows stay in the cache while every switch of the block reads them */
    for (int64_t u0 = 0; u0 < n_c; u0 += TILE) {
        int64_t u1 = u0 + TILE < n_c ? u0 + TILE : n_c;
        for (int64_t b = 0; b < n_b; b++)
            closer_masks(switches[b], n_c, u0, u1, crows, ridx, rank, grp_first, grp_count,
                         grp_remote, nw, cs, bits, masks + b * n_c * nw);
    }
    int64_t quot_pi = -1; /* the divider of quot */
    for (int64_t b = 0; b < n_b; b++) {
        int64_t s = switches[b];
        uint8_t *row = out + b * width;
        if (pi[s] != quot_pi) { /* eq. 3's quotients, once per divider */
            uint32_t div = (uint32_t)pi[s];
            for (int64_t d = 0; d < n_d; d++)
                quot[d] = (uint32_t)nid[d] / div;
            quot_pi = pi[s];
            /* per run: one quotient, or consecutive ones, or neither */
            for (int64_t i = 0; i < n_runs; i++) {
                int64_t d0 = runs[i], d1 = runs[i + 1];
                uint32_t q0 = quot[d0];
                int same = 1, step = 1;
                for (int64_t d = d0 + 1; d < d1; d++) {
                    same &= quot[d] == q0;
                    step &= quot[d] == q0 + (uint32_t)(d - d0);
                }
                kind[i] = same ? RUN_SAME : step ? RUN_STEP : RUN_ANY;
            }
        }
        const uint64_t *mask = masks + b * n_c * nw;
        /* equal masks, one pattern: its closer groups in position order */
        for (int64_t i = 0; i < hsize; i++)
            table[i] = -1;
        int32_t n_p = 0;
        int64_t n_slots = 0;
        int parallel = 0;
        for (int64_t u = 0; u < n_c; u++) {
            const uint64_t *m = mask + u * nw;
            uint64_t h = hash_words(m, nw) & (uint64_t)(hsize - 1);
            for (;;) {
                int32_t p = table[h];
                if (p < 0) {
                    p = n_p++;
                    table[h] = p;
                    rep[p] = (int32_t)u;
                    if (n_slots + gmax > cap) {
                        cap = 2 * (n_slots + gmax);
                        int64_t *g2 = realloc(slot_grp, sizeof(int64_t) * (size_t)cap);
                        if (g2)
                            slot_grp = g2;
                        uint8_t *p2 = realloc(slot_port, (size_t)cap);
                        if (p2)
                            slot_port = p2;
                        if (!g2 || !p2) {
                            rc = -1;
                            goto done;
                        }
                    }
                    pats[p].start = n_slots;
                    int32_t len = 0;
                    for (int64_t w = 0; w < nw; w++)
                        for (uint64_t x = m[w]; x; x &= x - 1) {
                            int64_t g = grp_first[s] + w * 64 + __builtin_ctzll(x);
                            slot_grp[n_slots] = g;
                            slot_port[n_slots++] = (uint8_t)grp_ports[grp_port_first[g]];
                            parallel |= grp_port_count[g] != 1;
                            len++;
                        }
                    pats[p].len = (uint32_t)len;
                    pats[p].mul = len ? UINT64_C(0xFFFFFFFFFFFFFFFF) / (uint64_t)len + 1 : 0;
                    pat_c[u] = p;
                    break;
                }
                const uint64_t *mr = mask + (int64_t)rep[p] * nw;
                if (nw == 1 ? *mr == *m : memcmp(mr, m, sizeof(uint64_t) * (size_t)nw) == 0) {
                    pat_c[u] = p;
                    break;
                }
                h = (h + 1) & (uint64_t)(hsize - 1);
            }
        }
        for (int64_t u = 0; u < n_t; u++)
            pat[u] = pat_c[cls[u]];
        /* eq. 3-4 per destination, a run of destinations of one target at a time */
        for (int64_t i = 0; i < n_runs; i++) {
            int64_t d0 = runs[i], d1 = runs[i + 1];
            const pattern *pt = pats + pat[tgt[d0]];
            uint32_t len = pt->len;
            const uint8_t *sp = slot_port + pt->start;
            const int64_t *sg = slot_grp + pt->start;
            uint64_t mul = pt->mul;
            if (len == 0) {
                put_same(row, cols, col0, d0, d1, NO_ROUTE);
            } else if (!parallel && len == 1) {
                put_same(row, cols, col0, d0, d1, sp[0]);
            } else if (!parallel && kind[i] == RUN_SAME) {
                put_same(row, cols, col0, d0, d1, sp[fast_mod(quot[d0], mul, len)]);
            } else if (!parallel && kind[i] == RUN_STEP) { /* the slots in turn */
                uint32_t r = fast_mod(quot[d0], mul, len);
                for (int64_t d = d0; d < d1; d++) {
                    row[cols == NULL ? col0 + d : cols[d]] = sp[r];
                    r = r + 1 == len ? 0 : r + 1;
                }
            } else if (!parallel && cols == NULL) {
                uint8_t *o = row + col0;
                for (int64_t d = d0; d < d1; d++)
                    o[d] = sp[fast_mod(quot[d], mul, len)];
            } else if (!parallel) {
                for (int64_t d = d0; d < d1; d++)
                    row[cols[d]] = sp[fast_mod(quot[d], mul, len)];
            } else {
                for (int64_t d = d0; d < d1; d++) {
                    uint32_t q = quot[d];
                    int64_t g = sg[fast_mod(q, mul, len)];
                    uint32_t cnt = (uint32_t)grp_port_count[g];
                    uint8_t port = (uint8_t)grp_ports[grp_port_first[g]
                                                      + fast_div(q, mul, len) % cnt];
                    row[cols == NULL ? col0 + d : cols[d]] = port;
                }
            }
        }
    }
done:
    free(cs);
    free(bits);
    free(masks);
    free(ridx);
    free(rlist);
    free(th);
    free(cls);
    free(crep);
    free(pat_c);
    free(okv);
    free(sub);
    free(pat);
    free(table);
    free(rep);
    free(pats);
    free(quot);
    free(runs);
    free(kind);
    free(slot_grp);
    free(slot_port);
    return rc;
}
