/* cc_coll_example_pipeline: the Optimus-CC story on a small pipeline.
 *
 *   mpirun -np 4 cc_coll_example_pipeline [options]      (--help lists them)
 *
 * A student network of S x L linear layers (tanh between them, the last one
 * linear) learns to imitate a teacher network of the same shape. The ranks
 * are S pipeline stages x D data-parallel replicas (rank = replica * S +
 * stage; D = 2 when the rank count is even and at least 4, else 1). Each
 * stage holds L layers; each replica trains on its own shard of the data.
 *
 * A micro-batch is a "sequence" of B tokens of width d: token i of every
 * sequence is a positional vector pos_i (shared by all sequences) plus noise,
 * as in a language model whose rows are token positions. One training
 * iteration runs M micro-batches with a 1F1B schedule per stage: warm-up
 * forwards, steady one-forward-one-backward, cool-down backwards. Then each
 * stage averages its weight gradients over its replicas and takes an SGD step
 * with momentum.
 *
 * Traffic, as Optimus-CC (Song et al., ASPLOS'23) sees it:
 *  - forward activations (B x d floats) go to the next stage with MPI_Isend,
 *    uncompressed;
 *  - backward activation gradients (B x d) go to the previous stage with
 *    cc_coll_send / cc_coll_recv. With compressed backpropagation (CB) the
 *    epilogue sends (the last steady-state backward and the cool-down ones)
 *    are compressed with LOWRANK (one local PowerSGD step: P and Q travel);
 *    the others go uncompressed. Lazy error propagation (LEP, the EF flag of
 *    the params) keeps the compression error of a channel and adds it to the
 *    channel's next send;
 *  - the DP gradient allreduce of a stage (weights and biases in one
 *    cc_coll_allreduce_group) uses LOWRANK + EF for the weights on the first
 *    `way` stages (selective stage compression) and NONE elsewhere.
 *
 * It trains four configurations from the same initialisation and data:
 *   (a) uncompressed, (b) CB without LEP, (c) CB with LEP,
 *   (d) CB + LEP + DP compression (needs D = 2),
 * prints their losses and bytes, and checks the story: every configuration
 * learns, LEP brings CB closer to (a) than CB alone, compression moves fewer
 * bytes. It exits 1 when a check fails.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"

/* Tags: TAG_GRAD on the library's pipeline communicator; TAG_EVAL and
 * TAG_FWD + micro-batch on the MPI pipeline communicator. */
enum { TAG_GRAD = 1, TAG_EVAL = 2, TAG_FWD = 3, MAX_STAGES = 4, MAX_LAYERS = 8, MAX_MICRO = 64, NCHECK = 5 };

/* Command-line knobs; the defaults tell the story on 2 or 4 ranks. */
typedef struct {
    int stages;       /* S; 0 = from the rank count                       */
    int layers;       /* L, layers per stage                               */
    int batch;        /* B, tokens per micro-batch                         */
    int hidden;       /* d, width of every layer                           */
    int micro;        /* M, micro-batches per iteration                    */
    int iters;        /* training iterations                               */
    int shard;        /* sequences in each replica's shard                 */
    int cb_rank;      /* LOWRANK rank of the backward sends                */
    int dp_rank;      /* LOWRANK rank of the DP weight gradients           */
    int way;          /* stages whose DP allreduce is compressed           */
    double lr, momentum, pos;
    double lep_margin; /* (c) must close at least this fraction of the gap */
} options_t;

/* One configuration of the four. */
typedef struct {
    const char *name;
    int cb;  /* compress the epilogue backward sends */
    int lep; /* EF on the compressed channel         */
    int dp;  /* LOWRANK on the first `way` stages    */
} config_t;

/* What one configuration measured (totals over all ranks). */
typedef struct {
    double loss[NCHECK];
    double fwd_bytes, bwd_raw, bwd_wire, bwd_sends, bwd_compressed;
    double dp_raw, dp_wire;
    double stage_dp_raw[MAX_STAGES], stage_dp_wire[MAX_STAGES];
    double seconds;
} result_t;

typedef struct {
    int in, out;
    float *w, *b;      /* w: in x out, row-major (y = x w + b) */
    float *wt;         /* out x in, w transposed for backward  */
    float *gw, *gb;    /* gradients, summed over micro-batches */
    float *vw, *vb;    /* momentum                             */
} layer_t;

static int g_world_rank;

