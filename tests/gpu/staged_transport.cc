// The staged device transport's pipelines with real ranks and a host copy
// engine standing in for the GPU's: "device" buffers are host memory and
// copies are memcpy, done at once (eager), only when waited for (lazy), or
// only when waited for with garbage written wherever the data is not yet
// or no longer valid (hostile). The copier also reports every misuse of the
// slot protocol: a slot refilled before its copy up finished, a slot sent up
// before its copy down landed, a copy outside its slot. Results must be bit
// for bit those of MPI_Allreduce / allreduce_sum / MPI_Allgather on host
// buffers. Also checks resolve_device_transport on this MPI and, in builds
// with CUDA, DeviceTransport itself: on device buffers where there is a GPU,
// its CUDA failure report where there is none.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>
#ifdef CC_COLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "cc_coll.h"
#include "check.h"
#include "core/config.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "transport/device_transport.hpp"
#include "transport/mpi_transport.hpp"

using namespace cc_coll::detail;

namespace {

int g_size = 1;

#define EXPECT(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            char msg_[512];                                                      \
            std::snprintf(msg_, sizeof msg_, __VA_ARGS__);                       \
            die("%s", msg_, 0);                                                  \
        }                                                                        \
    } while (0)

constexpr unsigned char kGuard = 0x5a;
constexpr std::size_t kGuardBytes = 64;

enum class CopyMode { Eager, Lazy, Hostile };

const char *mode_name(CopyMode m)
{
    return m == CopyMode::Eager ? "eager" : m == CopyMode::Lazy ? "lazy" : "hostile";
}

// Bytes no correct result contains: NaN in every float format, and a
// pattern an OR or a gather would not produce from the tests' data.
void scribble(void *p, std::size_t bytes) { std::memset(p, 0xff, bytes); }

class HostCopier final : public StagingCopier {
public:
    // `host`/`host_bytes`: the staging memory; `slot_stride`: the bytes of
    // one slot (every host range of slot s must lie in slot s's stride).
    HostCopier(CopyMode mode, const unsigned char *host, std::size_t host_bytes, std::size_t slot_stride)
        : mode_(mode), host_(host), host_bytes_(host_bytes), stride_(slot_stride)
    {
    }

    // Makes the n-th copier call from now (0: the next) fail, as a CUDA
    // failure would.
    void fail_at(long n) { fail_at_ = ops_ + n; }
    long ops() const { return ops_; }
    int pending() const
    {
        int n = 0;
        for (int s = 0; s < kStagingSlots; ++s) n += down_[s].live + up_[s].live;
        return n;
    }
    const std::string &violations() const { return violations_; }
    // The calls in order: 'h' to_host, 'd' to_device, 'H' wait_to_host,
    // 'D' wait_to_device, 'A' wait_all, each followed by its slot digit.
    const std::string &log() const { return log_; }

    cc_coll_status_t to_host(void *dst, const void *src, std::size_t bytes, int slot) override
    {
        if (injected()) return fail(CC_COLL_ERR_CUDA, "injected copy failure (to_host)");
        record('h', slot);
        check_slot(slot, dst, bytes, "to_host");
        if (slot < 0 || slot >= kStagingSlots) return CC_COLL_OK;
        if (down_[slot].live) violation("to_host on slot %d while its previous copy down was not waited for", slot);
        if (up_[slot].live) violation("to_host on slot %d while its copy up was still reading it", slot);
        start(down_[slot], dst, src, bytes);
        return CC_COLL_OK;
    }

    cc_coll_status_t to_device(void *dst, const void *src, std::size_t bytes, int slot) override
    {
        if (injected()) return fail(CC_COLL_ERR_CUDA, "injected copy failure (to_device)");
        record('d', slot);
        check_slot(slot, src, bytes, "to_device");
        if (slot < 0 || slot >= kStagingSlots) return CC_COLL_OK;
        if (down_[slot].live) violation("to_device from slot %d before its copy down was waited for", slot);
        if (up_[slot].live) violation("to_device on slot %d while its previous copy up was not waited for", slot);
        start(up_[slot], dst, src, bytes);
        return CC_COLL_OK;
    }

