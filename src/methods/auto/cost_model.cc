#include "methods/auto/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
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

// Calibration sizes: the link's first large allreduce, the bounds of the
// second (sized to take about kLinkSeconds at the first one's rate), and
// the two sizes of the compute runs (elements of f32).
constexpr std::size_t kLinkBytes = std::size_t{1} << 20;
constexpr std::size_t kLinkMaxBytes = std::size_t{32} << 20;
constexpr double kLinkSeconds = 0.03;
constexpr std::size_t kComputeCounts[kComputePoints] = {std::size_t{1} << 10, std::size_t{1} << 13,
                                                        std::size_t{1} << 16, std::size_t{1} << 19,
                                                        std::size_t{1} << 22};

// The seconds of one MPI_Allreduce of `bytes` on the communicator: the
// measured curve, linear between its points, along its last segment past
// the last one.
double curve(const double *xs, const double *ys, int points, double x)
{
    if (x <= xs[0]) return ys[0];
    int i = 1;
    while (i < points - 1 && x > xs[i]) ++i;
    const double slope = (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1]);
    return ys[i - 1] + slope * (x - xs[i - 1]);
}

double allreduce_seconds(const CostModel &m, double bytes)
{
    if (m.ranks <= 1) return 0;
    return curve(m.link_bytes, m.link_seconds, kLinkPoints, bytes);
}

// Runs the lossy method on a one-rank communicator of `threads` threads:
// the compute alone, at each of kComputeCounts (f32). Fills the seconds of
// the fastest call of each size after one warm-up.
cc_coll_status_t time_compute(const Comm &comm, cc_coll_method_t lossy, double *seconds)
{
    MPI_Comm self = MPI_COMM_NULL;
    CC_COLL_TRY(dup_self(&self));
    Config cfg = comm.config();
    cfg.method = lossy;
    cfg.hierarchy = HierarchyMode::Off;
    cfg.ef_max_bytes = 0;
    cfg.state_max_bytes = 0;
    cfg.start_iter = 0;
    Comm one(self, 0, 1, cfg);  // frees `self`
    one.set_threads(comm.threads());
    CallParams p;
    CC_COLL_TRY(resolve_params(nullptr, cfg, &p));
    p.method = lossy;
    p.has_shape = true;  // LOWRANK: near-square (the other methods ignore it)
    p.rows = 0;
    p.cols = 0;
    const std::size_t largest = kComputeCounts[kComputePoints - 1];
    std::vector<float> in(largest), out(largest);
    std::mt19937_64 rng(0x5eed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float &v : in) v = dist(rng);
    for (int point = 0; point < kComputePoints; ++point) {
        const std::size_t n = kComputeCounts[point];
        double best = kInf;
        for (int i = 0, reps = n <= (std::size_t{1} << 16) ? 8 : 4; i < reps; ++i) {
            const AllreduceArgs args{in.data(), out.data(), n, CC_COLL_F32, CC_COLL_SUM, false, nullptr};
            const double t0 = now_seconds();
            CC_COLL_TRY(allreduce(one, args, p));
            const double t = now_seconds() - t0;
            if (i > 0) best = std::min(best, t);
        }
        seconds[point] = best;
    }
    return CC_COLL_OK;
}

// The fastest of `reps` MPI_Allreduce of `bytes` on comm (after a warm-up).
cc_coll_status_t time_allreduce(MPI_Comm comm, std::size_t bytes, int reps, double *best)
{
    std::vector<float> buf(std::max<std::size_t>(bytes / sizeof(float), 1), 1.0f);
    *best = kInf;
    for (int i = 0; i <= reps; ++i) {
        const double t0 = now_seconds();
        CC_COLL_TRY(allreduce_sum(buf.data(), buf.data(), buf.size(), CC_COLL_F32, comm));
        const double t = now_seconds() - t0;
        if (i > 0) *best = std::min(*best, t);
    }
    return CC_COLL_OK;
}

