/* Nmodc's steps over many small arrays, compiled: the same results as the
 * numpy code of smroute.routing.nmodc (the reference, tested against this).
 *
 * smroute_nominal_ports: the nominal kernel's last step (nominal.py,
 * _route_remote), once every switch's slot tables are laid out: per switch
 * and destination the digit (eq. 3 or a lost slot's j + m r), the table
 * entry, its lookup column and the port (a group's cables in turn).
 *
 * smroute_pattern_keys: the nominal kernel's pattern key of every switch
 * and collapsed target (nominal.py, _route_remote): the closer groups (eq.
 * 1), read through the nominal slots where the route goes up, as packed
 * bits, and the nominal arity.
 *
 * smroute_place: the placing rounds of the redirects by load (balance.py,
 * _place).
 *
 * smroute_first_slots: the first closer slots in a lost slot's probe
 * order, the candidates of the redirects by load (balance.py,
 * _first_candidates).
 *
 * smroute_components: connected components (fabric/graph.py, components).
 *
 * smroute_reach: the nodes a search of the channel dependencies reaches
 * (routing/acyclic.py, _reach).
 *
 * smroute_up_load: the destinations the leaves' nominal slots send through
 * each egress link of their upper switches (load.py, nominal_load).
 *
 * Built by scripts/setup.sh into build/nmodc/libsmroute_nmodc.so (C99, no deps).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { INF = 255, UP_PHASE = 128, NO_ROUTE = 255 };

/* Ports of `b` switches towards `d` destinations into out (row stride
 * `stride`, column lid_col[e]).  Per destination e: nid[e] and its target
 * column tgt[e] (of n_u).  Per switch s: its digits xs[xi[s]] (eq. 3, (., d))
 * and a lost slot's vs[vi[s]] ((., d)); per (s, target): spread (the NID
 * itself is the digit), lossy (the digit is a lost slot's), the table's
 * length and first entry.  val[entry]: the lookup column (of n_col); per
 * (s, column): dead, the group's first cable (into ports) and cable count;
 * occ / count per entry (NULL: one cable a group): the entry's turn among
 * those of its value (quot * count + occ, quot = x / length, x the digit
 * without a lost slot's), its cable turn mod the count.  Every value is
 * below 2**31 (32-bit division). */
void smroute_nominal_ports(
    int64_t b, int64_t d, int64_t n_u, const uint32_t *nid, const int64_t *tgt,
    const int64_t *lid_col, const uint32_t *xs, const int64_t *xi, const uint32_t *vs,
    const int64_t *vi, const uint8_t *spread, const uint8_t *lossy, const int64_t *length,
    const int64_t *first, const int64_t *val, int64_t n_col, const uint8_t *dead,
    const int64_t *cable0, const int64_t *cables, const int64_t *ports, const int32_t *occ,
    const int32_t *count, uint8_t *out, int64_t stride)
{
    for (int64_t s = 0; s < b; s++) {
        const uint32_t *xr = xs + xi[s] * d, *vr = vs + vi[s] * d;
        const uint8_t *sp = spread + s * n_u, *lo = lossy + s * n_u, *dd = dead + s * n_col;
        const int64_t *len = length + s * n_u, *f0 = first + s * n_u;
        const int64_t *c0 = cable0 + s * n_col, *cn = cables + s * n_col;
        uint8_t *row = out + s * stride;
        for (int64_t e = 0; e < d; e++) {
            const int64_t t = tgt[e];
            const uint32_t x = sp[t] ? nid[e] : xr[e];
            const uint32_t n = (uint32_t)len[t];
            const int64_t ent = f0[t] + (lo[t] ? vr[e] : x) % n;
            const int64_t col = val[ent];
            uint8_t port = NO_ROUTE;
            if (!dd[col]) {
                int64_t at = c0[col];
                if (count) {
                    const uint32_t turn = (x / n) * (uint32_t)count[ent] + (uint32_t)occ[ent];
                    at += turn % (uint32_t)cn[col];
                }
                port = (uint8_t)ports[at];
            }
            row[lid_col[e]] = port;
        }
    }
}

/* Pattern keys into out ((b, n_u, nb + 1) bytes) of `b` switches towards
 * n_u collapsed targets: sub (n_u, r) the targets' costs of every row the
 * block reads, row_sw[s] each switch's row and row_rem (b, g) its groups'
 * remotes' (padding: an all-INF row); down (b, g): the group leads down.
 * Group k is closer where the remote's cost, read as a down move sees it
 * (its down-only cost, else INF) or as an up move does (UP_PHASE plus its
 * hop count), is below the switch's own (below INF).  Where the switch
 * goes up to the target and has nominal slots (not own[s]): bit j of the
 * key is slot j's group (spos (b, n_slot), the padding position g - 1 for
 * none) and the last byte its arity; else bit k is group k (k < g - 1). */