    cc_coll_status_t wait_to_host(int slot) override
    {
        if (injected()) return fail(CC_COLL_ERR_CUDA, "injected copy failure (wait_to_host)");
        record('H', slot);
        if (slot >= 0 && slot < kStagingSlots) finish(down_[slot], false);
        return CC_COLL_OK;
    }

    cc_coll_status_t wait_to_device(int slot) override
    {
        if (injected()) return fail(CC_COLL_ERR_CUDA, "injected copy failure (wait_to_device)");
        record('D', slot);
        if (slot >= 0 && slot < kStagingSlots) finish(up_[slot], true);
        return CC_COLL_OK;
    }

    cc_coll_status_t wait_all() override
    {
        // Drains even when this call is the injected failure, as a real
        // engine's failed wait still leaves no copy running.
        const bool failing = injected();
        record('A', 0);
        for (int s = 0; s < kStagingSlots; ++s) finish(down_[s], false);
        for (int s = 0; s < kStagingSlots; ++s) finish(up_[s], true);
        return failing ? fail(CC_COLL_ERR_CUDA, "injected copy failure (wait_all)") : CC_COLL_OK;
    }

private:
    struct Copy {
        bool live = false;
        void *dst = nullptr;
        const void *src = nullptr;
        std::size_t bytes = 0;
    };

    bool injected() { return ops_++ == fail_at_; }

    void record(char kind, int slot)
    {
        log_ += kind;
        log_ += static_cast<char>('0' + slot);
    }

    template <typename... Args>
    void violation(const char *fmt, Args... args)
    {
        char line[256];
        std::snprintf(line, sizeof line, fmt, args...);
        violations_ += line;
        violations_ += "; ";
    }

    void check_slot(int slot, const void *p, std::size_t bytes, const char *what)
    {
        if (slot < 0 || slot >= kStagingSlots) {
            violation("%s: slot %d out of range", what, slot);
            return;
        }
        const auto *b = static_cast<const unsigned char *>(p);
        const std::size_t lo = static_cast<std::size_t>(slot) * stride_;
        const std::size_t hi = stride_ == 0 ? host_bytes_ : lo + stride_;
        if (b < host_ + lo || b + bytes > host_ + hi || b + bytes > host_ + host_bytes_)
            violation("%s: host range [%td, %td) outside slot %d [%zu, %zu)", what, b - host_, b + bytes - host_,
                      slot, lo, hi);
    }

    void start(Copy &c, void *dst, const void *src, std::size_t bytes)
    {
        if (mode_ == CopyMode::Eager) {
            std::memcpy(dst, src, bytes);
            return;
        }
        c = Copy{true, dst, src, bytes};
        // The destination holds nothing valid until the wait.
        if (mode_ == CopyMode::Hostile) scribble(dst, bytes);
    }

    void finish(Copy &c, bool up)
    {
        if (!c.live) return;
        std::memcpy(c.dst, c.src, c.bytes);
        c.live = false;
        // A slot that went up holds nothing the pipeline may use again.
        if (up && mode_ == CopyMode::Hostile) scribble(const_cast<void *>(c.src), c.bytes);
    }

    CopyMode mode_;
    const unsigned char *host_;
    std::size_t host_bytes_;
    std::size_t stride_;
    Copy down_[kStagingSlots];
    Copy up_[kStagingSlots];
    long ops_ = 0;
    long fail_at_ = -1;
    std::string violations_;
    std::string log_;
};

// Staging memory with guard bytes after it.
struct Staging {
    std::vector<unsigned char> mem;
    std::size_t bytes;
    explicit Staging(std::size_t n) : mem(n + kGuardBytes, kGuard), bytes(n) {}
    unsigned char *data() { return mem.data(); }
    bool guard_intact() const
    {
        for (std::size_t i = bytes; i < mem.size(); ++i)
            if (mem[i] != kGuard) return false;
        return true;
    }
};

const cc_coll_dtype_t kDtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
const CopyMode kModes[] = {CopyMode::Eager, CopyMode::Lazy, CopyMode::Hostile};

// Rank r's element i: an integer in [-30, 30], so a sum over at most 4
// ranks is exact in every format (BF16 holds integers up to 256 exactly).
int int_value(int rank, std::size_t i) { return static_cast<int>((rank * 7919 + i * 31 + i / 7) % 61) - 30; }