cc_coll_status_t calibrate(Comm &comm, CostModel *out)
{
    const Config &cfg = comm.config();
    CostModel m;
    m.lossy = cfg.auto_method;
    m.ranks = comm.size();
    // Figures every rank measures, then the maximum over the ranks.
    double fig[kLinkPoints + kComputePoints] = {};  // the link's curve, then the compute's
    CC_COLL_TRY(time_compute(comm, m.lossy, fig + kLinkPoints));
    const double P = comm.size();
    // The link: MPI_Allreduce at 8 B, 4 KiB, 64 KiB and 1 MiB, then at a
    // size that takes about kLinkSeconds at the 1 MiB rate (large enough
    // for MPI's algorithm for large messages and the link's steady rate).
    // Every rank must time the same sizes: the slowest rank's 1 MiB time
    // decides the last.
    double link_bytes[kLinkPoints] = {sizeof(float), 4096, 65536, static_cast<double>(kLinkBytes), 0};
    if (comm.size() > 1 && cfg.link_gbits <= 0) {
        static const int reps[kLinkPoints] = {7, 7, 5, 2, 2};
        for (int i = 0; i + 1 < kLinkPoints; ++i)
            CC_COLL_TRY(time_allreduce(comm.mpi(), static_cast<std::size_t>(link_bytes[i]), reps[i], &fig[i]));
        double first = fig[kLinkPoints - 2];
        CC_COLL_TRY(allreduce_max_f64(&first, 1, comm.mpi()));
        const double rate = 2.0 * (P - 1.0) / P * static_cast<double>(kLinkBytes) / std::max(first, 1e-9);
        const double want = std::min(static_cast<double>(kLinkMaxBytes), rate * kLinkSeconds);
        link_bytes[kLinkPoints - 1] = static_cast<double>(
            std::max(2 * kLinkBytes, static_cast<std::size_t>(want) / 4096 * 4096));
        CC_COLL_TRY(time_allreduce(comm.mpi(), static_cast<std::size_t>(link_bytes[kLinkPoints - 1]),
                                   reps[kLinkPoints - 1], &fig[kLinkPoints - 1]));
    }
    if (comm.size() > 1)
        CC_COLL_TRY(allreduce_max_f64(fig, kLinkPoints + kComputePoints, comm.mpi()));
    for (int i = 0; i < kComputePoints; ++i) {
        m.compute_bytes[i] = static_cast<double>(kComputeCounts[i]) * sizeof(float);
        // Never faster for more bytes (noise could say so).
        const double t = fig[kLinkPoints + i];
        m.compute_seconds[i] = i == 0 ? t : std::max(t, m.compute_seconds[i - 1]);
    }
    if (comm.size() > 1) {
        if (cfg.link_gbits > 0) {
            // The given link: latency plus a ring allreduce at its rate.
            m.link_measured = false;
            link_bytes[kLinkPoints - 1] = static_cast<double>(kLinkMaxBytes);
            for (int i = 0; i < kLinkPoints; ++i)
                fig[i] = cfg.link_latency_us * 1e-6 + 2.0 * (P - 1.0) / P * link_bytes[i] / (cfg.link_gbits * 1e9 / 8.0);
        }
        for (int i = 0; i < kLinkPoints; ++i) {
            m.link_bytes[i] = link_bytes[i];
            m.link_seconds[i] = i == 0 ? fig[0] : std::max(fig[i], m.link_seconds[i - 1]);
        }
        const int last = kLinkPoints - 1;
        m.latency = m.link_seconds[0];
        m.bandwidth = 2.0 * (P - 1.0) / P * (m.link_bytes[last] - m.link_bytes[last - 1]) /
                      std::max(m.link_seconds[last] - m.link_seconds[last - 1], 1e-12);
    }
    *out = m;
    log_message(LogLevel::Info,
                "cost model (rank %d of %d): link latency %.1f us, %.1f us at 64 KiB, bandwidth %.3f Gbit/s (%s); "
                "%s compute %.1f us "
                "at 4 KiB, %.1f us at 32 KiB, %.1f us at 256 KiB, %.1f us at 2 MiB, %.1f us at 16 MiB",
                comm.rank(), comm.size(), m.latency * 1e6, m.link_seconds[2] * 1e6, m.bandwidth * 8e-9,
                m.link_measured ? "measured" : "CC_COLL_LINK", find_method(m.lossy)->name,
                m.compute_seconds[0] * 1e6, m.compute_seconds[1] * 1e6, m.compute_seconds[2] * 1e6,
                m.compute_seconds[3] * 1e6, m.compute_seconds[4] * 1e6);
    return CC_COLL_OK;
}

}  // namespace

double compute_seconds(const CostModel &m, double bytes)
{
    return curve(m.compute_bytes, m.compute_seconds, kComputePoints, bytes);
}

AutoChoice predict(const CostModel &model, const std::vector<CostTensor> &tensors, const CallParams &p)
{
    AutoChoice c;
    const Method *lossy = find_method(model.lossy);
    double bytes = 0;
    ExchangeCost ex;
    bool dense = lossy == nullptr || lossy->exchange_cost == nullptr;
    for (const CostTensor &t : tensors) {
        bytes += static_cast<double>(t.count) * static_cast<double>(dtype_size(t.dtype));
        if (model.ranks > 1 && !dense && !lossy->exchange_cost(t, p, model.ranks, &ex)) dense = true;
    }
    c.predicted_none = allreduce_seconds(model, bytes);
    const double wire = model.ranks <= 1 ? 0
                                         : allreduce_seconds(model, ex.bytes[0]) +
                                               (ex.bytes[1] > 0 ? allreduce_seconds(model, ex.bytes[1]) : 0) +
                                               ex.latencies * model.latency;
    c.predicted_lossy = dense ? kInf : compute_seconds(model, bytes) + wire;
    c.method = c.predicted_lossy < c.predicted_none ? model.lossy : CC_COLL_METHOD_NONE;
    return c;
}

const CostModel *cost_model_of(Comm &comm) { return static_cast<const CostModel *>(comm.cost_model_slot().get()); }

cc_coll_status_t ensure_cost_model(Comm &comm, const CostModel **model)
{
    if (const CostModel *m = cost_model_of(comm)) {
        *model = m;
        return CC_COLL_OK;
    }
    auto m = std::make_shared<CostModel>();
    CC_COLL_TRY(calibrate(comm, m.get()));
    comm.cost_model_slot() = m;
    *model = m.get();
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
