#include "methods/auto/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "collectives/allreduce/allreduce.hpp"
#include "core/comm.hpp"
#include "core/topology.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/method.hpp"
#include "core/stats.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Calibration sizes: the link's fixed points (bytes), the bounds of its two
// last points (sized to take about 10 ms and kLinkSeconds at the 1 MiB
// point's rate), the sizes of the compute runs (elements of f32), and the
// time after which a candidate's compute sweep stops.
constexpr double kLinkFixed[4] = {sizeof(float), 4096, 65536, 1 << 20};
constexpr double kLinkMaxBytes = 32 << 20;
constexpr double kLinkSeconds = 0.03;
constexpr std::size_t kComputeCounts[kComputePoints] = {std::size_t{1} << 10, std::size_t{1} << 13,
                                                        std::size_t{1} << 16, std::size_t{1} << 19,
                                                        std::size_t{1} << 22};
constexpr double kComputeStopSeconds = 0.04;

// A curve through (xs[i], ys[i]): linear between its points, along its last
// segment past the last one, its first value before the first.
double curve(const double *xs, const double *ys, int points, double x)
{
    if (x <= xs[0]) return ys[0];
    int i = 1;
    while (i < points - 1 && x > xs[i]) ++i;
    const double slope = (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1]);
    return ys[i - 1] + slope * (x - xs[i - 1]);
}

// An error-feedback-free view of the communicator for the measurements: a
// duplicate of it, so that every rank runs each call at once, as the calls
// it predicts will; hierarchical as the communicator is (with duplicates of
// its node and rail communicators), or flat.
struct Bench {
    std::shared_ptr<Comm> comm;
    std::vector<float> in, out;
};

// A copy of `t` on duplicates of its communicators (the rail's a flat Comm
// with `cfg`). Collective over the node and then over the rail.
cc_coll_status_t dup_topology(const NodeTopology &t, const Config &cfg, int threads,
                              std::unique_ptr<NodeTopology> *out)
{
    auto d = std::make_unique<NodeTopology>();
    CC_COLL_TRY(dup_comm(t.node, &d->node));
    d->node_rank = t.node_rank;
    d->node_size = t.node_size;
    d->nodes = t.nodes;
    d->shards = t.shards;
    if (t.rail) {
        MPI_Comm rail = MPI_COMM_NULL;
        CC_COLL_TRY(dup_comm(t.rail->mpi(), &rail));
        Config rail_cfg = cfg;
        rail_cfg.hierarchy = HierarchyMode::Off;
        d->rail = std::make_shared<Comm>(rail, t.rail->rank(), t.rail->size(), rail_cfg);  // frees `rail`
        d->rail->set_threads(threads);
    }
    *out = std::move(d);
    return CC_COLL_OK;
}