// Rank r's element i for the inexact tests: a fraction spread over a few
// binades, so sums round.
double frac_value(int rank, std::size_t i)
{
    std::uint64_t z = (static_cast<std::uint64_t>(rank) << 40) ^ (i * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    z ^= z >> 29;
    return (static_cast<double>(z >> 11) / 9007199254740992.0 - 0.5) * (1 << (z % 7));
}

std::vector<unsigned char> make_data(cc_coll_dtype_t dtype, std::size_t count, int rank, bool exact)
{
    std::vector<unsigned char> v(count * dtype_size(dtype) + kGuardBytes, kGuard);
    for (std::size_t i = 0; i < count; ++i)
        store_element<double>(v.data(), i, dtype, exact ? int_value(rank, i) : frac_value(rank, i));
    return v;
}

bool same_bytes(const std::vector<unsigned char> &a, const std::vector<unsigned char> &b, std::size_t n)
{
    return a.size() >= n && b.size() >= n && std::memcmp(a.data(), b.data(), n) == 0;
}

std::size_t first_difference(const std::vector<unsigned char> &a, const std::vector<unsigned char> &b,
                             std::size_t n, std::size_t esize)
{
    for (std::size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) return i / esize;
    return n / esize;
}

bool guard_intact(const std::vector<unsigned char> &v, std::size_t from)
{
    for (std::size_t i = from; i < v.size(); ++i)
        if (v[i] != kGuard) return false;
    return true;
}

// The whole-buffer reference: MPI_Allreduce itself for F32/F64, the
// library's allreduce_sum (its user-defined op) for F16/BF16.
std::vector<unsigned char> whole_reference(const std::vector<unsigned char> &send, std::size_t count,
                                           cc_coll_dtype_t dtype)
{
    std::vector<unsigned char> out(send);
    if (count == 0) return out;
    if (dtype == CC_COLL_F32 || dtype == CC_COLL_F64) {
        const int rc = MPI_Allreduce(MPI_IN_PLACE, out.data(), static_cast<int>(count),
                                     dtype == CC_COLL_F32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        EXPECT(rc == MPI_SUCCESS, "reference MPI_Allreduce failed");
    } else {
        CHECK_CC(allreduce_sum(out.data(), out.data(), count, dtype, MPI_COMM_WORLD));
    }
    return out;
}

// The chunked reference: allreduce_sum in place on host memory, chunk by
// chunk, with the pipeline's chunk size.
std::vector<unsigned char> chunked_reference(const std::vector<unsigned char> &send, std::size_t count,
                                             cc_coll_dtype_t dtype, std::size_t chunk_bytes)
{
    std::vector<unsigned char> out(send);
    const std::size_t esize = dtype_size(dtype);
    const std::size_t chunk = chunk_bytes / esize;
    for (std::size_t at = 0; at < count; at += chunk) {
        unsigned char *p = out.data() + at * esize;
        const std::size_t n = count - at < chunk ? count - at : chunk;
        CHECK_CC(allreduce_sum(p, p, n, dtype, MPI_COMM_WORLD));
    }
    return out;
}

// One staged sum with a fresh copier; checks the slot protocol, the guards
// and that nothing is left in flight, and returns recv.
std::vector<unsigned char> run_staged(CopyMode mode, cc_coll_dtype_t dtype, std::size_t chunk_bytes,
                                      const std::vector<unsigned char> &data, std::size_t count, bool in_place,
                                      std::string *log = nullptr)
{
    const std::size_t esize = dtype_size(dtype);
    const std::size_t bytes = count * esize;
    Staging host(kStagingSlots * chunk_bytes);
    HostCopier copier(mode, host.data(), host.bytes, (chunk_bytes / esize) * esize);
    std::vector<unsigned char> send(data);
    std::vector<unsigned char> recv(in_place ? std::vector<unsigned char>() : data);
    if (!in_place) scribble(recv.data(), bytes);  // what was in recv must not matter
    void *out = in_place ? send.data() : recv.data();
    CHECK_CC(staged_allreduce_sum(copier, host.data(), chunk_bytes, send.data(), out, count, dtype, MPI_COMM_WORLD));
    EXPECT(copier.violations().empty(), "slot protocol (%s copier): %s", mode_name(mode),
           copier.violations().c_str());
    EXPECT(copier.pending() == 0, "copies still pending after return (%s copier)", mode_name(mode));
    EXPECT(host.guard_intact(), "staging memory overrun (chunk %zu bytes)", chunk_bytes);
    if (!in_place) {
        EXPECT(same_bytes(send, data, bytes), "out of place: send was modified");
        EXPECT(guard_intact(recv, bytes), "recv overrun");
    } else {
        EXPECT(guard_intact(send, bytes), "in place: buffer overrun");
    }
    if (log != nullptr) *log = copier.log();
    return in_place ? send : recv;
}

std::vector<std::size_t> counts_for(std::size_t chunk)
{
    std::vector<std::size_t> c = {0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 3 * chunk - 1, 3 * chunk,
                                  3 * chunk + 1, 4 * chunk + 2, 11 * chunk + 3, 1000};
    std::vector<std::size_t> out;
    for (std::size_t n : c)
        if (n <= 20000 && (n != chunk - 1 || chunk > 1)) out.push_back(n);
    return out;
}

// Chunk sizes in bytes for a dtype: one element, several, and sizes that
// are not whole elements.
std::vector<std::size_t> chunks_for(cc_coll_dtype_t dtype)
{
    const std::size_t e = dtype_size(dtype);
    return {e, e + e - 1, 3 * e, 5 * e + 1, 16 * e + e / 2, 64 * e - 1, 1000};
}

void test_exact_sums()
{
    g_test = "exact sums vs MPI_Allreduce";
    for (cc_coll_dtype_t dtype : kDtypes) {
        const std::size_t esize = dtype_size(dtype);
        for (std::size_t chunk_bytes : chunks_for(dtype)) {
            const std::size_t chunk = chunk_bytes / esize;
            for (std::size_t count : counts_for(chunk)) {
                const std::vector<unsigned char> data = make_data(dtype, count, g_rank, true);
                const std::vector<unsigned char> want = whole_reference(data, count, dtype);
                // Each element is the exact integer sum, independently of MPI.
                for (std::size_t i = 0; i < count; ++i) {
                    long sum = 0;
                    for (int r = 0; r < g_size; ++r) sum += int_value(r, i);
                    EXPECT(load_element<double>(want.data(), i, dtype) == static_cast<double>(sum),
                           "%s reference element %zu is not the exact sum %ld", dtype_name(dtype), i, sum);
                }
                for (CopyMode mode : kModes) {
                    for (bool in_place : {false, true}) {
                        const std::vector<unsigned char> got =
                            run_staged(mode, dtype, chunk_bytes, data, count, in_place);
                        EXPECT(same_bytes(got, want, count * esize),
                               "%s count %zu chunk %zu bytes %s %s: element %zu differs from MPI_Allreduce",
                               dtype_name(dtype), count, chunk_bytes, mode_name(mode),
                               in_place ? "in place" : "out of place",
                               first_difference(got, want, count * esize, esize));
                    }
                }
            }
        }
    }
}

// Inexact data: bit-identical to allreduce_sum chunk by chunk on the host
// for every rank count, and to one whole-buffer sum with at most 2 ranks.
void test_rounded_sums()
{
    g_test = "rounded sums vs chunked allreduce_sum";
    for (cc_coll_dtype_t dtype : kDtypes) {
        const std::size_t esize = dtype_size(dtype);
        for (std::size_t chunk_bytes : {esize * 3 + 1, std::size_t{256}, std::size_t{4096}}) {
            for (std::size_t count : {std::size_t{1}, std::size_t{777}, std::size_t{5000}}) {
                const std::vector<unsigned char> data = make_data(dtype, count, g_rank, false);
                const std::vector<unsigned char> chunked = chunked_reference(data, count, dtype, chunk_bytes);
                const std::vector<unsigned char> whole = whole_reference(data, count, dtype);
                for (CopyMode mode : {CopyMode::Eager, CopyMode::Hostile}) {
                    for (bool in_place : {false, true}) {
                        const std::vector<unsigned char> got =
                            run_staged(mode, dtype, chunk_bytes, data, count, in_place);
                        EXPECT(same_bytes(got, chunked, count * esize),
                               "%s count %zu chunk %zu bytes %s: element %zu differs from chunked allreduce_sum",
                               dtype_name(dtype), count, chunk_bytes, mode_name(mode),
                               first_difference(got, chunked, count * esize, esize));
                        if (g_size <= 2)
                            EXPECT(same_bytes(got, whole, count * esize),
                                   "%s count %zu chunk %zu bytes, %d ranks: element %zu differs from one "
                                   "whole-buffer sum",
                                   dtype_name(dtype), count, chunk_bytes, g_size,
                                   first_difference(got, whole, count * esize, esize));
                    }
                }
            }
        }
    }
}

// The copy order overlaps: chunk c+1's copy down starts before chunk c is
// waited for, and a slot is refilled only after waiting for its copy up.
void test_overlap_order()
{
    g_test = "pipeline order";
    const std::size_t count = 10;
    const std::vector<unsigned char> data = make_data(CC_COLL_F32, count, g_rank, true);
    std::string log;
    run_staged(CopyMode::Lazy, CC_COLL_F32, 2 * sizeof(float), data, count, false, &log);
    // 5 chunks over slots 0 1 2 0 1.
    const std::string want = "h0"
                             "D1h1H0d0"
                             "D2h2H1d1"
                             "D0h0H2d2"
                             "D1h1H0d0"
                             "H1d1"
                             "A0";
    EXPECT(log == want, "copier calls %s, expected %s", log.c_str(), want.c_str());
}

void test_bad_arguments()
{
    g_test = "bad arguments";
    Staging host(64);
    HostCopier copier(CopyMode::Eager, host.data(), host.bytes, 0);
    float x[4] = {1, 2, 3, 4};
    clear_error();
    EXPECT(staged_allreduce_sum(copier, host.data(), 7, x, x, 4, CC_COLL_F64, MPI_COMM_WORLD) ==
               CC_COLL_ERR_INVALID_ARG,
           "a chunk smaller than one element must be CC_COLL_ERR_INVALID_ARG");
    EXPECT(std::strstr(last_error(), "7 bytes") != nullptr, "message names the chunk: %s", last_error());
    EXPECT(staged_allreduce_sum(copier, host.data(), 16, x, x, 4, static_cast<cc_coll_dtype_t>(99),
                                MPI_COMM_WORLD) == CC_COLL_ERR_INVALID_DTYPE,
           "an unknown dtype must be CC_COLL_ERR_INVALID_DTYPE");
    EXPECT(copier.ops() == 0, "a rejected call must not copy");
}

// A copier failure at any point of the pipeline comes back as is, with
// every copy drained. Every rank fails at the same call, so the ranks' MPI
// calls stay matched.
void test_copy_failures()
{
    g_test = "copy failures";
    const cc_coll_dtype_t dtype = CC_COLL_F32;
    const std::size_t chunk_bytes = 3 * sizeof(float);
    const std::size_t count = 14;  // 5 chunks
    const std::vector<unsigned char> data = make_data(dtype, count, g_rank, true);
    long total = 0;
    {
        Staging host(kStagingSlots * chunk_bytes);
        HostCopier copier(CopyMode::Lazy, host.data(), host.bytes, chunk_bytes);
        std::vector<unsigned char> buf(data);
        CHECK_CC(staged_allreduce_sum(copier, host.data(), chunk_bytes, buf.data(), buf.data(), count, dtype,
                                      MPI_COMM_WORLD));
        total = copier.ops();
    }
    for (long k = 0; k < total; ++k) {
        for (CopyMode mode : {CopyMode::Lazy, CopyMode::Hostile}) {
            Staging host(kStagingSlots * chunk_bytes);
            HostCopier copier(mode, host.data(), host.bytes, chunk_bytes);
            copier.fail_at(k);
            std::vector<unsigned char> buf(data);
            const cc_coll_status_t st = staged_allreduce_sum(copier, host.data(), chunk_bytes, buf.data(),
                                                             buf.data(), count, dtype, MPI_COMM_WORLD);
            EXPECT(st == CC_COLL_ERR_CUDA, "failure injected at call %ld returned %d", k, static_cast<int>(st));
            EXPECT(std::strstr(last_error(), "injected") != nullptr, "message: %s", last_error());
            EXPECT(copier.pending() == 0, "failure at call %ld left copies pending", k);
            EXPECT(copier.violations().empty(), "slot protocol after failure at %ld: %s", k,
                   copier.violations().c_str());
            EXPECT(copier.log().size() >= 2 && copier.log().compare(copier.log().size() - 2, 2, "A0") == 0,
                   "failure at call %ld: no wait_all at the end (%s)", k, copier.log().c_str());
        }
    }
}

// An MPI failure (here an invalid communicator, reported through
// MPI_ERRORS_RETURN) is CC_COLL_ERR_MPI, after waiting for the copies.
void test_mpi_failure()
{
    g_test = "MPI failure";
    MPI_Errhandler old;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &old);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const std::size_t chunk_bytes = 2 * sizeof(double);
    Staging host(kStagingSlots * chunk_bytes);
    HostCopier copier(CopyMode::Lazy, host.data(), host.bytes, chunk_bytes);
    std::vector<unsigned char> buf = make_data(CC_COLL_F64, 9, g_rank, true);
    const cc_coll_status_t st = staged_allreduce_sum(copier, host.data(), chunk_bytes, buf.data(), buf.data(), 9,
                                                     CC_COLL_F64, MPI_COMM_NULL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, old);
    MPI_Errhandler_free(&old);
    EXPECT(st == CC_COLL_ERR_MPI, "an invalid communicator returned %d, not CC_COLL_ERR_MPI", static_cast<int>(st));
    EXPECT(std::strstr(last_error(), "MPI_Allreduce") != nullptr, "message: %s", last_error());
    EXPECT(copier.pending() == 0, "copies pending after the MPI failure");
}

void test_bor()
{
    g_test = "staged allreduce_bor";
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{4099}}) {
        std::vector<unsigned char> data(bytes + kGuardBytes, kGuard);
        for (std::size_t i = 0; i < bytes; ++i)
            data[i] = static_cast<unsigned char>(1u << ((g_rank + i) % 7)) | static_cast<unsigned char>(i & 0x01);
        std::vector<unsigned char> want(data);
        if (bytes > 0)
            EXPECT(MPI_Allreduce(MPI_IN_PLACE, want.data(), static_cast<int>(bytes), MPI_UINT8_T, MPI_BOR,
                                 MPI_COMM_WORLD) == MPI_SUCCESS,
                   "reference MPI_Allreduce (MPI_BOR) failed");
        for (CopyMode mode : kModes) {
            Staging host(bytes);
            HostCopier copier(mode, host.data(), host.bytes, 0);
            std::vector<unsigned char> buf(data);
            CHECK_CC(staged_allreduce_bor(copier, host.data(), buf.data(), bytes, MPI_COMM_WORLD));
            EXPECT(same_bytes(buf, want, bytes), "%zu bytes, %s copier: differs from MPI_BOR", bytes,
                   mode_name(mode));
            EXPECT(guard_intact(buf, bytes) && host.guard_intact(), "overrun");
            EXPECT(copier.violations().empty(), "slot protocol: %s", copier.violations().c_str());
            EXPECT(copier.pending() == 0, "copies pending");
        }
    }
}

