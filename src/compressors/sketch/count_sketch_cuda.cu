#include "compressors/sketch/count_sketch_cuda.hpp"

#include <cstdint>

#include "compressors/sketch/count_sketch_hash.hpp"

namespace cc_coll::detail::sketch::cuda {

namespace {

constexpr unsigned kThreads = 256;  // every kernel's block size: a multiple of 32 (warp_append)
constexpr unsigned kFullMask = 0xffffffffu;

// The peeling steps of count_sketch_hash.hpp on the device: every update
// that another thread may make to the same word at the same time is atomic.
struct AtomicOps {
    __device__ static void add(std::uint32_t *p, std::uint32_t v) { atomicAdd(p, v); }
    __device__ static void bit_xor(std::uint32_t *p, std::uint32_t v) { atomicXor(p, v); }
    __device__ static void bit_or(std::uint32_t *p, std::uint32_t v) { atomicOr(p, v); }
    __device__ static std::uint32_t decrement(std::uint32_t *p) { return atomicSub(p, 1u); }
    __device__ static void min(std::uint32_t *p, std::uint32_t v) { atomicMin(p, v); }
};

// Appends `value` to list[*tail ...] for every lane whose flag is set, one
// atomic per warp. Every lane of the warp must call it.
__device__ inline void warp_append(bool flag, std::uint32_t value, std::uint32_t *list, unsigned long long *tail)
{
    const unsigned ballot = __ballot_sync(kFullMask, flag);
    if (ballot == 0) return;
    const unsigned lane = threadIdx.x & 31u;
    const int leader = __ffs(ballot) - 1;
    unsigned long long first = 0;
    if (static_cast<int>(lane) == leader) first = atomicAdd(tail, static_cast<unsigned long long>(__popc(ballot)));
    first = __shfl_sync(kFullMask, first, leader);
    if (flag) list[first + static_cast<unsigned>(__popc(ballot & ((1u << lane) - 1u)))] = value;
}

// ------------------------------------------------------------------ bitmap

__global__ void bitmap_set_kernel(unsigned int *words, const std::uint32_t *idx, std::size_t k)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < k; p += stride) {
        const std::uint32_t i = idx[p];
        atomicOr(words + (i >> 5), 1u << (i & 31u));
    }
}

// Per thread block, the loads of its words in shared memory: column
// 32q + bit (word q of a block, bit `bit`) at [bit * 32 + q], so that the
// lanes of a warp (consecutive words, distinct q) hit distinct banks.
__global__ void column_loads_kernel(const std::uint8_t *bitmap, std::size_t n, std::uint32_t *loads)
{
    constexpr std::uint32_t kWordsPerBlock = static_cast<std::uint32_t>(kBlock / 32);
    static_assert(kWordsPerBlock == 32, "the shared layout assumes 32 words per block");
    __shared__ std::uint32_t local[kBlock];
    for (unsigned t = threadIdx.x; t < kBlock; t += blockDim.x) local[t] = 0;
    __syncthreads();
    const std::size_t words = (n + 31) / 32;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
        std::uint32_t v = bitmap_word32(bitmap, n, w);
        const std::uint32_t q = static_cast<std::uint32_t>(w % kWordsPerBlock);
        while (v) {
            const std::uint32_t bit = static_cast<std::uint32_t>(__ffs(v) - 1);
            v &= v - 1;
            atomicAdd(local + bit * 32 + q, 1u);
        }
    }
    __syncthreads();
    for (unsigned t = threadIdx.x; t < kBlock; t += blockDim.x)
        if (local[t]) atomicAdd(loads + 32 * (t & 31u) + (t >> 5), local[t]);
}

// ------------------------------------------------------------------ encode

constexpr unsigned kEncodeItems = 8;                           // positions per thread and tile
constexpr unsigned kEncodeTile = kThreads * kEncodeItems;       // positions per tile
constexpr unsigned kEncodeTableBlocks = 256;                    // blocks hashed per tile, at most