// The bench of `comm`: hierarchical when `hierarchical` (comm has a
// topology), else flat.
cc_coll_status_t make_bench(const Comm &comm, bool hierarchical, Bench *b)
{
    MPI_Comm dup = MPI_COMM_NULL;
    CC_COLL_TRY(dup_comm(comm.mpi(), &dup));
    Config cfg = comm.config();
    cfg.ef_max_bytes = 0;
    cfg.state_max_bytes = 0;
    cfg.start_iter = 0;
    if (!hierarchical) cfg.hierarchy = HierarchyMode::Off;
    b->comm = std::make_shared<Comm>(dup, comm.rank(), comm.size(), cfg);  // frees `dup`
    b->comm->set_threads(comm.threads());
    if (hierarchical) {
        std::unique_ptr<NodeTopology> t;
        CC_COLL_TRY(dup_topology(*comm.topology(), cfg, comm.threads(), &t));
        b->comm->set_topology(std::move(t));
    }
    const std::size_t largest = std::max<std::size_t>(kComputeCounts[kComputePoints - 1],
                                                      static_cast<std::size_t>(kLinkMaxBytes) / sizeof(float));
    b->in.resize(largest);
    b->out.resize(largest);
    // Normal data where the candidates run (the link's larger NONE calls
    // need no particular values).
    std::mt19937_64 rng(0x5eed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (std::size_t i = 0; i < kComputeCounts[kComputePoints - 1]; ++i) b->in[i] = dist(rng);
    return CC_COLL_OK;
}

// The link's two last sizes for about `a` and `b` bytes: 2 MiB .. 16 MiB,
// then twice that .. 32 MiB, multiples of 4 KiB, increasing, within the
// bench's buffer.
void upper_sizes(double a, double b, double *out)
{
    const auto round = [](double x) { return std::floor(x / 4096) * 4096; };
    out[0] = std::clamp(round(a), 2 * kLinkFixed[3], kLinkMaxBytes / 2);
    out[1] = std::clamp(round(b), 2 * out[0], kLinkMaxBytes);
}

// `reps` calls of `method` on n f32 elements after one warm-up: the median
// of their wall times and of their compute (compress + decompress).
cc_coll_status_t time_calls(Bench &b, cc_coll_method_t method, std::size_t n, int reps, double *wall,
                            double *compute)
{
    CallParams p;
    CC_COLL_TRY(resolve_params(nullptr, b.comm->config(), &p));
    p.method = method;
    p.has_shape = true;  // a matrix method: near-square (the others ignore it)
    p.rows = 0;
    p.cols = 0;
    std::vector<double> walls, computes;
    for (int i = 0; i <= reps; ++i) {
        const AllreduceArgs args{b.in.data(), b.out.data(), n, CC_COLL_F32, CC_COLL_SUM, false, nullptr};
        const StatsSnapshot s0 = b.comm->stats().snapshot();
        const double t0 = now_seconds();
        CC_COLL_TRY(allreduce(*b.comm, args, p));
        const double t = now_seconds() - t0;
        const StatsSnapshot s1 = b.comm->stats().snapshot();
        if (i == 0) continue;
        walls.push_back(t);
        computes.push_back((s1.time_compress - s0.time_compress) + (s1.time_decompress - s0.time_decompress));
    }
    *wall = median(walls);
    if (compute != nullptr) *compute = median(computes);
    return CC_COLL_OK;
}

// The link: NONE through the library at the fixed sizes, then at two
// larger ones: `upper` when given, else sizes that take about 10 ms and
// kLinkSeconds at the 1 MiB point's rate (every rank must time the same
// sizes: the slowest rank's 1 MiB time decides).
cc_coll_status_t measure_link(Bench &b, const double *upper, double *bytes, double *seconds)
{
    static const int reps[kLinkPoints] = {9, 9, 7, 3, 3, 3};
    for (int i = 0; i < 4; ++i) {
        bytes[i] = kLinkFixed[i];
        CC_COLL_TRY(time_calls(b, CC_COLL_METHOD_NONE, static_cast<std::size_t>(bytes[i] / sizeof(float)), reps[i],
                               &seconds[i], nullptr));
    }
    if (upper != nullptr) {
        bytes[4] = upper[0];
        bytes[5] = upper[1];
    } else {
        double first = seconds[3];
        CC_COLL_TRY(allreduce_max_f64(&first, 1, b.comm->mpi()));
        const double rate = bytes[3] / std::max(first, 1e-9);  // bytes per second of the NONE call
        upper_sizes(rate * 0.01, rate * kLinkSeconds, bytes + 4);
    }
    for (int i = 4; i < kLinkPoints; ++i)
        CC_COLL_TRY(time_calls(b, CC_COLL_METHOD_NONE, static_cast<std::size_t>(bytes[i] / sizeof(float)), reps[i],
                               &seconds[i], nullptr));
    return CC_COLL_OK;
}

// Candidate c's compute at kComputeCounts, the sweep stopped (on every
// rank: the slowest rank's call time decides) after a call over
// kComputeStopSeconds; the sizes it did not reach are extrapolated from the
// last two it did.
cc_coll_status_t measure_compute(Bench &b, cc_coll_method_t method, double *seconds)
{
    int measured = 0;
    for (int i = 0; i < kComputePoints; ++i) {
        double wall = 0, compute = 0;
        CC_COLL_TRY(time_calls(b, method, kComputeCounts[i], 3, &wall, &compute));
        seconds[i] = compute;
        measured = i + 1;
        if (b.comm->size() > 1) CC_COLL_TRY(allreduce_max_f64(&wall, 1, b.comm->mpi()));
        if (wall > kComputeStopSeconds) break;
    }
    for (int i = measured; i < kComputePoints; ++i) {
        const double x = static_cast<double>(kComputeCounts[i]);
        if (measured == 1) {
            seconds[i] = seconds[0] * x / static_cast<double>(kComputeCounts[0]);
        } else {
            const double x0 = static_cast<double>(kComputeCounts[measured - 2]);
            const double x1 = static_cast<double>(kComputeCounts[measured - 1]);
            const double slope = std::max(0.0, (seconds[measured - 1] - seconds[measured - 2]) / (x1 - x0));
            seconds[i] = seconds[measured - 1] + slope * (x - x1);
        }
    }
    return CC_COLL_OK;
}

// A curve made monotone in bytes: never faster for more bytes (noise and
// measurement under load could say so).
void make_monotone(double *ys, int points)
{
    for (int i = 1; i < points; ++i) ys[i] = std::max(ys[i], ys[i - 1]);
}

}  // namespace

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<cc_coll_method_t> auto_candidates(std::uint32_t mask)
{
    std::vector<cc_coll_method_t> out;
    for (const Method *m : methods())
        if (m->auto_candidate && (mask >> static_cast<unsigned>(m->id) & 1u) &&
            out.size() < static_cast<std::size_t>(kMaxCandidates))
            out.push_back(m->id);
    return out;
}

