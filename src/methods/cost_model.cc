#include "methods/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include <mpi.h>

#include "collectives/allreduce/allreduce.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/method.hpp"
#include "core/stats.hpp"
#include "transport/mpi_transport.hpp"
#include "wire/topk_payload.hpp"

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

// What the lossy method exchanges for one tensor, as the sizes of the
// allreduces that move as many bytes (an allgather of b bytes from each of
// P ranks moves what an allreduce of P b / 2 does), added to ex[0] and
// ex[1], and the small exchanges beside them (*small). False when the
// method would send the tensor densely.
bool lossy_exchanges(const CostModel &m, const AutoTensor &t, const CallParams &p, double ex[2], double *small)
{
    const double P = m.ranks;
    const std::size_t es = dtype_size(t.dtype);
    const std::size_t n = t.count;
    switch (m.lossy) {
    case CC_COLL_METHOD_TOPK: {
        if (topk_allreduce_dense(n, t.dtype, p.density, m.ranks)) return false;
        const double payload = static_cast<double>(topk::payload_bytes(topk::k_for(p.density, n), t.dtype));
        const bool split = p.topk_algorithm == TopkAlgorithm::Split ||
                           (p.topk_algorithm == TopkAlgorithm::Auto && m.ranks >= kTopkSplitAutoRanks);
        if (split) {
            // Pairs to their owners, then the owners' regions to everyone:
            // about 2 payloads received per rank, and two count exchanges.
            ex[0] += P / (P - 1.0) * payload;
            *small = std::max(*small, 2.0);
        } else {
            ex[0] += P * payload / 2.0;
        }
        return true;
    }
    case CC_COLL_METHOD_SKETCH: {
        const double k = static_cast<double>(topk::k_for(p.density, n));
        const double support = std::min(static_cast<double>(n), P * k);
        ex[0] += static_cast<double>(n) / 8.0 + 1.0;      // the support bitmap
        ex[1] += 1.15 * support / p.load_factor * es;     // the sketch's cells
        return true;
    }
    case CC_COLL_METHOD_LOWRANK: {
        lowrank::Shape s;
        std::string why;
        if (!t.has_shape || !lowrank::resolve_shape(n, t.has_shape, t.rows, t.cols, p.rank, &s, &why) ||
            !lowrank::should_compress(s, p.min_compression_rate))
            return false;
        const double wes = t.dtype == CC_COLL_F64 ? 8.0 : 4.0;  // the factors are in the work type
        ex[0] += static_cast<double>(s.rows) * s.rank * wes;    // P
        ex[1] += static_cast<double>(s.cols) * s.rank * wes;    // Q
        return true;
    }
    default: return false;
    }
}

// Runs the lossy method on a one-rank communicator of `threads` threads:
// the compute alone, at each of kComputeCounts (f32). Fills the seconds of
// the fastest call of each size after one warm-up.
cc_coll_status_t time_compute(const Comm &comm, cc_coll_method_t lossy, double *seconds)
{
    MPI_Comm self = MPI_COMM_NULL;
    CC_COLL_TRY(check_mpi(MPI_Comm_dup(MPI_COMM_SELF, &self), "MPI_Comm_dup (MPI_COMM_SELF)"));
    MPI_Comm_set_errhandler(self, MPI_ERRORS_RETURN);
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
        CC_COLL_TRY(check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_FLOAT,
                                            MPI_SUM, comm),
                              "MPI_Allreduce (cost model)"));
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
        CC_COLL_TRY(check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_DOUBLE, MPI_MAX, comm.mpi()),
                              "MPI_Allreduce (cost model)"));
        const double rate = 2.0 * (P - 1.0) / P * static_cast<double>(kLinkBytes) / std::max(first, 1e-9);
        const double want = std::min(static_cast<double>(kLinkMaxBytes), rate * kLinkSeconds);
        link_bytes[kLinkPoints - 1] = static_cast<double>(
            std::max(2 * kLinkBytes, static_cast<std::size_t>(want) / 4096 * 4096));
        CC_COLL_TRY(time_allreduce(comm.mpi(), static_cast<std::size_t>(link_bytes[kLinkPoints - 1]),
                                   reps[kLinkPoints - 1], &fig[kLinkPoints - 1]));
    }
    if (comm.size() > 1)
        CC_COLL_TRY(check_mpi(MPI_Allreduce(MPI_IN_PLACE, fig, kLinkPoints + kComputePoints, MPI_DOUBLE, MPI_MAX,
                                            comm.mpi()),
                              "MPI_Allreduce (cost model agreement)"));
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
                m.link_measured ? "measured" : "CC_COLL_LINK", cc_coll_method_name(m.lossy),
                m.compute_seconds[0] * 1e6, m.compute_seconds[1] * 1e6, m.compute_seconds[2] * 1e6,
                m.compute_seconds[3] * 1e6, m.compute_seconds[4] * 1e6);
    return CC_COLL_OK;
}

}  // namespace