// A thread block takes tiles of kEncodeTile consecutive positions. When the
// tile's first and last positions lie within kEncodeTableBlocks blocks (any
// ascending run at density above ~1%), those blocks are hashed once, one per
// thread, into shared memory; positions outside that window (unsorted
// input, sparser runs) hash their block themselves. Position p of a tile
// goes to thread p % kThreads, so idx and x are read along the tile.
template <typename W>
__global__ void __launch_bounds__(kThreads)
    encode_kernel(Hasher hasher, const W *__restrict__ x, const std::uint32_t *__restrict__ idx, std::size_t k,
                  W *__restrict__ sketch)
{
    __shared__ BlockHash table[kEncodeTableBlocks];
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kEncodeTile;
    for (std::size_t tile = static_cast<std::size_t>(blockIdx.x) * kEncodeTile; tile < k; tile += stride) {
        const std::size_t end = k - tile < kEncodeTile ? k : tile + kEncodeTile;
        const std::uint32_t b0 = idx[tile] >> kBlockShift;
        const std::uint32_t b1 = idx[end - 1] >> kBlockShift;
        const std::uint32_t span = (b1 >= b0 && b1 - b0 < kEncodeTableBlocks) ? b1 - b0 + 1 : 0;
        __syncthreads();  // the previous tile's readers are done with the table
        for (std::uint32_t q = threadIdx.x; q < span; q += blockDim.x) table[q] = hasher.block(b0 + q);
        __syncthreads();

        std::uint32_t pos[kEncodeItems];
        W v[kEncodeItems];
#pragma unroll
        for (unsigned r = 0; r < kEncodeItems; ++r) {
            const std::size_t p = tile + threadIdx.x + r * kThreads;
            pos[r] = p < end ? idx[p] : 0;
        }
#pragma unroll
        for (unsigned r = 0; r < kEncodeItems; ++r) {
            const std::size_t p = tile + threadIdx.x + r * kThreads;
            v[r] = p < end ? x[pos[r]] : W(0);
        }
#pragma unroll
        for (unsigned r = 0; r < kEncodeItems; ++r) {
            const std::size_t p = tile + threadIdx.x + r * kThreads;
            if (p >= end) break;
            const std::uint32_t i = pos[r], b = i >> kBlockShift, t = i & kBlockMask;
            const std::uint32_t q = b - b0;  // wraps for b < b0: outside the window
            const BlockHash h = q < span ? table[q] : hasher.block(b);
            atomicAdd(sketch + hasher.cell(h, 0, t), apply_sign(v[r], h.neg[0]));
            atomicAdd(sketch + hasher.cell(h, 1, t), apply_sign(v[r], h.neg[1]));
            atomicAdd(sketch + hasher.cell(h, 2, t), apply_sign(v[r], h.neg[2]));
        }
    }
}

// ------------------------------------------------------------------ decode

// Device counters, in the first bytes of the decoder's scratch; read back
// into DecodeScratch::host.
// kLeft: the number of the last subtraction pass that left subtractions.
enum Counter : unsigned { kTail = 0, kHead = 1, kSupport = 2, kPeeled = 3, kLeft = 4, kCounters = 5 };

// Every support element enters its three cells (one thread per bitmap word:
// 32 elements of one block, hashed once).
template <typename W>
__global__ void count_kernel(PeelState<W> s, const std::uint8_t *bitmap, std::size_t n)
{
    const std::size_t words = (n + 31) / 32;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
        std::uint32_t v = bitmap_word32(bitmap, n, w);
        if (v == 0) continue;
        const BlockHash h = s.hasher.block(static_cast<std::uint32_t>(w >> 5));  // 32 words per block
        while (v) {
            const std::uint32_t bit = static_cast<std::uint32_t>(__ffs(v) - 1);
            v &= v - 1;
            count_element<AtomicOps>(s, h, static_cast<std::uint32_t>(32 * w + bit));
        }
    }
}

