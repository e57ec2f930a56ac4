// SKETCH's steps for the algorithms, overloaded on the backend (see
// compressors/topk/topk_backend.hpp): the host forms here, the device forms
// in sketch_device.cc (CUDA builds), their scratch in the executor's state
// slot of SketchDeviceState.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cc_coll.h"
#include "core/error.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "compressors/threshold/threshold_ladder.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/params.hpp"
#include "exec/host_exec.hpp"
#include "exec/host_kernels.hpp"
#include "wire/sketch_support.hpp"
#ifdef CC_COLL_HAVE_CUDA
#include "exec/cuda_exec.hpp"
#endif

namespace cc_coll::detail {

// How SKETCH's allreduce of host buffers sends the support
// (CC_COLL_SKETCH_SUPPORT; methods/sketch.cc writes the word): auto (the
// default word 0), the OR-ed bitmap, or the gap-coded indices gathered.
constexpr std::uint32_t kSketchSupportAuto = 0, kSketchSupportBitmap = 1, kSketchSupportCoded = 2;
// Whether an allreduce of n elements on `ranks` ranks sends the coded
// support (docs/algorithms.md 3.2): as set, or under auto when the ranks'
// messages of the expected size (k = ceil(density n), or the threshold
// ladder's 1 - zero_fraction of n) take at most half the bitmap. Agreed
// values only, so every rank decides alike.
inline bool sketch_support_coded(std::size_t n, int ranks, const CallParams &p)
{
    const std::uint32_t w = p.method_options[CC_COLL_METHOD_SKETCH];
    if (w != kSketchSupportAuto) return w == kSketchSupportCoded;
    if (ranks < 2 || n == 0) return false;
    const double kept = p.sparsifier == CC_COLL_SPARSIFY_THRESHOLD
                            ? (1.0 - p.zero_fraction) * static_cast<double>(n)
                            : static_cast<double>(topk::k_for(p.density, n));
    return ranks * sketch_support::coded_estimate(n, kept) <= 0.5 * static_cast<double>(sketch_support::message_bytes(n));
}

namespace host {
// The elements a rank sends, ascending: the top k = ceil(density n), or the
// elements at or above the threshold ladder's pick.
template <typename W>
void sparsify(const W *g, std::size_t n, const CallParams &p, topk::SelectScratch *scratch,
              std::vector<std::uint32_t> *idx, int threads = 1)
{
    idx->clear();
    if (p.sparsifier == CC_COLL_SPARSIFY_THRESHOLD) {
        threshold::collect<W>(g, n, threshold::pick<W>(g, n, p.zero_fraction), idx);
        return;
    }
    const std::size_t k = topk::k_for(p.density, n);
    idx->resize(k);
    topk::select<W>(g, n, k, idx->data(), scratch, nullptr, threads);
}
}  // namespace host

// The elements to send (top k or the threshold ladder's pick), ascending:
// *idx (backend memory) and their number *kept.
template <typename W>
cc_coll_status_t sketch_sparsify(HostExec &x, const W *g, std::size_t n, const CallParams &p, std::uint32_t **idx,
                                 std::size_t *kept)
{
    Workspace &ws = x.workspace();
    host::sparsify<W>(g, n, p, &ws.select, &ws.indices, x.threads());
    *idx = ws.indices.data();
    *kept = ws.indices.size();
    return CC_COLL_OK;
}
// The support message (wire/sketch_support.hpp) of the kept positions and
// g's non-finite flag into `msg` (sketch_support::buffer_bytes(n)).
template <typename W>
cc_coll_status_t sketch_support_message(HostExec &, const W *g, std::size_t n, const std::uint32_t *idx,
                                        std::size_t kept, unsigned char *msg)
{
    std::memset(msg, 0, sketch_support::buffer_bytes(n));
    sketch::bitmap_set(msg, idx, kept);
    msg[sketch_support::flag_offset(n)] = host::any_nonfinite(g, n) ? 1 : 0;
    return CC_COLL_OK;
}
// From an OR-ed support message: the rows per table for the load factor and
// whether any rank flagged NaN/Inf.
inline cc_coll_status_t sketch_rows(HostExec &, const unsigned char *msg, std::size_t n, double load_factor,
                                    std::uint32_t *m, bool *nonfinite)
{
    *m = sketch::rows_per_table(msg, n, load_factor);
    *nonfinite = msg[sketch_support::flag_offset(n)] != 0;
    return CC_COLL_OK;
}
template <typename W>
cc_coll_status_t sketch_encode(HostExec &, const sketch::Layout &layout, const W *g, const std::uint32_t *idx,
                               std::size_t kept, W *cells)
{
    sketch::encode<W>(layout, g, idx, kept, cells);
    return CC_COLL_OK;
}
template <typename W>
cc_coll_status_t sketch_decode(HostExec &x, const sketch::Layout &layout, const unsigned char *support, W *cells,
                               W *out, sketch::DecodeInfo *info)
{
    *info = sketch::decode<W>(layout, support, cells, out, &x.workspace().decode);
    return CC_COLL_OK;
}

#ifdef CC_COLL_HAVE_CUDA
template <typename W>
cc_coll_status_t sketch_sparsify(CudaExec &x, const W *g, std::size_t n, const CallParams &p, std::uint32_t **idx,
                                 std::size_t *kept);
template <typename W>
cc_coll_status_t sketch_support_message(CudaExec &x, const W *g, std::size_t n, const std::uint32_t *idx,
                                        std::size_t kept, unsigned char *msg);
cc_coll_status_t sketch_rows(CudaExec &x, const unsigned char *msg, std::size_t n, double load_factor,
                             std::uint32_t *m, bool *nonfinite);
template <typename W>
cc_coll_status_t sketch_encode(CudaExec &x, const sketch::Layout &layout, const W *g, const std::uint32_t *idx,
                               std::size_t kept, W *cells);
template <typename W>
cc_coll_status_t sketch_decode(CudaExec &x, const sketch::Layout &layout, const unsigned char *support, W *cells,
                               W *out, sketch::DecodeInfo *info);
#endif

}  // namespace cc_coll::detail
