// Scratch memory a communicator reuses across calls, so a steady stream of
// same-sized calls does not allocate (or fault in fresh pages) every time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "compressors/sketch/count_sketch.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/comm.hpp"

namespace cc_coll::detail {

struct Workspace {
    // HostExec's named buffers (exec/host_exec.hpp: Buf), raw bytes.
    std::vector<unsigned char> slots[16];
    std::vector<float> work_f32;
    std::vector<double> work_f64;
    std::vector<std::uint32_t> indices;
    std::vector<unsigned char> send_bytes;
    std::vector<unsigned char> recv_bytes;
    std::vector<float> other_f32;  // a second buffer (sketch cells)
    std::vector<double> other_f64;
    topk::SelectScratch select;
    sketch::DecodeScratch decode;

    // LOWRANK: one matrix buffer per tensor of a group, and the P and Q
    // buffers every tensor's factors are packed into.
    std::vector<std::vector<float>> mats_f32;
    std::vector<std::vector<double>> mats_f64;
    std::vector<float> p_f32, q_f32;
    std::vector<double> p_f64, q_f64;

    template <typename W>
    W *work(std::size_t n);
    // Matrix buffer i, at least n elements.
    template <typename W>
    W *mat(std::size_t i, std::size_t n);
    template <typename W>
    std::vector<W> &p_buffer();
    template <typename W>
    std::vector<W> &q_buffer();
    template <typename W>
    W *work_other(std::size_t n);
};

template <>
inline float *Workspace::work<float>(std::size_t n)
{
    if (work_f32.size() < n) work_f32.resize(n);
    return work_f32.data();
}

template <>
inline double *Workspace::work<double>(std::size_t n)
{
    if (work_f64.size() < n) work_f64.resize(n);
    return work_f64.data();
}

template <>
inline float *Workspace::work_other<float>(std::size_t n)
{
    if (other_f32.size() < n) other_f32.resize(n);
    return other_f32.data();
}

template <>
inline double *Workspace::work_other<double>(std::size_t n)
{
    if (other_f64.size() < n) other_f64.resize(n);
    return other_f64.data();
}

template <typename W>
inline W *mat_of(std::vector<std::vector<W>> &mats, std::size_t i, std::size_t n)
{
    if (mats.size() <= i) mats.resize(i + 1);
    if (mats[i].size() < n) mats[i].resize(n);
    return mats[i].data();
}

template <>
inline float *Workspace::mat<float>(std::size_t i, std::size_t n) { return mat_of(mats_f32, i, n); }
template <>
inline double *Workspace::mat<double>(std::size_t i, std::size_t n) { return mat_of(mats_f64, i, n); }
template <>
inline std::vector<float> &Workspace::p_buffer<float>() { return p_f32; }
template <>
inline std::vector<double> &Workspace::p_buffer<double>() { return p_f64; }
template <>
inline std::vector<float> &Workspace::q_buffer<float>() { return q_f32; }
template <>
inline std::vector<double> &Workspace::q_buffer<double>() { return q_f64; }

// The collectives' workspace of the communicator, created on first use.
// Only collectives use it, under Comm::collective_mutex.
inline Workspace &workspace_of(Comm &comm)
{
    std::shared_ptr<void> &slot = comm.workspace_slot();
    if (!slot) slot = std::make_shared<Workspace>();
    return *static_cast<Workspace *>(slot.get());
}

// A workspace of its own for one point-to-point call, from the
// communicator's pool: sends and receives on several threads never share
// scratch, and a steady stream of calls reuses the same few workspaces.
class WorkspaceLease {
public:
    explicit WorkspaceLease(Comm &comm) : comm_(comm)
    {
        std::lock_guard<std::mutex> lock(comm.slot_mutex());
        Pool &pool = pool_of(comm);
        if (!pool.free.empty()) {
            ws_ = std::move(pool.free.back());
            pool.free.pop_back();
        }
        if (!ws_) ws_ = std::make_unique<Workspace>();
    }
    ~WorkspaceLease()
    {
        std::lock_guard<std::mutex> lock(comm_.slot_mutex());
        pool_of(comm_).free.push_back(std::move(ws_));
    }
    WorkspaceLease(const WorkspaceLease &) = delete;
    WorkspaceLease &operator=(const WorkspaceLease &) = delete;
    Workspace &operator*() { return *ws_; }

private:
    struct Pool {
        std::vector<std::unique_ptr<Workspace>> free;
    };
    // Under slot_mutex.
    static Pool &pool_of(Comm &comm)
    {
        std::shared_ptr<void> &slot = comm.p2p_scratch_slot();
        if (!slot) slot = std::make_shared<Pool>();
        return *static_cast<Pool *>(slot.get());
    }
    Comm &comm_;
    std::unique_ptr<Workspace> ws_;
};

}  // namespace cc_coll::detail