void smroute_pattern_keys(
    int64_t b, int64_t n_u, int64_t r, const uint8_t *sub, const int64_t *row_sw,
    const int64_t *row_rem, int64_t g, const uint8_t *down, const uint8_t *own,
    const int64_t *arity, const int64_t *spos, int64_t n_slot, int64_t nb, uint8_t *closer,
    uint8_t *out)
{
    for (int64_t s = 0; s < b; s++) {
        const int64_t *rem = row_rem + s * g, *sp = spos + s * n_slot;
        const uint8_t *dn = down + s * g;
        for (int64_t u = 0; u < n_u; u++) {
            const uint8_t *row = sub + u * r;
            const uint8_t cs = row[row_sw[s]];
            uint8_t *key = out + (s * n_u + u) * (nb + 1);
            memset(key, 0, (size_t)(nb + 1));
            if (cs == INF)
                continue;
            for (int64_t k = 0; k < g; k++) {
                const uint8_t v = row[rem[k]];
                const uint8_t seen = dn[k] ? (v < UP_PHASE ? v : INF) : ((v & (UP_PHASE - 1)) | UP_PHASE);
                closer[k] = seen < cs;
            }
            if (cs >= UP_PHASE && !own[s]) {
                for (int64_t j = 0; j < n_slot; j++)
                    key[j >> 3] |= (uint8_t)(closer[sp[j]] << (j & 7));
                key[nb] = (uint8_t)arity[s];
            } else {
                for (int64_t k = 0; k < g - 1; k++)
                    key[k >> 3] |= (uint8_t)(closer[k] << (k & 7));
            }
        }
    }
}

/* load[u * 256 + port] += 1 for every upper switch u (of n_up) and
 * destination e whose residue is u's slot: e = by_res[key[u]][i] for i in
 * first[key[u]][slot[u]] .. first[key[u]][slot[u] + 1] - 1 (by_res (n_keys,
 * n_e): the destinations by residue mod the arity of group key, first
 * (n_keys, n_first)), where u carries t_of[e] (carried (n_up, n_t)), port =
 * ports[up[u], lid[e]] (row stride `stride`). */
void smroute_up_load(
    int64_t n_up, int64_t n_e, int64_t n_first, int64_t n_t, const int64_t *key,
    const int64_t *slot, const int64_t *by_res, const int64_t *first, const uint8_t *carried,
    const int64_t *t_of, const int64_t *up, const int64_t *lid, const uint8_t *ports,
    int64_t stride, int64_t *load)
{
    for (int64_t u = 0; u < n_up; u++) {
        const int64_t *order = by_res + key[u] * n_e, *at = first + key[u] * n_first;
        const uint8_t *cr = carried + u * n_t, *pr = ports + up[u] * stride;
        int64_t *lu = load + u * 256;
        for (int64_t i = at[slot[u]]; i < at[slot[u] + 1]; i++) {
            const int64_t e = order[i];
            if (cr[t_of[e]])
                lu[pr[lid[e]]]++;
        }
    }
}

/* The redirected entries' slots, block after block (starts[i] ..
 * starts[i + 1] - 1 of n entries in placing order), in rounds: each pending
 * entry weighs its k candidates (flat indices ck / lk / tk (n, k) into
 * carry, load (of n_load, and one past it: 2**40) and taken) at the state
 * the round starts from, cost 0 where
 * carry is set, else load + 1, plus spread * taken; an entry with a free
 * candidate (cost 0) takes the first such, and of the others the first of
 * each run of equal key[] takes the last candidate (the kernel's) unless
 * another is lighter by more than `keep` (the first lightest); then the
 * state is updated (taken for both, carry and load for the latter) and the
 * others wait for the next round.  choice[order[i]] = cand[i, chosen].
 * Returns -1 if out of memory, else 0. */
int smroute_place(
    int64_t n, int64_t k, int64_t n_blocks, const int64_t *starts, const int64_t *ck,
    const int64_t *lk, const int64_t *tk, const int64_t *cand, const int64_t *key,
    const int64_t *order, int64_t spread, int64_t keep, uint8_t *carry, int64_t *load,
    int64_t n_load, int64_t *taken, int64_t *choice)
{
    int64_t past = (int64_t)1 << 40; /* load[n_load]: a missing candidate's, never the lightest */
    int64_t *pend = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    int64_t *best = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    uint8_t *state = malloc((size_t)(n > 0 ? n : 1));
    if (!pend || !best || !state) {
        free(pend);
        free(best);
        free(state);
        return -1;
    }
    for (int64_t blk = 0; blk < n_blocks; blk++) {
        int64_t np_ = 0;
        for (int64_t i = starts[blk]; i < starts[blk + 1]; i++)
            pend[np_++] = i;
        while (np_) {
            for (int64_t p = 0; p < np_; p++) {
                const int64_t i = pend[p];
                int64_t lo = 0, at = 0, last = 0;
                for (int64_t c = 0; c < k; c++) {
                    const int64_t f = i * k + c;
                    const int64_t held = lk[f] == n_load ? past : load[lk[f]];
                    const int64_t cost = (carry[ck[f]] ? 0 : held + 1) + spread * taken[tk[f]];
                    if (c == 0 || cost < lo) {
                        lo = cost;
                        at = c;
                    }
                    last = cost;
                }
                state[p] = lo == 0;
                best[p] = (lo != 0 && last <= lo + keep) ? k - 1 : at;
            }
            int have = 0;
            int64_t prev = 0;
            for (int64_t p = 0; p < np_; p++) {
                if (state[p])
                    continue;
                const int64_t kk = key[pend[p]];
                if (!have || kk != prev)
                    state[p] = 2;
                prev = kk;
                have = 1;
            }
            int64_t left = 0;
            for (int64_t p = 0; p < np_; p++) {
                const int64_t i = pend[p];
                if (!state[p]) {
                    pend[left++] = i;
                    continue;
                }
                const int64_t f = i * k + best[p];
                choice[order[i]] = cand[f];
                taken[tk[f]]++;
                if (state[p] == 2) {
                    carry[ck[f]] = 1;
                    if (lk[f] == n_load)
                        past++;
                    else
                        load[lk[f]]++;
                }
            }
            np_ = left;
        }
    }
    free(pend);
    free(best);
    free(state);
    return 0;
}