void test_allgather()
{
    g_test = "staged allgather_bytes";
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{4099}}) {
        std::vector<unsigned char> send(bytes + kGuardBytes, kGuard);
        for (std::size_t i = 0; i < bytes; ++i) send[i] = static_cast<unsigned char>(g_rank * 37 + i * 11);
        const std::size_t total = static_cast<std::size_t>(g_size) * bytes;
        std::vector<unsigned char> want(total + 1);
        if (bytes > 0)
            EXPECT(MPI_Allgather(send.data(), static_cast<int>(bytes), MPI_BYTE, want.data(), static_cast<int>(bytes),
                                 MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS,
                   "reference MPI_Allgather failed");
        for (CopyMode mode : kModes) {
            Staging host((static_cast<std::size_t>(g_size) + 1) * bytes);
            HostCopier copier(mode, host.data(), host.bytes, 0);
            std::vector<unsigned char> recv(total + kGuardBytes, kGuard);
            if (total > 0) scribble(recv.data(), total);
            CHECK_CC(staged_allgather_bytes(copier, host.data(), send.data(), bytes, recv.data(), MPI_COMM_WORLD));
            EXPECT(same_bytes(recv, want, total), "%zu bytes, %s copier: differs from MPI_Allgather", bytes,
                   mode_name(mode));
            EXPECT(guard_intact(recv, total) && host.guard_intact(), "overrun");
            EXPECT(copier.violations().empty(), "slot protocol: %s", copier.violations().c_str());
            EXPECT(copier.pending() == 0, "copies pending");
        }
    }
}