double compute_seconds(const CostModel &m, double bytes)
{
    return curve(m.compute_bytes, m.compute_seconds, kComputePoints, bytes);
}

AutoChoice predict(const CostModel &model, const std::vector<AutoTensor> &tensors, const CallParams &p)
{
    AutoChoice c;
    double bytes = 0, ex[2] = {0, 0}, small = 0;
    bool dense = false;
    for (const AutoTensor &t : tensors) {
        bytes += static_cast<double>(t.count) * static_cast<double>(dtype_size(t.dtype));
        if (model.ranks > 1 && !lossy_exchanges(model, t, p, ex, &small)) dense = true;
    }
    c.predicted_none = allreduce_seconds(model, bytes);
    const double wire = model.ranks <= 1 ? 0
                                         : allreduce_seconds(model, ex[0]) +
                                               (ex[1] > 0 ? allreduce_seconds(model, ex[1]) : 0) +
                                               small * model.latency;
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

cc_coll_status_t resolve_auto(Comm &comm, const std::vector<AutoTensor> &tensors, bool modeled, CallParams *p)
{
    if (p->method != CC_COLL_METHOD_AUTO) return CC_COLL_OK;
    StatsSnapshot s;
    s.auto_calls = 1;
    if (!modeled) {
        p->method = CC_COLL_METHOD_NONE;
        comm.stats().add(s);
        return CC_COLL_OK;
    }
    const CostModel *model = nullptr;
    CC_COLL_TRY(ensure_cost_model(comm, &model));
    const AutoChoice c = predict(*model, tensors, *p);
    p->method = c.method;
    s.auto_lossy_calls = c.method == CC_COLL_METHOD_NONE ? 0 : 1;
    s.auto_predicted = c.method == CC_COLL_METHOD_NONE ? c.predicted_none : c.predicted_lossy;
    comm.stats().add(s);
    if (log_enabled(LogLevel::Info)) {
        std::size_t bytes = 0;
        for (const AutoTensor &t : tensors) bytes += t.count * dtype_size(t.dtype);
        log_message(LogLevel::Info, "auto: %zu bytes in %zu tensor(s): %s (predicted none %.3f ms, %s %.3f ms)",
                    bytes, tensors.size(), cc_coll_method_name(c.method), c.predicted_none * 1e3,
                    cc_coll_method_name(model->lossy), c.predicted_lossy * 1e3);
    }
    return CC_COLL_OK;
}

cc_coll_status_t resolve_group_auto(Comm &comm, std::vector<GroupTensor> *tensors)
{
    std::vector<AutoTensor> autos;
    const GroupTensor *first = nullptr;
    for (const GroupTensor &t : *tensors)
        if (t.params.method == CC_COLL_METHOD_AUTO) {
            autos.push_back(AutoTensor{t.args.count, t.args.dtype, t.params.has_shape, t.params.rows, t.params.cols});
            if (first == nullptr) first = &t;
        }
    if (first == nullptr) return CC_COLL_OK;
    CallParams p = first->params;
    CC_COLL_TRY(resolve_auto(comm, autos, true, &p));
    for (GroupTensor &t : *tensors)
        if (t.params.method == CC_COLL_METHOD_AUTO) t.params.method = p.method;
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
