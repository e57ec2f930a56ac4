#include "methods/auto/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "collectives/allreduce/allreduce.hpp"
#include "core/comm.hpp"
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

// A flat, error-feedback-free view of the communicator for the
// measurements: a duplicate of it, so that every rank runs each call at
// once, as the calls it predicts will.
struct Bench {
    std::unique_ptr<Comm> comm;
    std::vector<float> in, out;
};

cc_coll_status_t make_bench(const Comm &comm, Bench *b)
{
    MPI_Comm dup = MPI_COMM_NULL;
    CC_COLL_TRY(dup_comm(comm.mpi(), &dup));
    Config cfg = comm.config();
    cfg.hierarchy = HierarchyMode::Off;
    cfg.ef_max_bytes = 0;
    cfg.state_max_bytes = 0;
    cfg.start_iter = 0;
    b->comm = std::make_unique<Comm>(dup, comm.rank(), comm.size(), cfg);  // frees `dup`
    b->comm->set_threads(comm.threads());
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

// The link: NONE through the library at the fixed sizes, then at sizes
// that take about 10 ms and kLinkSeconds at the 1 MiB point's rate (every
// rank must time the same sizes: the slowest rank's 1 MiB time decides).
cc_coll_status_t measure_link(Bench &b, double *bytes, double *seconds)
{
    static const int reps[kLinkPoints] = {9, 9, 7, 3, 3, 3};
    for (int i = 0; i < 4; ++i) {
        bytes[i] = kLinkFixed[i];
        CC_COLL_TRY(time_calls(b, CC_COLL_METHOD_NONE, static_cast<std::size_t>(bytes[i] / sizeof(float)), reps[i],
                               &seconds[i], nullptr));
    }
    double first = seconds[3];
    CC_COLL_TRY(allreduce_max_f64(&first, 1, b.comm->mpi()));
    const double rate = bytes[3] / std::max(first, 1e-9);  // bytes per second of the NONE call
    // 2 MiB .. 16 MiB, then twice that .. 32 MiB: increasing, within the buffer.
    const auto round = [](double x) { return std::floor(x / 4096) * 4096; };
    bytes[4] = std::clamp(round(rate * 0.01), 2 * bytes[3], kLinkMaxBytes / 2);
    bytes[5] = std::clamp(round(rate * kLinkSeconds), 2 * bytes[4], kLinkMaxBytes);
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

cc_coll_status_t calibrate(Comm &comm, CostModel *out)
{
    const Config &cfg = comm.config();
    CostModel m;
    m.ranks = comm.size();
    const std::vector<cc_coll_method_t> cands = auto_candidates(cfg.auto_candidates);
    m.candidates = static_cast<int>(cands.size());
    Bench bench;
    CC_COLL_TRY(make_bench(comm, &bench));
    // Figures every rank measures, then the maximum over the ranks: the
    // link's curve, then each candidate's compute curve.
    const int nfig = kLinkPoints + kComputePoints * m.candidates;
    std::vector<double> fig(static_cast<std::size_t>(nfig), 0.0);
    double link_bytes[kLinkPoints] = {};
    const double P = comm.size();
    if (comm.size() > 1 && cfg.link_gbits <= 0) CC_COLL_TRY(measure_link(bench, link_bytes, fig.data()));
    for (int c = 0; c < m.candidates; ++c)
        CC_COLL_TRY(measure_compute(bench, cands[static_cast<std::size_t>(c)],
                                    fig.data() + kLinkPoints + kComputePoints * c));
    if (comm.size() > 1) CC_COLL_TRY(allreduce_max_f64(fig.data(), nfig, comm.mpi()));
    for (int c = 0; c < m.candidates; ++c) {
        CandidateModel &cm = m.candidate[c];
        cm.method = cands[static_cast<std::size_t>(c)];
        for (int i = 0; i < kComputePoints; ++i) {
            cm.compute_bytes[i] = static_cast<double>(kComputeCounts[i]) * sizeof(float);
            cm.compute_seconds[i] = fig[static_cast<std::size_t>(kLinkPoints + kComputePoints * c + i)];
        }
        make_monotone(cm.compute_seconds, kComputePoints);
    }
    if (comm.size() > 1) {
        if (cfg.link_gbits > 0) {
            // The given link: latency plus a ring allreduce at its rate.
            m.link_measured = false;
            const double given[kLinkPoints] = {kLinkFixed[0], kLinkFixed[1], kLinkFixed[2], kLinkFixed[3],
                                               4 << 20, kLinkMaxBytes};
            for (int i = 0; i < kLinkPoints; ++i) {
                link_bytes[i] = given[i];
                fig[static_cast<std::size_t>(i)] =
                    cfg.link_latency_us * 1e-6 + 2.0 * (P - 1.0) / P * given[i] / (cfg.link_gbits * 1e9 / 8.0);
            }
        }
        for (int i = 0; i < kLinkPoints; ++i) {
            m.link_bytes[i] = link_bytes[i];
            m.link_seconds[i] = fig[static_cast<std::size_t>(i)];
        }
        make_monotone(m.link_seconds, kLinkPoints);
        const int last = kLinkPoints - 1;
        m.latency = m.link_seconds[0];
        m.bandwidth = 2.0 * (P - 1.0) / P * (m.link_bytes[last] - m.link_bytes[last - 1]) /
                      std::max(m.link_seconds[last] - m.link_seconds[last - 1], 1e-12);
    }
    *out = m;
    if (log_enabled(LogLevel::Info)) {
        log_message(LogLevel::Info,
                    "cost model (rank %d of %d): link latency %.1f us, %.1f us at 64 KiB, %.1f us at 1 MiB, "
                    "bandwidth %.3f Gbit/s (%s)",
                    comm.rank(), comm.size(), m.latency * 1e6, m.link_seconds[2] * 1e6, m.link_seconds[3] * 1e6,
                    m.bandwidth * 8e-9, m.link_measured ? "measured" : "CC_COLL_LINK");
        for (int c = 0; c < m.candidates; ++c) {
            const CandidateModel &cm = m.candidate[c];
            log_message(LogLevel::Info,
                        "cost model: %s compute %.1f us at 4 KiB, %.1f us at 32 KiB, %.1f us at 256 KiB, "
                        "%.1f us at 2 MiB, %.1f us at 16 MiB",
                        find_method(cm.method)->name, cm.compute_seconds[0] * 1e6, cm.compute_seconds[1] * 1e6,
                        cm.compute_seconds[2] * 1e6, cm.compute_seconds[3] * 1e6, cm.compute_seconds[4] * 1e6);
        }
    }
    return CC_COLL_OK;
}

AutoChoice predict(const CostModel &model, const std::vector<CostTensor> &tensors, const CallParams &p)
{
    AutoChoice c;
    double bytes = 0;
    for (const CostTensor &t : tensors)
        bytes += static_cast<double>(t.count) * static_cast<double>(dtype_size(t.dtype));
    c.predicted_none = link_seconds(model, bytes);
    c.predicted_lossy = kInf;
    for (int i = 0; i < model.candidates; ++i) {
        const Method *lossy = find_method(model.candidate[i].method);
        ExchangeCost ex;
        bool dense = lossy == nullptr || lossy->exchange_cost == nullptr;
        for (const CostTensor &t : tensors)
            if (model.ranks > 1 && !dense && !lossy->exchange_cost(t, p, model.ranks, &ex)) dense = true;
        const double wire = model.ranks <= 1 ? 0
                                             : link_seconds(model, ex.bytes[0]) +
                                                   (ex.bytes[1] > 0 ? link_seconds(model, ex.bytes[1]) : 0) +
                                                   ex.latencies * model.latency;
        c.predicted[i] = dense ? kInf : compute_seconds(model.candidate[i], bytes) + wire;
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