// The first worklist: every cell holding one element. Loops advance by
// whole blocks so that every lane reaches warp_append.
template <typename W>
__global__ void queue_pure_kernel(PeelState<W> s, std::size_t cells, std::uint32_t *work, unsigned long long *counters)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t base = static_cast<std::size_t>(blockIdx.x) * blockDim.x; base < cells; base += stride) {
        const std::size_t c = base + threadIdx.x;
        warp_append(c < cells && s.count[c] == 1, static_cast<std::uint32_t>(c), work, counters + kTail);
    }
}

// A round's first pass over work[0 .. size).
template <typename W>
__global__ void claim_kernel(PeelState<W> s, const std::uint32_t *work, std::size_t size)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < size; p += stride)
        claim_cell<AtomicOps>(s, work[p]);
}

// A round's second pass over work[0 .. size): cells that become pure are
// appended to `list` (the worklist, beyond the round's own entries).
template <typename W>
__global__ void peel_kernel(PeelState<W> s, const std::uint32_t *work, std::size_t size, std::uint32_t *list,
                            unsigned long long *counters)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t base = static_cast<std::size_t>(blockIdx.x) * blockDim.x; base < size; base += stride) {
        const std::size_t p = base + threadIdx.x;
        std::uint32_t next[2] = {kNoCell, kNoCell};
        if (p < size) peel_cell<AtomicOps>(s, work[p], next);
        warp_append(next[0] != kNoCell, next[0], list, counters + kTail);
        warp_append(next[1] != kNoCell, next[1], list, counters + kTail);
    }
}

// A subtraction pass over work[0 .. size): counters[kLeft] = pass when
// subtractions are left for another. Loops advance by whole blocks so that
// every lane reaches the vote.
template <typename W>
__global__ void subtract_kernel(PeelState<W> s, const std::uint32_t *work, std::size_t size,
                                unsigned long long pass, unsigned long long *counters)
{
    bool left = false;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t base = static_cast<std::size_t>(blockIdx.x) * blockDim.x; base < size; base += stride) {
        const std::size_t p = base + threadIdx.x;
        if (p < size && subtract_cell(s, work[p])) left = true;
    }
    if (__any_sync(kFullMask, left) && (threadIdx.x & 31u) == 0) counters[kLeft] = pass;
}

// A bid pass over work[0 .. size).
template <typename W>
__global__ void bid_kernel(PeelState<W> s, const std::uint32_t *work, std::size_t size)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < size; p += stride)
        bid_cell<AtomicOps>(s, work[p]);
}

// Rounds of at most kSmallRound entries cost more in launches and host
// round trips than in work: one thread block runs them, with barriers
// between the passes, from worklist entry `first` until the worklist is
// exhausted or a round grows beyond kLargeRound (back to the grid-wide
// kernels). It leaves the next round's start in counters[kHead].
constexpr std::size_t kSmallRound = 4096;
constexpr std::size_t kLargeRound = 4 * kSmallRound;
constexpr unsigned kSmallRoundThreads = 1024;