void test_resolve()
{
    g_test = "resolve_device_transport";
    const bool aware = cc_coll_mpi_cuda_aware() != 0;
    EXPECT(mpi_reports_cuda_aware() == aware, "mpi_reports_cuda_aware disagrees with cc_coll_mpi_cuda_aware");
    DeviceTransportMode mode = DeviceTransportMode::Direct;
    CHECK_CC(resolve_device_transport(CudaTransport::Staged, &mode));
    EXPECT(mode == DeviceTransportMode::Staged, "staged must resolve to Staged");
    CHECK_CC(resolve_device_transport(CudaTransport::Auto, &mode));
    EXPECT(mode == (aware ? DeviceTransportMode::Direct : DeviceTransportMode::Staged),
           "auto resolved to %s with cc_coll_mpi_cuda_aware() = %d", device_transport_name(mode), aware ? 1 : 0);
    clear_error();
    const cc_coll_status_t st = resolve_device_transport(CudaTransport::Direct, &mode);
    if (aware) {
        EXPECT(st == CC_COLL_OK && mode == DeviceTransportMode::Direct, "direct on a CUDA-aware MPI");
    } else {
        EXPECT(st == CC_COLL_ERR_NOT_SUPPORTED, "direct without CUDA-aware MPI returned %d", static_cast<int>(st));
        EXPECT(std::strstr(last_error(), "CUDA-aware") != nullptr, "message: %s", last_error());
    }
    EXPECT(std::strcmp(device_transport_name(DeviceTransportMode::Direct), "direct") == 0 &&
               std::strcmp(device_transport_name(DeviceTransportMode::Staged), "staged") == 0,
           "device_transport_name");
}