double compute_seconds(const CandidateModel &c, double bytes)
{
    return curve(c.compute_bytes, c.compute_seconds, kComputePoints, bytes);
}

double link_seconds(const CostModel &m, double bytes)
{
    if (m.ranks <= 1) return 0;
    return curve(m.link_bytes, m.link_seconds, kLinkPoints, bytes);
}

double node_seconds(const CostModel &m, double bytes)
{
    if (m.nodes <= 1) return 0;
    return curve(m.node_bytes, m.node_seconds, kLinkPoints, bytes);
}

cc_coll_status_t calibrate(Comm &comm, CostModel *out)
{
    const Config &cfg = comm.config();
    CostModel m;
    m.ranks = comm.size();
    const std::vector<cc_coll_method_t> cands = auto_candidates(cfg.auto_candidates);
    m.candidates = static_cast<int>(cands.size());
    const NodeTopology *topo = comm.topology();
    const bool hier = topo != nullptr && topo->nodes > 1;
    const bool given = cfg.link_gbits > 0;
    Bench bench;
    CC_COLL_TRY(make_bench(comm, hier, &bench));
    // Figures every rank measures, then the maximum over the ranks: the
    // hierarchical NONE call's curve (hierarchical only), the link's curve,
    // then each candidate's compute curve.
    const int link0 = hier ? kLinkPoints : 0;
    const int comp0 = link0 + kLinkPoints;
    const int nfig = comp0 + kComputePoints * m.candidates;
    std::vector<double> fig(static_cast<std::size_t>(nfig), 0.0);
    double none_bytes[kLinkPoints] = {};
    double link_bytes[kLinkPoints] = {};
    Bench *runs = &bench;  // where the link's exchanges and the candidates run
    Bench rail;
    if (hier) {
        m.nodes = topo->nodes;
        m.shards = topo->shards;
        CC_COLL_TRY(measure_link(bench, nullptr, none_bytes, fig.data()));
        // The rails' two last sizes: the shards of the hierarchical call's
        // (agreed sizes, so every rail times the same ones).
        for (int i = 0; i < 4; ++i) link_bytes[i] = kLinkFixed[i];
        double rail_upper[2];
        upper_sizes(none_bytes[4] / m.shards, none_bytes[5] / m.shards, rail_upper);
        link_bytes[4] = rail_upper[0];
        link_bytes[5] = rail_upper[1];
        rail.comm = bench.comm->topology()->rail;  // null where this rank owns no shard
        rail.in.swap(bench.in);
        rail.out.swap(bench.out);
        runs = rail.comm ? &rail : nullptr;
        if (runs != nullptr) CC_COLL_TRY(measure_link(rail, rail_upper, link_bytes, fig.data() + link0));
    } else if (comm.size() > 1 && !given) {
        CC_COLL_TRY(measure_link(bench, nullptr, link_bytes, fig.data()));
    }
    for (int c = 0; c < m.candidates && runs != nullptr; ++c)
        CC_COLL_TRY(measure_compute(*runs, cands[static_cast<std::size_t>(c)],
                                    fig.data() + comp0 + kComputePoints * c));
    if (comm.size() > 1) CC_COLL_TRY(allreduce_max_f64(fig.data(), nfig, comm.mpi()));
    for (int c = 0; c < m.candidates; ++c) {
        CandidateModel &cm = m.candidate[c];
        cm.method = cands[static_cast<std::size_t>(c)];
        for (int i = 0; i < kComputePoints; ++i) {
            cm.compute_bytes[i] = static_cast<double>(kComputeCounts[i]) * sizeof(float);
            cm.compute_seconds[i] = fig[static_cast<std::size_t>(comp0 + kComputePoints * c + i)];
        }
        make_monotone(cm.compute_seconds, kComputePoints);
    }
    if (comm.size() > 1) {
        for (int i = 0; i < kLinkPoints; ++i) {
            m.link_bytes[i] = link_bytes[i];
            m.link_seconds[i] = fig[static_cast<std::size_t>(link0 + i)];
        }
        make_monotone(m.link_seconds, kLinkPoints);
        if (hier) {
            // The node's exchanges: the hierarchical NONE call less its
            // rail's allreduce of the shard.
            double none[kLinkPoints];
            for (int i = 0; i < kLinkPoints; ++i) none[i] = fig[static_cast<std::size_t>(i)];
            make_monotone(none, kLinkPoints);
            for (int i = 0; i < kLinkPoints; ++i) {
                m.node_bytes[i] = none_bytes[i];
                m.node_seconds[i] = std::max(0.0, none[i] - link_seconds(m, none_bytes[i] / m.shards));
            }
            make_monotone(m.node_seconds, kLinkPoints);
            m.latency = none[0];
        }
        const double P = hier ? m.nodes : comm.size();
        if (given) {
            // The given link: latency plus a ring allreduce at its rate.
            m.link_measured = false;
            const double flat[kLinkPoints] = {kLinkFixed[0], kLinkFixed[1], kLinkFixed[2], kLinkFixed[3],
                                              4 << 20, kLinkMaxBytes};
            for (int i = 0; i < kLinkPoints; ++i) {
                if (!hier) m.link_bytes[i] = flat[i];
                m.link_seconds[i] = cfg.link_latency_us * 1e-6 +
                                    2.0 * (P - 1.0) / P * m.link_bytes[i] / (cfg.link_gbits * 1e9 / 8.0);
            }
        }
        if (!hier) m.latency = m.link_seconds[0];
        const int last = kLinkPoints - 1;
        m.bandwidth = 2.0 * (P - 1.0) / P * (m.link_bytes[last] - m.link_bytes[last - 1]) /
                      std::max(m.link_seconds[last] - m.link_seconds[last - 1], 1e-12);
    }
    *out = m;
    if (log_enabled(LogLevel::Info)) {
        log_message(LogLevel::Info,
                    "cost model (rank %d of %d): %s latency %.1f us, %.1f us at 64 KiB, %.1f us at 1 MiB, "
                    "bandwidth %.3f Gbit/s (%s)",
                    comm.rank(), comm.size(), hier ? "rail link" : "link", m.link_seconds[0] * 1e6,
                    m.link_seconds[2] * 1e6, m.link_seconds[3] * 1e6, m.bandwidth * 8e-9,
                    m.link_measured ? "measured" : "CC_COLL_LINK");
        if (hier)
            log_message(LogLevel::Info,
                        "cost model: hierarchical, %d nodes, %d shards; the node's exchanges %.1f us at 1 MiB, "
                        "%.1f us at %.0f MiB",
                        m.nodes, m.shards, node_seconds(m, 1 << 20) * 1e6, m.node_seconds[kLinkPoints - 1] * 1e6,
                        m.node_bytes[kLinkPoints - 1] / (1 << 20));
        for (int c = 0; c < m.candidates; ++c) {
            const CandidateModel &cm = m.candidate[c];
            log_message(LogLevel::Info,
                        "cost model: %s compute %.1f us at 4 KiB, %.1f us at 32 KiB, %.1f us at 256 KiB, "
                        "%.1f us at 2 MiB, %.1f us at 16 MiB%s",
                        find_method(cm.method)->name, cm.compute_seconds[0] * 1e6, cm.compute_seconds[1] * 1e6,
                        cm.compute_seconds[2] * 1e6, cm.compute_seconds[3] * 1e6, cm.compute_seconds[4] * 1e6,
                        hier ? " (of a shard, on a rail)" : "");
        }
    }
    return CC_COLL_OK;
}