template <typename W>
__global__ void __launch_bounds__(kSmallRoundThreads)
    small_rounds_kernel(PeelState<W> s, std::uint32_t *work, unsigned long long first, unsigned long long *counters)
{
    __shared__ unsigned long long head, tail;
    if (threadIdx.x == 0) {
        head = first;
        tail = atomicAdd(counters + kTail, 0ull);
    }
    __syncthreads();
    for (;;) {
        const unsigned long long h = head, t = tail;  // the same in every thread
        if (h >= t || t - h > kLargeRound) break;
        for (unsigned long long p = h + threadIdx.x; p < t; p += blockDim.x) claim_cell<AtomicOps>(s, work[p]);
        __syncthreads();
        for (unsigned long long base = h; base < t; base += blockDim.x) {
            const unsigned long long p = base + threadIdx.x;
            std::uint32_t next[2] = {kNoCell, kNoCell};
            if (p < t) peel_cell<AtomicOps>(s, work[p], next);
            warp_append(next[0] != kNoCell, next[0], work, counters + kTail);
            warp_append(next[1] != kNoCell, next[1], work, counters + kTail);
        }
        __syncthreads();  // every append and bid done
        for (;;) {
            int left = 0;
            for (unsigned long long p = h + threadIdx.x; p < t; p += blockDim.x)
                if (subtract_cell(s, work[p])) left = 1;
            if (!__syncthreads_or(left)) break;  // the same in every thread
            for (unsigned long long p = h + threadIdx.x; p < t; p += blockDim.x) bid_cell<AtomicOps>(s, work[p]);
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            head = t;
            tail = atomicAdd(counters + kTail, 0ull);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) counters[kHead] = head;
}

// out[i] for every i < n: 0 off the support, the estimate at support
// positions that did not peel (0 when the sketch has no cells), peeled
// values left as peel_cell wrote them. Counts the support and the peeled
// elements. Loops advance by whole blocks (of a multiple of 32 threads), so
// lane 0 of each warp sees each bitmap word first and the warp reduction
// at the end has every lane.
template <typename W>
__global__ void output_kernel(PeelState<W> s, const std::uint8_t *bitmap, std::size_t n, bool have_cells,
                              unsigned long long *counters)
{
    std::uint32_t support = 0, peeled = 0;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t base = static_cast<std::size_t>(blockIdx.x) * blockDim.x; base < n; base += stride) {
        const std::size_t i = base + threadIdx.x;
        if (i >= n) continue;
        const std::uint32_t sw = bitmap_word32(bitmap, n, i >> 5);
        const std::uint32_t dw = s.decoded[i >> 5];
        if ((i & 31u) == 0) {
            support += static_cast<std::uint32_t>(__popc(sw));
            peeled += static_cast<std::uint32_t>(__popc(sw & dw));
        }
        const std::uint32_t bit = 1u << (i & 31u);
        if (!(sw & bit))
            s.out[i] = W(0);
        else if (!(dw & bit))
            s.out[i] = have_cells ? estimate_element(s, i) : W(0);
    }
    support = __reduce_add_sync(kFullMask, support);
    peeled = __reduce_add_sync(kFullMask, peeled);
    if ((threadIdx.x & 31u) == 0) {
        if (support) atomicAdd(counters + kSupport, static_cast<unsigned long long>(support));
        if (peeled) atomicAdd(counters + kPeeled, static_cast<unsigned long long>(peeled));
    }
}

