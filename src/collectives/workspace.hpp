// Scratch memory a communicator reuses across calls, so a steady stream of
// same-sized calls does not allocate (or fault in fresh pages) every time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compressors/sketch/count_sketch.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/comm.hpp"

namespace cc_coll::detail {

struct Workspace {
    std::vector<float> work_f32;
    std::vector<double> work_f64;
    std::vector<std::uint32_t> indices;
    std::vector<unsigned char> send_bytes;
    std::vector<unsigned char> recv_bytes;
    std::vector<float> other_f32;  // a second buffer (sketch cells)
    std::vector<double> other_f64;
    topk::SelectScratch select;
    sketch::DecodeScratch decode;

    template <typename W>
    W *work(std::size_t n);
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

// The communicator's workspace, created on first use.
inline Workspace &workspace_of(Comm &comm)
{
    std::shared_ptr<void> &slot = comm.workspace_slot();
    if (!slot) slot = std::make_shared<Workspace>();
    return *static_cast<Workspace *>(slot.get());
}

}  // namespace cc_coll::detail