/* Of the entries sel[0 .. n - 1], all of nominal arity m: the first `most`
 * slots closer (closer[cls[i] * width + slot]) in the probe order of digit
 * x[i] and redirect digit y[i] (slot (x mod m + 1 + off[r, q]) mod m for q =
 * 0 .. m - 2, r = y mod (m - 1); off (m - 1, m - 1), stride n_off) into
 * out[i] (row stride `stride`, untouched past the last found). */
void smroute_first_slots(
    int64_t n, const int64_t *sel, const int64_t *cls, const int64_t *x, const int64_t *y,
    int64_t m, const int64_t *off, int64_t n_off, const uint8_t *closer, int64_t width,
    int64_t most, int64_t *out, int64_t stride)
{
    const int64_t digits = m - 1 > 1 ? m - 1 : 1;
    for (int64_t e = 0; e < n; e++) {
        const int64_t i = sel[e], j0 = x[i] % m, r = y[i] % digits;
        const uint8_t *row = closer + cls[i] * width;
        int64_t got = 0;
        for (int64_t q = 0; q < m - 1 && got < most; q++) {
            const int64_t slot = (j0 + 1 + off[r * n_off + q]) % m;
            if (row[slot])
                out[i * stride + got++] = slot;
        }
    }
}

static int64_t root_of(int64_t *parent, int64_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* label[i]: the smallest node of i's connected component, for n nodes and
 * the m edges a[e] - b[e] (union-find: a root is its set's smallest node). */
void smroute_components(int64_t n, int64_t m, const int64_t *a, const int64_t *b,
                        int64_t *label)
{
    for (int64_t i = 0; i < n; i++)
        label[i] = i;
    for (int64_t e = 0; e < m; e++) {
        const int64_t ra = root_of(label, a[e]), rb = root_of(label, b[e]);
        if (ra < rb)
            label[rb] = ra;
        else if (rb < ra)
            label[ra] = rb;
    }
    for (int64_t i = 0; i < n; i++)
        label[i] = root_of(label, i);
}

/* First index of `x` in the ascending at[0..m), m if none. */
static int64_t lower_bound(const int64_t *at, int64_t m, int64_t x)
{
    int64_t lo = 0, hi = m;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (at[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* seen[0..n) (zeroed by the caller): the nodes reached from start[0..k)
 * by the edges x -> to[row[x] .. row[x + 1]) and the m2 edges at2 -> to2
 * (at2 ascending), through nodes y with lo <= pos[y] <= hi and, where
 * within is not NULL, within[y]; the start nodes are seen whatever their
 * position.  Ends as soon as `stop` (>= 0) is reached: the nodes seen
 * then are some of the others.  queue: n entries of scratch.  Returns
 * whether stop was reached. */
int smroute_reach(int64_t n, const int64_t *row, const int64_t *to, int64_t m2,
                  const int64_t *at2, const int64_t *to2, int64_t k, const int64_t *start,
                  const int64_t *pos, int64_t lo, int64_t hi, const uint8_t *within,
                  int64_t stop, uint8_t *seen, int64_t *queue)
{
    int64_t head = 0, tail = 0;
    for (int64_t i = 0; i < k; i++) {
        if (!seen[start[i]]) {
            seen[start[i]] = 1;
            queue[tail++] = start[i];
        }
    }
    if (stop >= 0 && stop < n && seen[stop])
        return 1;
    while (head < tail) {
        const int64_t x = queue[head++];
        for (int pass = 0; pass < 2; pass++) {
            int64_t a, b;
            const int64_t *t;
            if (pass == 0) {
                a = row[x], b = row[x + 1], t = to;
            } else {
                a = lower_bound(at2, m2, x), b = lower_bound(at2, m2, x + 1), t = to2;
            }
            for (int64_t e = a; e < b; e++) {
                const int64_t y = t[e];
                if (seen[y] || pos[y] < lo || pos[y] > hi || (within && !within[y]))
                    continue;
                seen[y] = 1;
                if (y == stop)
                    return 1;
                queue[tail++] = y;
            }
        }
    }
    return 0;
}
