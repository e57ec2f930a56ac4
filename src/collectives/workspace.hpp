// Scratch memory a communicator reuses across calls, so a steady stream of
// same-sized calls does not allocate (or fault in fresh pages) every time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compressors/topk/topk_select.hpp"
#include "core/comm.hpp"

namespace cc_coll::detail {

struct Workspace {
    std::vector<float> work_f32;
    std::vector<double> work_f64;
    std::vector<std::uint32_t> indices;
    std::vector<unsigned char> send_bytes;
    std::vector<unsigned char> recv_bytes;
    topk::SelectScratch select;

    template <typename W>
    W *work(std::size_t n);
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

// The communicator's workspace, created on first use.
inline Workspace &workspace_of(Comm &comm)
{
    std::shared_ptr<void> &slot = comm.workspace_slot();
    if (!slot) slot = std::make_shared<Workspace>();
    return *static_cast<Workspace *>(slot.get());
}

}  // namespace cc_coll::detail