namespace {

// The tensors as a hierarchical communicator's rails see them under
// `method`: the largest shard (shard 0) by the method's sharding rule.
std::vector<CostTensor> on_link(const CostModel &model, const std::vector<CostTensor> &tensors, const CallParams &p,
                                cc_coll_method_t method)
{
    NodeTopology t;
    t.shards = model.shards;
    std::vector<CostTensor> out;
    for (const CostTensor &x : tensors) {
        CallParams q = p;
        q.method = method;
        q.has_shape = x.has_shape;
        q.rows = x.rows;
        q.cols = x.cols;
        HierarchicalShard s;
        hierarchical_shard(t, x.count, x.dtype, q, 0, &s);
        out.push_back(CostTensor{s.count, x.dtype, x.has_shape, s.params.rows, s.params.cols});
    }
    return out;
}

double bytes_of(const std::vector<CostTensor> &tensors)
{
    double bytes = 0;
    for (const CostTensor &t : tensors)
        bytes += static_cast<double>(t.count) * static_cast<double>(dtype_size(t.dtype));
    return bytes;
}

}  // namespace

AutoChoice predict(const CostModel &model, const std::vector<CostTensor> &tensors, const CallParams &p)
{
    AutoChoice c;
    const bool hier = model.nodes > 1;
    const int P = hier ? model.nodes : model.ranks;
    const double bytes = bytes_of(tensors);
    const double node = node_seconds(model, bytes);
    c.predicted_none =
        node + link_seconds(model, hier ? bytes_of(on_link(model, tensors, p, CC_COLL_METHOD_NONE)) : bytes);
    c.predicted_lossy = kInf;
    for (int i = 0; i < model.candidates; ++i) {
        const Method *lossy = find_method(model.candidate[i].method);
        std::vector<CostTensor> sharded;
        if (hier) sharded = on_link(model, tensors, p, model.candidate[i].method);
        const std::vector<CostTensor> &shards = hier ? sharded : tensors;
        ExchangeCost ex;
        bool dense = lossy == nullptr || lossy->exchange_cost == nullptr;
        for (const CostTensor &t : shards)
            if (model.ranks > 1 && !dense && !lossy->exchange_cost(t, p, P, &ex)) dense = true;
        const double wire = model.ranks <= 1 ? 0
                                             : link_seconds(model, ex.bytes[0]) +
                                                   (ex.bytes[1] > 0 ? link_seconds(model, ex.bytes[1]) : 0) +
                                                   ex.latencies * link_seconds(model, sizeof(float));
        c.predicted[i] = dense ? kInf : node + compute_seconds(model.candidate[i], hier ? bytes_of(shards) : bytes) + wire;
        if (c.predicted[i] < c.predicted_lossy) {
            c.predicted_lossy = c.predicted[i];
            c.best_candidate = i;
        }
    }
    c.method = model.candidates > 0 && c.predicted_lossy < c.predicted_none
                   ? model.candidate[c.best_candidate].method
                   : CC_COLL_METHOD_NONE;
    return c;
}

}  // namespace cc_coll::detail