static void die(const char *what, cc_coll_status_t st)
{
    fprintf(stderr, "cc_coll_example_pipeline (rank %d): %s: %s (%s)\n", g_world_rank, what,
            cc_coll_status_string(st), cc_coll_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, "cc_coll_example_pipeline: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* ---- deterministic random numbers (splitmix64 + Box-Muller) ------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double gaussian(uint64_t *s)
{
    double u1 = ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(splitmix(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fill_gaussian(float *x, size_t n, double scale, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; ++i) x[i] = (float)(scale * gaussian(&s));
}

/* ---- dense kernels (row-major, loops ordered so the inner one is
 *      contiguous and vectorises) ------------------------------------------ */

/* y (n x out) = x (n x in) * w (in x out) + b */
static void linear_forward(const float *x, const float *w, const float *b, float *y, int n, int in, int out)
{
    for (int r = 0; r < n; ++r) {
        float *yr = y + (size_t)r * out;
        memcpy(yr, b, (size_t)out * sizeof *yr);
        const float *xr = x + (size_t)r * in;
        for (int i = 0; i < in; ++i) {
            const float a = xr[i];
            const float *wi = w + (size_t)i * out;
            for (int o = 0; o < out; ++o) yr[o] += a * wi[o];
        }
    }
}

/* gw (in x out) += x^T dy, gb += column sums of dy, and, when dx != NULL,
 * dx (n x in) = dy (n x out) * wt (out x in). */
static void linear_backward(const float *x, const float *dy, const float *wt, float *gw, float *gb, float *dx,
                            int n, int in, int out)
{
    for (int r = 0; r < n; ++r) {
        const float *xr = x + (size_t)r * in;
        const float *dyr = dy + (size_t)r * out;
        for (int o = 0; o < out; ++o) gb[o] += dyr[o];
        for (int i = 0; i < in; ++i) {
            const float a = xr[i];
            float *gwi = gw + (size_t)i * out;
            for (int o = 0; o < out; ++o) gwi[o] += a * dyr[o];
        }
        if (dx) {
            float *dxr = dx + (size_t)r * in;
            memset(dxr, 0, (size_t)in * sizeof *dxr);
            for (int o = 0; o < out; ++o) {
                const float a = dyr[o];
                const float *wo = wt + (size_t)o * in;
                for (int i = 0; i < in; ++i) dxr[i] += a * wo[i];
            }
        }
    }
}

static void transpose(const float *a, float *t, int rows, int cols)
{
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) t[(size_t)c * rows + r] = a[(size_t)r * cols + c];
}

/* ---- the networks ------------------------------------------------------- */

/* The weights of global layer `g` (stage * L + l): the teacher's or the
 * student's, the same on every rank that asks. Weights ~ N(0, gain^2 / in). */
static void init_layer(layer_t *ly, int in, int out, int g, int teacher, double gain)
{
    ly->in = in;
    ly->out = out;
    ly->w = xcalloc((size_t)in * out, sizeof(float));
    ly->b = xcalloc((size_t)out, sizeof(float));
    ly->wt = xcalloc((size_t)in * out, sizeof(float));
    ly->gw = xcalloc((size_t)in * out, sizeof(float));
    ly->gb = xcalloc((size_t)out, sizeof(float));
    ly->vw = xcalloc((size_t)in * out, sizeof(float));
    ly->vb = xcalloc((size_t)out, sizeof(float));
    uint64_t seed = (teacher ? 0x7e4c4e5ULL : 0x57d3e7ULL) * 1000003ULL + (uint64_t)g;
    fill_gaussian(ly->w, (size_t)in * out, gain / sqrt((double)in), seed);
    if (teacher) fill_gaussian(ly->b, (size_t)out, 0.1, seed ^ 0xb1a5ULL);
    transpose(ly->w, ly->wt, in, out);
}

static void free_layer(layer_t *ly)
{
    free(ly->w);
    free(ly->b);
    free(ly->wt);
    free(ly->gw);
    free(ly->gb);
    free(ly->vw);
    free(ly->vb);
}

/* Runs layers [0, n) on x (rows x d): acts[0] = x (copied), acts[l + 1] =
 * the output of layer l. tanh after every layer except the network's very
 * last one (`last_is_linear`). */
static void stage_forward(layer_t *ly, int n, float *acts, int rows, int last_is_linear)
{
    for (int l = 0; l < n; ++l) {
        const size_t sz = (size_t)rows * ly[l].out;
        float *x = acts + (size_t)l * sz, *y = acts + (size_t)(l + 1) * sz;
        linear_forward(x, ly[l].w, ly[l].b, y, rows, ly[l].in, ly[l].out);
        if (!(last_is_linear && l == n - 1))
            for (size_t i = 0; i < sz; ++i) y[i] = tanhf(y[i]);
    }
}

/* Backward through layers [0, n): dy is the gradient of acts[n] (overwritten
 * as scratch); dx (may be NULL on stage 0) receives the gradient of acts[0]. */
static void stage_backward(layer_t *ly, int n, const float *acts, float *dy, float *scratch, float *dx, int rows,
                           int last_is_linear)
{
    const size_t sz = (size_t)rows * ly[0].out;
    for (int l = n - 1; l >= 0; --l) {
        const float *y = acts + (size_t)(l + 1) * sz;
        if (!(last_is_linear && l == n - 1))
            for (size_t i = 0; i < sz; ++i) dy[i] *= 1.0f - y[i] * y[i];
        float *out = l > 0 ? scratch : dx;
        linear_backward(acts + (size_t)l * sz, dy, ly[l].wt, ly[l].gw, ly[l].gb, out, rows, ly[l].in, ly[l].out);
        if (l > 0) memcpy(dy, scratch, sz * sizeof *dy);
    }
}

/* ---- the 1F1B schedule -------------------------------------------------- */

/* Stage s of S runs min(S - s - 1, M) warm-up forwards, then M - warm-up
 * steady (forward, backward) pairs, then the remaining backwards. The
 * epilogue sends — the last steady-state backward and the cool-down ones —
 * are micro-batches M - warm-up - 1 .. M - 1. */
static int warmup_forwards(int stage, int S, int M)
{
    int w = S - stage - 1;
    return w < M ? w : M;
}

static int is_epilogue(int stage, int S, int M, int micro)
{
    return micro >= M - warmup_forwards(stage, S, M) - 1;
}

/* "F0 F1 B0 F2 B1 ..." with a '*' after each compressed backward send. */
static void print_schedule(int stage, int S, int M)
{
    const int w = warmup_forwards(stage, S, M);
    printf("  stage %d:", stage);
    int f = 0, b = 0;
    for (; f < w; ++f) printf(" F%d", f);
    while (b < M) {
        if (f < M) printf(" F%d", f++);
        printf(" B%d%s", b, stage > 0 && is_epilogue(stage, S, M, b) ? "*" : "");
        ++b;
    }
    printf("\n");
}

/* ---- one rank's share of the training ---------------------------------- */

typedef struct {
    const options_t *o;
    int S, D, stage, replica, first, last;
    MPI_Comm pipe, dp;
    layer_t *ly;               /* this stage's L layers            */
    float *data;               /* shard: shard x B x d inputs      */
    float *target;             /* last stage: shard x B x d        */
    float *acts;               /* M x (L + 1) x B x d              */
    float *dy, *scratch, *dx;  /* B x d each                       */
} stage_t;

static size_t act_size(const stage_t *st) { return (size_t)st->o->batch * st->o->hidden; }

static float *micro_acts(const stage_t *st, int m)
{
    return st->acts + (size_t)m * (size_t)(st->o->layers + 1) * act_size(st);
}

static cc_coll_params_t cb_params(const options_t *o, int lep)
{
    cc_coll_params_t p = {
        .mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_SHAPE | CC_COLL_PARAMS_FIELD_RANK |
                CC_COLL_PARAMS_FIELD_WARM_START | CC_COLL_PARAMS_FIELD_EF,
        .method = CC_COLL_METHOD_LOWRANK,
        .rows = (uint64_t)o->batch,
        .cols = (uint64_t)o->hidden,
        .rank = o->cb_rank,
        .warm_start = 1,
        .ef = lep,
    };
    return p;
}

/* The loss over every replica's whole shard, forward only (plain MPI). */
static double evaluate(stage_t *st)
{
    const options_t *o = st->o;
    const size_t n = act_size(st);
    double sse = 0.0;
    float *acts = micro_acts(st, 0);
    for (int q = 0; q < o->shard; ++q) {
        if (st->first)
            memcpy(acts, st->data + (size_t)q * n, n * sizeof *acts);
        else
            MPI_Recv(acts, (int)n, MPI_FLOAT, st->stage - 1, TAG_EVAL, st->pipe, MPI_STATUS_IGNORE);
        stage_forward(st->ly, o->layers, acts, o->batch, st->last);
        const float *y = acts + (size_t)o->layers * n;
        if (!st->last) {
            MPI_Send(y, (int)n, MPI_FLOAT, st->stage + 1, TAG_EVAL, st->pipe);
        } else {
            const float *t = st->target + (size_t)q * n;
            for (size_t i = 0; i < n; ++i) sse += ((double)y[i] - t[i]) * ((double)y[i] - t[i]);
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, &sse, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sse / ((double)st->D * o->shard * (double)n);
}

/* Trains one configuration from the common initialisation; rank 0's result
 * holds the totals over all ranks. */
static void train(stage_t *st, const config_t *cfg, result_t *res)
{
    const options_t *o = st->o;
    const int S = st->S, M = o->micro, L = o->layers, B = o->batch, d = o->hidden;
    const size_t n = act_size(st);
    cc_coll_status_t rc;

    for (int l = 0; l < L; ++l) {
        layer_t *ly = &st->ly[l];
        free_layer(ly);
        init_layer(ly, d, d, st->stage * L + l, 0, 1.0);
    }

    /* Fresh library communicators: no residual, no warm-start Q, zero stats. */
    cc_coll_comm_h pipe_cc, dp_cc;
    if ((rc = cc_coll_comm_create(st->pipe, &pipe_cc)) != CC_COLL_OK) die("cc_coll_comm_create(pipe)", rc);
    if ((rc = cc_coll_comm_create(st->dp, &dp_cc)) != CC_COLL_OK) die("cc_coll_comm_create(dp)", rc);

    const cc_coll_params_t bwd = cb_params(o, cfg->lep);

    /* The stage's DP group: its weights (LOWRANK on the first `way` stages
     * in configuration (d), else NONE) and biases (NONE). */
    const int dp_compress = cfg->dp && st->stage < o->way;
    void *bufs[2 * MAX_LAYERS];
    size_t counts[2 * MAX_LAYERS];
    cc_coll_dtype_t dtypes[2 * MAX_LAYERS];
    cc_coll_params_t dpp[2 * MAX_LAYERS];
    for (int l = 0; l < L; ++l) {
        bufs[2 * l] = st->ly[l].gw;
        bufs[2 * l + 1] = st->ly[l].gb;
        counts[2 * l] = (size_t)d * d;
        counts[2 * l + 1] = (size_t)d;
        dtypes[2 * l] = dtypes[2 * l + 1] = CC_COLL_F32;
        dpp[2 * l] = (cc_coll_params_t){.mask = CC_COLL_PARAMS_FIELD_METHOD, .method = CC_COLL_METHOD_NONE};
        dpp[2 * l + 1] = dpp[2 * l];
        if (dp_compress)
            dpp[2 * l] = (cc_coll_params_t){
                .mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_SHAPE | CC_COLL_PARAMS_FIELD_RANK |
                        CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_EF_KEY | CC_COLL_PARAMS_FIELD_WARM_START,
                .method = CC_COLL_METHOD_LOWRANK,
                .rows = (uint64_t)d,
                .cols = (uint64_t)d,
                .rank = o->dp_rank,
                .ef = 1,
                .ef_key = 100 + (uint64_t)l,
                .warm_start = 1,
            };
    }

    double fwd_bytes = 0, bwd_raw = 0, bwd_sends = 0, bwd_compressed = 0;
    MPI_Request *reqs = xcalloc((size_t)M, sizeof *reqs);
    const int w = warmup_forwards(st->stage, S, M);
    int check = 0;

    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int it = 0; it <= o->iters; ++it) {
        if (check < NCHECK && it == check * o->iters / (NCHECK - 1)) {
            const double loss = evaluate(st);
            while (check < NCHECK && it == check * o->iters / (NCHECK - 1)) res->loss[check++] = loss;
        }
        if (it == o->iters) break;

        for (int l = 0; l < L; ++l) {
            memset(st->ly[l].gw, 0, (size_t)d * d * sizeof(float));
            memset(st->ly[l].gb, 0, (size_t)d * sizeof(float));
        }
        int f = 0, b = 0;
        while (b < M) {
            /* Forward f, unless the warm-up is done and backward b comes. */
            const int forward = f < M && (f < w || f == b + w);
            if (forward) {
                float *acts = micro_acts(st, f);
                const int q = (it * M + f) % o->shard;
                if (st->first)
                    memcpy(acts, st->data + (size_t)q * n, n * sizeof *acts);
                else
                    MPI_Recv(acts, (int)n, MPI_FLOAT, st->stage - 1, TAG_FWD + f, st->pipe, MPI_STATUS_IGNORE);
                stage_forward(st->ly, L, acts, B, st->last);
                if (!st->last) {
                    /* Non-blocking: cc_coll_send below waits for its
                     * receiver, so a blocking forward send could deadlock
                     * with the next stage's backward send. */
                    MPI_Isend(acts + (size_t)L * n, (int)n, MPI_FLOAT, st->stage + 1, TAG_FWD + f, st->pipe,
                              &reqs[f]);
                    fwd_bytes += (double)n * sizeof(float);
                }
                ++f;
                continue;
            }
            float *acts = micro_acts(st, b);
            if (st->last) {
                /* d(loss)/dy for loss = mean over the iteration's
                 * elements of (y - t)^2. */
                const int q = (it * M + b) % o->shard;
                const float *y = acts + (size_t)L * n, *t = st->target + (size_t)q * n;
                const float scale = 2.0f / (float)((double)M * (double)n);
                for (size_t i = 0; i < n; ++i) st->dy[i] = scale * (y[i] - t[i]);
            } else {
                if ((rc = cc_coll_recv(st->dy, n, CC_COLL_F32, st->stage + 1, TAG_GRAD, &bwd, pipe_cc, NULL)) !=
                    CC_COLL_OK)
                    die("cc_coll_recv", rc);
            }
            stage_backward(st->ly, L, acts, st->dy, st->scratch, st->first ? NULL : st->dx, B, st->last);
            if (!st->first) {
                const int compress = cfg->cb && is_epilogue(st->stage, S, M, b);
                if ((rc = cc_coll_send(st->dx, n, CC_COLL_F32, st->stage - 1, TAG_GRAD, compress, &bwd, pipe_cc,
                                       NULL)) != CC_COLL_OK)
                    die("cc_coll_send", rc);
                bwd_raw += (double)n * sizeof(float);
                bwd_sends += 1;
                bwd_compressed += compress;
            }
            ++b;
        }
        if (!st->last) MPI_Waitall(M, reqs, MPI_STATUSES_IGNORE);

        if (st->D > 1) {
            rc = cc_coll_allreduce_group((size_t)(2 * L), NULL, bufs, counts, dtypes, CC_COLL_AVG, dpp, dp_cc, NULL);
            if (rc != CC_COLL_OK) die("cc_coll_allreduce_group", rc);
        }
        for (int l = 0; l < L; ++l) {
            layer_t *ly = &st->ly[l];
            const float lr = (float)o->lr, mu = (float)o->momentum;
            for (size_t i = 0; i < (size_t)d * d; ++i) {
                ly->vw[i] = mu * ly->vw[i] + ly->gw[i];
                ly->w[i] -= lr * ly->vw[i];
            }
            for (int i = 0; i < d; ++i) {
                ly->vb[i] = mu * ly->vb[i] + ly->gb[i];
                ly->b[i] -= lr * ly->vb[i];
            }
            transpose(ly->w, ly->wt, d, d);
        }
    }
    double seconds = MPI_Wtime() - t0;

    /* Bytes: our own count of what we handed over, and the library's. */
    cc_coll_stats_t ps = {.mask = CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED | CC_COLL_STATS_FIELD_BYTES_WIRE};
    cc_coll_stats_t ds = ps;
    if ((rc = cc_coll_comm_get_stats(pipe_cc, &ps)) != CC_COLL_OK) die("cc_coll_comm_get_stats(pipe)", rc);
    if ((rc = cc_coll_comm_get_stats(dp_cc, &ds)) != CC_COLL_OK) die("cc_coll_comm_get_stats(dp)", rc);
    enum { NSUM = 5 + 2 * MAX_STAGES };
    double sums[NSUM] = {fwd_bytes, bwd_raw, (double)ps.bytes_wire, bwd_sends, bwd_compressed};
    sums[5 + st->stage] = (double)ds.bytes_uncompressed;
    sums[5 + MAX_STAGES + st->stage] = (double)ds.bytes_wire;
    MPI_Allreduce(MPI_IN_PLACE, sums, NSUM, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    res->fwd_bytes = sums[0];
    res->bwd_raw = sums[1];
    res->bwd_wire = sums[2];
    res->bwd_sends = sums[3];
    res->bwd_compressed = sums[4];
    for (int s = 0; s < S; ++s) {
        res->stage_dp_raw[s] = sums[5 + s];
        res->stage_dp_wire[s] = sums[5 + MAX_STAGES + s];
        res->dp_raw += sums[5 + s];
        res->dp_wire += sums[5 + MAX_STAGES + s];
    }
    res->seconds = seconds;

    free(reqs);
    cc_coll_comm_destroy(pipe_cc);
    cc_coll_comm_destroy(dp_cc);
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np N cc_coll_example_pipeline [options]\n"
            "  --stages S     pipeline stages, 2..4 (default: N / 2 when N is even and >= 4, else N)\n"
            "  --layers L     layers per stage, 1..8 (default 2)\n"
            "  --batch B      tokens per micro-batch (default 64)\n"
            "  --hidden d     layer width (default 128)\n"
            "  --micro M      micro-batches per iteration, 1..64 (default 4)\n"
            "  --iters T      training iterations (default 100)\n"
            "  --shard Q      sequences per replica shard (default 16)\n"
            "  --cb-rank r    LOWRANK rank of the compressed backward sends (default 4)\n"
            "  --dp-rank r    LOWRANK rank of the compressed DP gradients (default 4)\n"
            "  --way k        stages whose DP allreduce is compressed (default S / 2)\n"
            "  --lr x         learning rate (default 0.1)\n"
            "  --momentum x   SGD momentum (default 0.9)\n"
            "  --pos x        weight of the positional vector in each token, 0..1 (default 0.9)\n"
            "  --lep-margin x (c) must close this fraction of (b)'s gap to (a) (default 0.25)\n");
}

static int parse_options(int argc, char **argv, options_t *o)
{
    *o = (options_t){.layers = 2, .batch = 64, .hidden = 128, .micro = 4, .iters = 100, .shard = 16,
                     .cb_rank = 4, .dp_rank = 4, .way = 0, .lr = 0.1, .momentum = 0.9, .pos = 0.9,
                     .lep_margin = 0.25};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0) return 1;
        if (i + 1 >= argc) return -1;
        const char *v = argv[++i];
        int *ip = NULL;
        double *dp = NULL;
        if (strcmp(a, "--stages") == 0) ip = &o->stages;
        else if (strcmp(a, "--layers") == 0) ip = &o->layers;
        else if (strcmp(a, "--batch") == 0) ip = &o->batch;
        else if (strcmp(a, "--hidden") == 0) ip = &o->hidden;
        else if (strcmp(a, "--micro") == 0) ip = &o->micro;
        else if (strcmp(a, "--iters") == 0) ip = &o->iters;
        else if (strcmp(a, "--shard") == 0) ip = &o->shard;
        else if (strcmp(a, "--cb-rank") == 0) ip = &o->cb_rank;
        else if (strcmp(a, "--dp-rank") == 0) ip = &o->dp_rank;
        else if (strcmp(a, "--way") == 0) ip = &o->way;
        else if (strcmp(a, "--lr") == 0) dp = &o->lr;
        else if (strcmp(a, "--momentum") == 0) dp = &o->momentum;
        else if (strcmp(a, "--pos") == 0) dp = &o->pos;
        else if (strcmp(a, "--lep-margin") == 0) dp = &o->lep_margin;
        else return -1;
        char *end;
        if (ip) *ip = (int)strtol(v, &end, 10);
        else *dp = strtod(v, &end);
        if (end == v || *end != '\0') return -1;
    }
    if (o->layers < 1 || o->layers > MAX_LAYERS || o->batch < 1 || o->hidden < 1 || o->micro < 1 ||
        o->micro > MAX_MICRO || o->iters < 1 || o->iters > 100000 || o->shard < 1 || o->cb_rank < 1 ||
        o->dp_rank < 1 || o->way < 0 || o->lr <= 0 || o->momentum < 0 || o->momentum >= 1 || o->pos < 0 ||
        o->pos > 1)
        return -1;
    return 0;
}

static double mb(double bytes) { return bytes / 1e6; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int root = g_world_rank == 0;

    options_t o;
    int pr = parse_options(argc, argv, &o);
    if (pr != 0) {
        if (root) usage(pr > 0 ? stdout : stderr);
        MPI_Finalize();
        return pr > 0 ? 0 : 2;
    }
    int S = o.stages ? o.stages : (size >= 4 && size % 2 == 0 ? size / 2 : size);
    if (S < 2 || S > 4 || size % S != 0 || size / S > 2) {
        if (root)
            fprintf(stderr,
                    "cc_coll_example_pipeline: %d ranks cannot be S x D with S stages in 2..4 and D replicas "
                    "in 1..2 (S = %d)\n",
                    size, S);
        MPI_Finalize();
        return 2;
    }
    const int D = size / S;
    if (o.way == 0) o.way = S / 2;
    if (o.way > S) o.way = S;

    stage_t st = {.o = &o, .S = S, .D = D};
    st.stage = g_world_rank % S;
    st.replica = g_world_rank / S;
    st.first = st.stage == 0;
    st.last = st.stage == S - 1;
    MPI_Comm_split(MPI_COMM_WORLD, st.replica, st.stage, &st.pipe); /* one pipeline per replica */
    MPI_Comm_split(MPI_COMM_WORLD, st.stage, st.replica, &st.dp);   /* one DP group per stage   */

    const int L = o.layers, B = o.batch, d = o.hidden, M = o.micro;
    const size_t n = (size_t)B * d;
    st.ly = xcalloc((size_t)L, sizeof *st.ly); /* train() initialises them */
    st.acts = xcalloc((size_t)M * (L + 1) * n, sizeof(float));
    st.dy = xcalloc(n, sizeof(float));
    st.scratch = xcalloc(n, sizeof(float));
    st.dx = xcalloc(n, sizeof(float));

    /* The replica's shard: token i of each sequence = pos * pos_i +
     * sqrt(1 - pos^2) * noise. The last stage runs the whole teacher on it. */
    st.data = xcalloc((size_t)o.shard * n, sizeof(float));
    float *posv = xcalloc(n, sizeof(float));
    fill_gaussian(posv, n, 1.0, 0x9051710aULL);
    fill_gaussian(st.data, (size_t)o.shard * n, sqrt(1.0 - o.pos * o.pos), 0xda7aULL + 7919ULL * (uint64_t)st.replica);
    for (int q = 0; q < o.shard; ++q)
        for (size_t i = 0; i < n; ++i) st.data[(size_t)q * n + i] += (float)o.pos * posv[i];
    free(posv);
    if (st.last) {
        st.target = xcalloc((size_t)o.shard * n, sizeof(float));
        const int G = S * L;
        layer_t *teacher = xcalloc((size_t)G, sizeof *teacher);
        for (int g = 0; g < G; ++g) init_layer(&teacher[g], d, d, g, 1, 1.5);
        float *acts = xcalloc((size_t)(G + 1) * n, sizeof(float));
        for (int q = 0; q < o.shard; ++q) {
            memcpy(acts, st.data + (size_t)q * n, n * sizeof *acts);
            stage_forward(teacher, G, acts, B, 1);
            memcpy(st.target + (size_t)q * n, acts + (size_t)G * n, n * sizeof *acts);
        }
        free(acts);
        for (int g = 0; g < G; ++g) free_layer(&teacher[g]);
        free(teacher);
    }

    const config_t configs[4] = {
        {"(a) uncompressed", 0, 0, 0},
        {"(b) CB, no LEP", 1, 0, 0},
        {"(c) CB + LEP", 1, 1, 0},
        {"(d) CB + LEP + DP", 1, 1, 1},
    };
    const int nconfigs = D > 1 ? 4 : 3;
    result_t res[4];
    memset(res, 0, sizeof res);

    if (root) {
        printf("# libcc_coll %s pipeline example: %d ranks = %d stages x %d replica%s\n", cc_coll_version_string(),
               size, S, D, D > 1 ? "s" : "");
        printf("# model: %d layers of %dx%d (tanh, the last one linear), %d per stage, imitating a teacher of the "
               "same shape;\n#   a micro-batch is one sequence of %d tokens x %d (token = %.2f x position vector + "
               "noise);\n#   %d micro-batches per iteration, %d iterations, %d sequences per replica, SGD lr %g "
               "momentum %g\n",
               S * L, d, d, L, B, d, o.pos, M, o.iters, o.shard, o.lr, o.momentum);
        printf("# 1F1B schedule of one iteration (Fi/Bi: forward/backward of micro-batch i; * = its backward send "
               "is an epilogue send, compressed under CB):\n");
        for (int s = S - 1; s >= 0; --s) print_schedule(s, S, M);
        printf("# CB: LOWRANK rank %d, the %dx%d gradient sent as P %dx%d + Q %dx%d; LEP = EF on the channel\n",
               o.cb_rank, B, d, B, o.cb_rank, d, o.cb_rank);
        if (D > 1)
            printf("# DP: per stage, one cc_coll_allreduce_group (AVG) of its weights and biases; in (d) the weights "
                   "of stage%s 0..%d (way %d) use LOWRANK rank %d + EF, everything else NONE\n",
                   o.way > 1 ? "s" : "", o.way - 1, o.way, o.dp_rank);
        printf("# loss: mean squared error over all replicas' shards at 0, 25, 50, 75 and 100%% of the "
               "iterations; MB: 10^6 bytes summed over ranks (wire: cc_coll_comm_get_stats bytes_wire)\n");
        printf("%-18s %8s %8s %8s %8s %8s | %7s | %7s %7s %6s | %7s %7s %6s | %6s\n", "configuration", "loss it0",
               "25%", "50%", "75%", "final", "fwd MB", "bwd MB", "wire MB", "ratio", "DP MB", "wire MB", "ratio",
               "time s");
    }
    for (int c = 0; c < nconfigs; ++c) {
        train(&st, &configs[c], &res[c]);
        if (root) {
            const result_t *r = &res[c];
            printf("%-18s %8.5f %8.5f %8.5f %8.5f %8.5f | %7.2f | %7.2f %7.2f %6.2f | %7.2f %7.2f %6.2f | %6.2f\n",
                   configs[c].name, r->loss[0], r->loss[1], r->loss[2], r->loss[3], r->loss[4], mb(r->fwd_bytes),
                   mb(r->bwd_raw), mb(r->bwd_wire), r->bwd_wire > 0 ? r->bwd_raw / r->bwd_wire : 0.0, mb(r->dp_raw),
                   mb(r->dp_wire), r->dp_wire > 0 ? r->dp_raw / r->dp_wire : 0.0, r->seconds);
            fflush(stdout);
        }
    }

    int ok = 1;
    if (root) {
        if (D == 1) printf("# (d) skipped: with one replica there is no DP traffic, so (d) would equal (c)\n");
        /* What one compressed send carries: (b)'s wire bytes less its
         * uncompressed sends, which weigh what (a)'s do. */
        const result_t *ra = &res[0], *rb = &res[1];
        const double raw_send = ra->bwd_wire / ra->bwd_sends;
        const double cb_send = (rb->bwd_wire - (rb->bwd_sends - rb->bwd_compressed) * raw_send) / rb->bwd_compressed;
        printf("# backward: %.0f of %.0f sends compressed; one carries %.0f bytes on the wire where an uncompressed "
               "one carries %.0f (%.1fx)\n",
               rb->bwd_compressed, rb->bwd_sends, cb_send, raw_send, raw_send / cb_send);
        if (nconfigs == 4) {
            printf("# DP in (d):");
            for (int s = 0; s < S; ++s)
                printf("%s stage %d (%s) %.2f -> %.2f MB (%.1fx)", s ? ";" : "", s, s < o.way ? "LOWRANK" : "NONE",
                       mb(res[3].stage_dp_raw[s]), mb(res[3].stage_dp_wire[s]),
                       res[3].stage_dp_raw[s] / res[3].stage_dp_wire[s]);
            printf("\n");
        }
        printf("checks:\n");
        for (int c = 0; c < nconfigs; ++c) {
            const int pass = res[c].loss[NCHECK - 1] < 0.4 * res[c].loss[0];
            ok &= pass;
            printf("  [%s] %s learns: final loss %.5f < 0.4 x initial %.5f\n", pass ? "ok" : "FAIL", configs[c].name,
                   res[c].loss[NCHECK - 1], res[c].loss[0]);
        }
        const double la = res[0].loss[NCHECK - 1], lb = res[1].loss[NCHECK - 1], lc = res[2].loss[NCHECK - 1];
        int pass = lb - la > 0.02 * la;
        ok &= pass;
        printf("  [%s] CB without LEP costs loss: (b) - (a) = %.5f = %+.1f%% of (a), more than 2%%\n",
               pass ? "ok" : "FAIL", lb - la, 100.0 * (lb - la) / la);
        pass = fabs(lc - la) <= (1.0 - o.lep_margin) * fabs(lb - la);
        ok &= pass;
        printf("  [%s] LEP closes the gap: |(c) - (a)| = %.5f <= %.2f x |(b) - (a)| = %.5f (closes %.0f%% of it)\n",
               pass ? "ok" : "FAIL", fabs(lc - la), 1.0 - o.lep_margin, (1.0 - o.lep_margin) * fabs(lb - la),
               100.0 * (1.0 - fabs(lc - la) / fabs(lb - la)));
        for (int k = 1; k < nconfigs; ++k) {
            pass = res[k].bwd_wire < ra->bwd_wire;
            ok &= pass;
            printf("  [%s] %s moves fewer backward bytes: %.2f MB < %.2f MB\n", pass ? "ok" : "FAIL",
                   configs[k].name, mb(res[k].bwd_wire), mb(ra->bwd_wire));
        }
        if (nconfigs == 4) {
            pass = res[3].dp_wire < res[2].dp_wire;
            ok &= pass;
            printf("  [%s] DP compression moves fewer DP bytes: %.2f MB < %.2f MB\n", pass ? "ok" : "FAIL",
                   mb(res[3].dp_wire), mb(res[2].dp_wire));
            const double ld = res[3].loss[NCHECK - 1];
            pass = ld <= 1.1 * lc;
            ok &= pass;
            printf("  [%s] DP compression keeps the loss: (d) %.5f <= 1.1 x (c) %.5f\n", pass ? "ok" : "FAIL", ld,
                   lc);
        }
        printf("%s\n", ok ? "pipeline example: all checks passed" : "pipeline example: SOME CHECKS FAILED");
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);

    for (int l = 0; l < L; ++l) free_layer(&st.ly[l]);
    free(st.ly);
    free(st.acts);
    free(st.dy);
    free(st.scratch);
    free(st.dx);
    free(st.data);
    free(st.target);
    MPI_Comm_free(&st.pipe);
    MPI_Comm_free(&st.dp);
    MPI_Finalize();
    return ok ? 0 : 1;
}