constexpr std::size_t kAlign = 256;
inline std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Reads counters[0 .. count) into host[0 .. count) and waits for them.
gpu::Result read_counters(const unsigned long long *counters, unsigned long long *host, std::size_t count,
                          cudaStream_t stream)
{
    CC_COLL_CUDA_TRY(cudaMemcpyAsync(host, counters, count * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
    CC_COLL_CUDA_TRY(cudaStreamSynchronize(stream));
    return gpu::Result::success();
}

}  // namespace

gpu::Result bitmap_set(std::uint8_t *bitmap, const std::uint32_t *idx, std::size_t k, cudaStream_t stream)
{
    if (k == 0) return gpu::Result::success();
    if ((reinterpret_cast<std::uintptr_t>(bitmap) & 3u) != 0)
        return gpu::Result{"sketch::cuda::bitmap_set (bitmap not 4-byte aligned)", "CUDA",
                            static_cast<int>(cudaErrorMisalignedAddress), cudaGetErrorString(cudaErrorMisalignedAddress)};
    bitmap_set_kernel<<<gpu::grid_for(k, kThreads), kThreads, 0, stream>>>(reinterpret_cast<unsigned int *>(bitmap),
                                                                          idx, k);
    return gpu::launch_result("sketch::cuda::bitmap_set_kernel");
}

gpu::Result column_loads(const std::uint8_t *bitmap, std::size_t n, std::uint32_t *loads, cudaStream_t stream)
{
    CC_COLL_CUDA_TRY(cudaMemsetAsync(loads, 0, kBlock * sizeof(std::uint32_t), stream));
    if (n == 0) return gpu::Result::success();
    // Few blocks: each ends with kBlock global atomics.
    column_loads_kernel<<<gpu::grid_for((n + 31) / 32, kThreads, 512), kThreads, 0, stream>>>(bitmap, n, loads);
    return gpu::launch_result("sketch::cuda::column_loads_kernel");
}

gpu::Result rows_per_table(const std::uint8_t *bitmap, std::size_t n, double load_factor, std::uint32_t *loads,
                           std::uint32_t *host_loads, std::uint32_t *m, cudaStream_t stream)
{
    CC_COLL_GPU_TRY(column_loads(bitmap, n, loads, stream));
    CC_COLL_CUDA_TRY(cudaMemcpyAsync(host_loads, loads, kBlock * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream));
    CC_COLL_CUDA_TRY(cudaStreamSynchronize(stream));
    *m = rows_for_loads(host_loads, load_factor);
    return gpu::Result::success();
}

template <typename W>
gpu::Result encode(const Layout &layout, const W *x, const std::uint32_t *idx, std::size_t k, W *sketch,
                   cudaStream_t stream)
{
    if (k == 0 || layout.m == 0) return gpu::Result::success();  // nothing to add, or no cells
    encode_kernel<W><<<gpu::grid_for(k, kEncodeTile), kThreads, 0, stream>>>(Hasher(layout.seed, layout.m), x, idx,
                                                                            k, sketch);
    return gpu::launch_result("sketch::cuda::encode_kernel");
}

// Scratch: the counters, then per cell its count, key, owner and worklist
// slot (each cell enters the worklist at most once: pure at the start, or
// when its count drops from 2 to 1), then the decoded bits (a 32-bit word
// per 32 elements).
template <typename W>
gpu::Result decode(const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out, DecodeScratch *scratch,
                   DecodeInfo *info, cudaStream_t stream)
{
    *info = DecodeInfo{};
    const std::size_t n = layout.n;
    if (n == 0) return gpu::Result::success();
    const std::size_t cells = layout.m == 0 ? 0 : layout.cells();
    const std::size_t words = (n + 31) / 32;
    const std::size_t counters_at = 0;
    const std::size_t count_at = counters_at + aligned(kCounters * sizeof(unsigned long long));
    const std::size_t key_at = count_at + aligned(cells * sizeof(std::uint32_t));
    const std::size_t owner_at = key_at + aligned(cells * sizeof(std::uint32_t));
    const std::size_t work_at = owner_at + aligned(cells * sizeof(std::uint32_t));
    const std::size_t decoded_at = work_at + aligned(cells * sizeof(std::uint32_t));
    const std::size_t total = decoded_at + aligned(words * sizeof(std::uint32_t));
    CC_COLL_GPU_TRY(scratch->temp.reserve(total));
    CC_COLL_GPU_TRY(scratch->host.reserve(kCounters));
    unsigned char *temp = scratch->temp.data();
    unsigned long long *host = scratch->host.data();
    auto *counters = reinterpret_cast<unsigned long long *>(temp + counters_at);
    auto *work = reinterpret_cast<std::uint32_t *>(temp + work_at);

    PeelState<W> s;
    s.hasher = Hasher(layout.seed, layout.m);
    s.value = sketch;
    s.count = reinterpret_cast<std::uint32_t *>(temp + count_at);
    s.key = reinterpret_cast<std::uint32_t *>(temp + key_at);
    s.owner = reinterpret_cast<std::uint32_t *>(temp + owner_at);
    s.decoded = reinterpret_cast<std::uint32_t *>(temp + decoded_at);
    s.out = out;

    // Counters, counts and keys are contiguous: one memset up to the owners
    // (kNoCell: all bytes 0xff).
    CC_COLL_CUDA_TRY(cudaMemsetAsync(temp, 0, owner_at, stream));
    CC_COLL_CUDA_TRY(cudaMemsetAsync(s.owner, 0xff, cells * sizeof(std::uint32_t), stream));
    CC_COLL_CUDA_TRY(cudaMemsetAsync(s.decoded, 0, words * sizeof(std::uint32_t), stream));

    if (cells > 0) {
        count_kernel<W><<<gpu::grid_for(words, kThreads), kThreads, 0, stream>>>(s, bitmap, n);
        CC_COLL_GPU_TRY(gpu::launch_result("sketch::cuda::count_kernel"));
        queue_pure_kernel<W><<<gpu::grid_for(cells, kThreads), kThreads, 0, stream>>>(s, cells, work, counters);
        CC_COLL_GPU_TRY(gpu::launch_result("sketch::cuda::queue_pure_kernel"));
        CC_COLL_GPU_TRY(read_counters(counters, host, kCounters, stream));
        unsigned long long head = 0, tail = host[kTail], pass = 0;
        unsigned batch = 4;  // subtraction passes launched at once (see below)
        while (head < tail) {
            const std::size_t size = static_cast<std::size_t>(tail - head);
            if (size <= kSmallRound) {
                small_rounds_kernel<W><<<1, kSmallRoundThreads, 0, stream>>>(s, work, head, counters);
                CC_COLL_GPU_TRY(gpu::launch_result("sketch::cuda::small_rounds_kernel"));
                CC_COLL_GPU_TRY(read_counters(counters, host, kCounters, stream));
                head = host[kHead];
                tail = host[kTail];
                continue;
            }
            const unsigned grid = gpu::grid_for(size, kThreads);
            claim_kernel<W><<<grid, kThreads, 0, stream>>>(s, work + head, size);
            CC_COLL_GPU_TRY(gpu::launch_result("sketch::cuda::claim_kernel"));
            peel_kernel<W><<<grid, kThreads, 0, stream>>>(s, work + head, size, work, counters);
            CC_COLL_GPU_TRY(gpu::launch_result("sketch::cuda::peel_kernel"));
            // Subtraction passes until one leaves none (a bid pass between
            // two). A round needs as many as the most subtractions one of
            // its cells receives, typically 4 to 7 in the large rounds and
            // fewer as they shrink: the host launches as many as the last
            // large round needed before it reads whether any are left (a
            // pass with none left does nothing), then one at a time.
            const unsigned long long first_pass = pass + 1;
            for (unsigned launch = batch;; launch = 1) {
                for (unsigned b = 0; b < launch; ++b) {
                    if (pass >= first_pass) {
                        bid_kernel<W><<<grid, kThreads, 0, stream>>>(s, work + head, size);
                        CC_COLL_GPU_TRY(gpu::launch_result("sketch::cuda::bid_kernel"));
                    }
                    subtract_kernel<W><<<grid, kThreads, 0, stream>>>(s, work + head, size, ++pass, counters);
                    CC_COLL_GPU_TRY(gpu::launch_result("sketch::cuda::subtract_kernel"));
                }
                CC_COLL_GPU_TRY(read_counters(counters, host, kCounters, stream));
                if (host[kLeft] != pass) break;  // the last pass left none
            }
            // Passes needed: up to the one after the last that left some.
            batch = host[kLeft] >= first_pass ? static_cast<unsigned>(host[kLeft] - first_pass) + 2 : 1;
            head = tail;
            tail = host[kTail];
        }
    }

    output_kernel<W><<<gpu::grid_for(n, kThreads), kThreads, 0, stream>>>(s, bitmap, n, cells > 0, counters);
    CC_COLL_GPU_TRY(gpu::launch_result("sketch::cuda::output_kernel"));
    CC_COLL_GPU_TRY(read_counters(counters, host, kCounters, stream));
    info->support = static_cast<std::size_t>(host[kSupport]);
    info->peeled = static_cast<std::size_t>(host[kPeeled]);
    info->estimated = info->support - info->peeled;
    return gpu::Result::success();
}

template gpu::Result encode<float>(const Layout &, const float *, const std::uint32_t *, std::size_t, float *,
                                   cudaStream_t);
template gpu::Result encode<double>(const Layout &, const double *, const std::uint32_t *, std::size_t, double *,
                                    cudaStream_t);
template gpu::Result decode<float>(const Layout &, const std::uint8_t *, float *, float *, DecodeScratch *,
                                   DecodeInfo *, cudaStream_t);
template gpu::Result decode<double>(const Layout &, const std::uint8_t *, double *, double *, DecodeScratch *,
                                    DecodeInfo *, cudaStream_t);

}  // namespace cc_coll::detail::sketch::cuda