#ifdef CC_COLL_HAVE_CUDA
// Device memory holding a copy of `data` (count x esize bytes of it).
void *to_gpu(const std::vector<unsigned char> &data, std::size_t bytes)
{
    void *p = nullptr;
    EXPECT(cudaMalloc(&p, bytes > 0 ? bytes : 1) == cudaSuccess, "cudaMalloc(%zu) failed", bytes);
    if (bytes > 0) EXPECT(cudaMemcpy(p, data.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy up");
    // From pageable memory cudaMemcpy may return before the data lands, and
    // the transport's copy streams are non-blocking: they would not wait.
    EXPECT(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize after cudaMemcpy up");
    return p;
}

std::vector<unsigned char> from_gpu(const void *p, std::size_t bytes)
{
    std::vector<unsigned char> v(bytes);
    if (bytes > 0) EXPECT(cudaMemcpy(v.data(), p, bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "cudaMemcpy down");
    return v;
}

// DeviceTransport on device buffers, in every mode this MPI allows, against
// the host references.
void test_device_transport_gpu()
{
    std::vector<DeviceTransportMode> modes = {DeviceTransportMode::Staged};
    if (cc_coll_mpi_cuda_aware()) modes.push_back(DeviceTransportMode::Direct);
    for (DeviceTransportMode mode : modes) {
        g_test = mode == DeviceTransportMode::Direct ? "DeviceTransport (direct)" : "DeviceTransport (staged)";
        std::unique_ptr<DeviceTransport> t;
        CHECK_CC(DeviceTransport::create(mode, 4096, &t));
        for (cc_coll_dtype_t dtype : kDtypes) {
            const std::size_t esize = dtype_size(dtype);
            for (std::size_t count : {std::size_t{0}, std::size_t{1}, 4096 / esize, 4096 / esize + 1,
                                      std::size_t{300001}}) {
                const std::size_t bytes = count * esize;
                const std::vector<unsigned char> data = make_data(dtype, count, g_rank, true);
                const std::vector<unsigned char> want = whole_reference(data, count, dtype);
                for (bool in_place : {false, true}) {
                    void *send = to_gpu(data, bytes);
                    void *recv = in_place ? send : to_gpu(std::vector<unsigned char>(bytes, 0xff), bytes);
                    CHECK_CC(t->allreduce_sum(send, recv, count, dtype, MPI_COMM_WORLD));
                    EXPECT(same_bytes(from_gpu(recv, bytes), want, bytes), "%s count %zu %s differs",
                           dtype_name(dtype), count, in_place ? "in place" : "out of place");
                    if (!in_place) {
                        EXPECT(same_bytes(from_gpu(send, bytes), data, bytes), "send was modified");
                        cudaFree(recv);
                    }
                    cudaFree(send);
                }
            }
        }
        // Payloads above the chunk size: the pinned memory grows.
        for (std::size_t bytes : {std::size_t{0}, std::size_t{5}, std::size_t{3 * 4096 + 17}}) {
            std::vector<unsigned char> mine(bytes);
            for (std::size_t i = 0; i < bytes; ++i) mine[i] = static_cast<unsigned char>(1u << ((g_rank + i) % 8));
            std::vector<unsigned char> want_or(mine);
            if (bytes > 0)
                MPI_Allreduce(MPI_IN_PLACE, want_or.data(), static_cast<int>(bytes), MPI_UINT8_T, MPI_BOR,
                              MPI_COMM_WORLD);
            void *buf = to_gpu(mine, bytes);
            CHECK_CC(t->allreduce_bor(buf, bytes, MPI_COMM_WORLD));
            EXPECT(same_bytes(from_gpu(buf, bytes), want_or, bytes), "allreduce_bor of %zu bytes differs", bytes);
            const std::size_t total = static_cast<std::size_t>(g_size) * bytes;
            std::vector<unsigned char> want_all(total + 1);
            if (bytes > 0)
                MPI_Allgather(mine.data(), static_cast<int>(bytes), MPI_BYTE, want_all.data(), static_cast<int>(bytes),
                              MPI_BYTE, MPI_COMM_WORLD);
            // allreduce_bor overwrote buf: gather from a fresh copy of `mine`.
            cudaFree(buf);
            buf = to_gpu(mine, bytes);
            void *all = to_gpu(std::vector<unsigned char>(total, 0xff), total);
            CHECK_CC(t->allgather_bytes(buf, bytes, all, MPI_COMM_WORLD));
            EXPECT(same_bytes(from_gpu(all, total), want_all, total), "allgather_bytes of %zu bytes differs", bytes);
            cudaFree(all);
            cudaFree(buf);
        }
    }
}

// Without a usable GPU the staged path fails cleanly, naming the CUDA call.
void test_device_transport_no_gpu()
{
    g_test = "DeviceTransport without a GPU";
    std::unique_ptr<DeviceTransport> t;
    EXPECT(DeviceTransport::create(DeviceTransportMode::Staged, 4, &t) == CC_COLL_ERR_INVALID_ARG,
           "a 4-byte chunk must be rejected");
    CHECK_CC(DeviceTransport::create(DeviceTransportMode::Staged, 4096, &t));
    EXPECT(t->mode() == DeviceTransportMode::Staged, "mode");
    std::vector<float> x(16, 1.0f);
    clear_error();
    const cc_coll_status_t st = t->allreduce_sum(x.data(), x.data(), x.size(), CC_COLL_F32, MPI_COMM_WORLD);
    EXPECT(st == CC_COLL_ERR_CUDA, "staged sum without a GPU returned %d, not CC_COLL_ERR_CUDA", static_cast<int>(st));
    EXPECT(std::strstr(last_error(), "device transport") != nullptr && std::strstr(last_error(), "cuda") != nullptr,
           "message: %s", last_error());
}
#endif

}  // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    test_resolve();
    test_bad_arguments();
    test_overlap_order();
    test_exact_sums();
    test_rounded_sums();
    test_copy_failures();
    test_mpi_failure();
    test_bor();
    test_allgather();
#ifdef CC_COLL_HAVE_CUDA
    if (cc_coll_cuda_device_count() > 0)
        test_device_transport_gpu();
    else
        test_device_transport_no_gpu();
#endif
    if (g_rank == 0) std::printf("staged transport: all tests passed on %d ranks\n", g_size);
    MPI_Finalize();
    return 0;
}
