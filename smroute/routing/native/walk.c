/* The validation walk of smroute.routing.validate, compiled: every (switch,
 * destination) pair's walk resolved once, per destination column, by following
 * next hops with memoisation.  The same results as the numpy walk (the
 * reference, tested against this): status OK 0, DEAD_END 1, LOOP 2, UPDOWN 3;
 * hops the switch-to-switch moves (0 for LOOP).  Columns are taken in blocks
 * of BLOCK, so that the tables are read and the results written a cache line
 * at a time.
 *
 * Built by scripts/setup.sh into build/walk/libsmroute_walk.so (C99, no deps).
 */
#include <stdint.h>
#include <stdlib.h>

enum { OK = 0, DEAD_END = 1, LOOP = 2, UPDOWN = 3, UNKNOWN = -1, BUSY = -2 };
#define BLOCK 64
/* rows fetched ahead of their use */
#define AHEAD 8

/* One destination column: pc the output port of every switch (in), st, hp
 * (out), up and stack scratch. */
static void walk_column(int64_t n_sw, int64_t nw, const uint8_t *pc, const int32_t *nxt,
                        const int8_t *rank, int64_t target, int64_t local, int free_turn,
                        int64_t bound, int8_t *st, int16_t *hp, int8_t *up, int64_t *stack)
{
    for (int64_t s = 0; s < n_sw; s++)
        st[s] = UNKNOWN;
    for (int64_t s0 = 0; s0 < n_sw; s0++) {
        if (st[s0] != UNKNOWN)
            continue;
        /* follow the next hops until a pair that is resolved or ends a walk */
        int64_t depth = 0, cur = s0;
        int8_t end_st;
        int16_t end_hp = 0;
        int8_t end_up = 0;
        for (;;) {
            if (st[cur] >= 0) { /* resolved before */
                end_st = st[cur];
                end_hp = hp[cur];
                end_up = up[cur];
                break;
            }
            if (st[cur] == BUSY) { /* a cycle */
                end_st = LOOP;
                break;
            }
            uint8_t p = pc[cur];
            int32_t nx = p < nw ? nxt[cur * nw + p] : -1;
            if (cur == target && (int64_t)p == local)
                end_st = OK;
            else if (nx < 0)
                end_st = DEAD_END;
            else if (rank[nx] == rank[cur] && !free_turn)
                end_st = UPDOWN;
            else {
                st[cur] = BUSY;
                stack[depth++] = cur;
                cur = nx;
                continue;
            }
            st[cur] = end_st;
            hp[cur] = 0;
            up[cur] = 0;
            break;
        }
        /* resolve the pairs on the stack, the last first */
        while (depth > 0) {
            int64_t c = stack[--depth];
            int32_t nx = nxt[c * nw + pc[c]]; /* a port that led on */
            int dr = rank[nx] > rank[c] ? 1 : rank[nx] < rank[c] ? -1 : 0;
            if (end_st != LOOP) {
                int64_t h = (int64_t)end_hp + 1;
                if (end_st == OK && dr < 0 && end_up && !free_turn)
                    end_st = UPDOWN;
                end_up = (int8_t)(end_up || dr > 0);
                if (h > bound)
                    end_st = LOOP;
                else
                    end_hp = (int16_t)h;
            }
            if (end_st == LOOP) {
                end_hp = 0;
                end_up = 0;
            }
            st[c] = end_st;
            hp[c] = end_hp;
            up[c] = end_up;
        }
    }
}

/* ports:  (S, W) uint8   the tables; lids: (D) int64 the destinations' LIDs
 * nxt:    (S, 256) int32 the switch behind port p of switch s, < 0 none
 * rank:   (S) int8       up-down rank of each switch
 * target: (D) int64      the switch that delivers d; local: (D) int64 its port
 * freed:  (D) uint8      1 where d's walks may turn (detours)
 * status: (S, D) int8 out; hops: (S, D) int16 out
 * Returns 0, or -1 if memory ran out. */
int smroute_walk(int64_t n_sw, int64_t n_d, int64_t width, const uint8_t *ports,
                 const int64_t *lids, const int32_t *nxt, const int8_t *rank,
                 const int64_t *target, const int64_t *local, const uint8_t *freed,
                 int64_t max_hops, int8_t *status, int16_t *hops)
{
    size_t n = (size_t)n_sw;
    /* the next switches of the ports in use only: fewer cache lines per walk */
    int64_t nw = 0;
    for (int64_t s = 0; s < n_sw; s++)
        for (int64_t p = 0; p < 256; p++)
            if (nxt[s * 256 + p] >= 0 && p + 1 > nw)
                nw = p + 1;
    int32_t *near = malloc(sizeof(int32_t) * (n * (size_t)nw + 1));
    int64_t *stack = malloc(sizeof(int64_t) * (n + 1));
    int8_t *up = malloc(n);
    uint8_t *pc = malloc(n * BLOCK);
    int8_t *st = malloc(n * BLOCK);
    int16_t *hp = malloc(sizeof(int16_t) * n * BLOCK);
    int rc = 0;
    if (!near || !stack || !up || !pc || !st || !hp) {
        rc = -1;
        goto out;
    }
    for (int64_t s = 0; s < n_sw; s++)
        for (int64_t p = 0; p < nw; p++)
            near[s * nw + p] = nxt[s * 256 + p];
    for (int64_t d0 = 0; d0 < n_d; d0 += BLOCK) {
        int64_t k = n_d - d0 < BLOCK ? n_d - d0 : BLOCK;
        for (int64_t s = 0; s < n_sw; s++) {
            const uint8_t *row = ports + s * width;
            if (s + AHEAD < n_sw) /* rows far apart: fetch a few ahead */
                __builtin_prefetch(row + AHEAD * width + lids[d0]);
            for (int64_t b = 0; b < k; b++)
                pc[b * n_sw + s] = row[lids[d0 + b]];
        }
        for (int64_t b = 0; b < k; b++)
            walk_column(n_sw, nw, pc + b * n_sw, near, rank, target[d0 + b], local[d0 + b],
                        freed[d0 + b] != 0, max_hops + 1, st + b * n_sw, hp + b * n_sw, up,
                        stack);
        for (int64_t s = 0; s < n_sw; s++) {
            int8_t *so = status + s * n_d + d0;
            int16_t *ho = hops + s * n_d + d0;
            if (s + AHEAD < n_sw) {
                __builtin_prefetch(so + AHEAD * n_d, 1);
                __builtin_prefetch(ho + AHEAD * n_d, 1);
            }
            for (int64_t b = 0; b < k; b++) {
                so[b] = st[b * n_sw + s];
                ho[b] = hp[b * n_sw + s];
            }
        }
    }
out:
    free(near);
    free(stack);
    free(up);
    free(pc);
    free(st);
    free(hp);
    return rc;
}
