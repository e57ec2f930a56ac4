// Seeded mutation fuzzing of the TOPK collectives' receiver (the step after
// the allreduce's MPI_Allgather and the reduce-scatter's MPI_Alltoall:
// topk::check_payloads, then the scatter-add), without MPI and without
// libFuzzer.
//
// Each input: P = 1 .. 8 well-formed payloads of one dtype (every dtype)
// over n = 1 .. 2000 elements with the k of a density, built by the
// library's encoder (collective_payloads.hpp), sometimes one sender
// flagging overflow or carrying NaN/Inf values; a receiver whose call
// matches, or has another n, or reads F16 payloads as BF16 (or the
// reverse), all with the payloads' size; and 0 to 4 mutations: bit flips,
// random bytes, a header's n, k or flags at boundary values, one index out
// of range, repeated or out of order, two indices swapped, one payload
// copied over another, NaN/Inf value bytes, padding bytes. The payloads lie
// in an allocation of exactly their size and are received twice, into a
// buffer filled with 0xa5 and then 0x5a, each with 64 guard bytes on both
// sides. Asserted:
//   - the guard bytes are never written;
//   - the verdict (decode, dense fallback, reject) and the fault (field,
//     sender, index position) are those of a reference check written here
//     from docs/wire.md, "What a TOPK receiver checks";
//   - the check gives the same verdict and message on a copy of just the
//     header and index bytes of each payload (what a device receiver checks);
//   - rejected or dense: the buffer is untouched, and a rejection's message
//     names the sender's rank;
//   - decoded: both receives are byte-identical and equal to the reference
//     sum of the payloads (collective_payloads.hpp; NaN equal to any NaN);
//   - an unmutated set to a matching call is never rejected.
// Then inputs / 4 coded payloads (fuzz_coded below).
//
//   cc_coll_fuzz_topk_payloads [--inputs N] [--seed S] [--verbose]
//
// Exit status 0 when every input passed; else 1 after printing the input's
// number, the seed and the payloads in hex.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collective_payloads.hpp"
#include "compressors/topk/topk_select.hpp"

using namespace cc_coll::detail;
using fuzz::Rng;

namespace {

constexpr std::size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xcd;

std::uint64_t g_seed = 1;
std::uint64_t g_input = 0;

[[noreturn]] void failed(const char *what, const std::vector<unsigned char> &payloads, const std::string &text)
{
    fuzz::report_failure(g_input, g_seed, what, "message", text, "payloads", payloads, 512);
}

const std::size_t kCounts[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 64, 100, 255, 256, 1000, 2000};
const double kDensities[] = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.9, 1.0};

struct Input {
    std::vector<unsigned char> payloads;  // P x bytes
    std::size_t P = 1;
    std::size_t n = 1;                    // the receiver's
    std::size_t k = 0;                    // the receiver's (and the senders')
    cc_coll_dtype_t dtype = CC_COLL_F32;  // the receiver's
    std::size_t bytes = 0;
    bool matching = true;
    int mutations = 0;
};

Input make_input(Rng &rng)
{
    Input in;
    const cc_coll_dtype_t sent = static_cast<cc_coll_dtype_t>(rng.below(4));
    in.dtype = sent;
    in.n = rng.chance(70) ? kCounts[rng.below(sizeof kCounts / sizeof kCounts[0])]
                          : 1 + static_cast<std::size_t>(rng.below(2000));
    in.k = topk::k_for(kDensities[rng.below(sizeof kDensities / sizeof kDensities[0])], in.n);
    if (in.k > 64 && rng.chance(70)) in.k = 1 + rng.below(64);  // keep most inputs small
    in.P = 1 + static_cast<std::size_t>(rng.below(8));
    in.bytes = topk::payload_bytes(in.k, in.dtype);
    const std::size_t overflow = rng.chance(10) ? rng.below(in.P) : ~std::size_t{0};
    in.payloads = fuzz::topk_payloads(sent, in.n, in.k, in.P, rng, overflow, rng.chance(10));
    // The receiver's call: the senders', or one argument differs with the
    // same payload size (another size is a different MPI count: undefined
    // in MPI before any byte is read).
    if (rng.chance(15)) {
        in.matching = false;
        switch (rng.below(3)) {
        case 0: in.n = in.n + 1; break;
        case 1:
            if (in.n > in.k && in.n > 1) in.n = in.n - 1;
            else in.matching = true;
            break;
        case 2:
            if (sent == CC_COLL_F16) in.dtype = CC_COLL_BF16;
            else if (sent == CC_COLL_BF16) in.dtype = CC_COLL_F16;
            else in.matching = true;  // F32 and F64 payloads of one k differ in size
            break;
        }
    }
    return in;
}

std::uint64_t boundary(Rng &rng, std::uint64_t v)
{
    const std::uint64_t values[] = {0,
                                    1,
                                    2,
                                    v - 1,
                                    v + 1,
                                    v * 2,
                                    v / 2,
                                    0xffffffffull,
                                    0x100000000ull,
                                    0x7fffffffull,
                                    0x80000000ull,
                                    ~0ull,
                                    ~0ull / 2,
                                    rng.next()};
    return values[rng.below(sizeof values / sizeof values[0])];
}

void put64(std::vector<unsigned char> &m, std::size_t off, std::uint64_t v) { std::memcpy(m.data() + off, &v, 8); }
void put32(std::vector<unsigned char> &m, std::size_t off, std::uint32_t v) { std::memcpy(m.data() + off, &v, 4); }
std::uint64_t get64(const std::vector<unsigned char> &m, std::size_t off)
{
    std::uint64_t v;
    std::memcpy(&v, m.data() + off, 8);
    return v;
}
std::uint32_t get32(const std::vector<unsigned char> &m, std::size_t off)
{
    std::uint32_t v;
    std::memcpy(&v, m.data() + off, 4);
    return v;
}

void mutate(Input &in, Rng &rng)
{
    std::vector<unsigned char> &m = in.payloads;
    const std::size_t size = m.size();
    const std::size_t r = rng.below(in.P);
    const std::size_t base = r * in.bytes;
    const std::size_t k = in.k;
    const std::size_t es = dtype_size(in.dtype);
    // 2, 3, 4: a header's n, k, flags.
    switch (rng.below(10)) {
    case 0:  // bit flips anywhere
        for (std::uint64_t b = 1 + rng.below(8); b > 0; --b) m[rng.below(size)] ^= 1u << rng.below(8);
        break;
    case 1:  // random bytes in one payload's header and indices
        for (std::uint64_t b = 1 + rng.below(4); b > 0; --b) {
            const unsigned char values[] = {0, 1, 0x7f, 0x80, 0xff, static_cast<unsigned char>(rng.next())};
            m[base + rng.below(topk::checked_bytes(k))] = values[rng.below(sizeof values)];
        }
        break;
    case 2: put64(m, base, boundary(rng, get64(m, base))); break;
    case 3: put32(m, base + 8, static_cast<std::uint32_t>(boundary(rng, get32(m, base + 8)))); break;
    case 4: {
        const std::uint32_t values[] = {topk::kFlagNonFiniteOverflow,
                                        0,
                                        2,
                                        3,
                                        0x80000000u,
                                        0xffffffffu,
                                        static_cast<std::uint32_t>(1u << rng.below(32)),
                                        static_cast<std::uint32_t>(rng.next())};
        put32(m, base + 12, values[rng.below(sizeof values / sizeof values[0])]);
        break;
    }
    case 5: {  // one index: out of range, equal to or below its neighbour
        if (k == 0) break;
        const std::size_t j = rng.below(k);
        const std::size_t at = base + 16 + 4 * j;
        const std::uint32_t n = static_cast<std::uint32_t>(in.n);
        const std::uint32_t here = get32(m, at);
        const std::uint32_t before = j > 0 ? get32(m, at - 4) : 0;
        const std::uint32_t after = j + 1 < k ? get32(m, at + 4) : n;
        const std::uint32_t values[] = {n,
                                        n + 1,
                                        n - 1,
                                        0,
                                        before,
                                        before - 1,
                                        here + 1,
                                        here - 1,
                                        after,
                                        after + 1,
                                        0xffffffffu,
                                        0x80000000u,
                                        static_cast<std::uint32_t>(rng.next())};
        put32(m, at, values[rng.below(sizeof values / sizeof values[0])]);
        break;
    }
    case 6: {  // two indices of one payload swapped
        if (k < 2) break;
        const std::size_t a = rng.below(k), b = rng.below(k);
        const std::uint32_t va = get32(m, base + 16 + 4 * a), vb = get32(m, base + 16 + 4 * b);
        put32(m, base + 16 + 4 * a, vb);
        put32(m, base + 16 + 4 * b, va);
        break;
    }
    case 7: {  // one payload copied over another (still well-formed)
        const std::size_t to = rng.below(in.P);
        if (to != r) std::memmove(m.data() + to * in.bytes, m.data() + base, in.bytes);
        break;
    }
    case 8: {  // a value: NaN, Inf or the largest finite, in the dtype
        if (k == 0) break;
        const std::size_t at = base + 16 + 4 * k + es * rng.below(k);
        const unsigned char pattern = rng.chance(50) ? 0xff : 0x7f;
        for (std::size_t b = 0; b < es; ++b) m[at + b] = pattern;
        break;
    }
    case 9: {  // padding bytes (never read)
        const std::size_t used = 16 + k * (4 + es);
        if (used < in.bytes) m[base + used + rng.below(in.bytes - used)] = static_cast<unsigned char>(rng.next());
        break;
    }
    }
}

// The reference check: docs/wire.md, "What a TOPK receiver checks".
struct Expect {
    topk::Verdict verdict = topk::Verdict::Decode;
    topk::Field field = topk::Field::None;
    std::size_t sender = 0, position = 0;
};

Expect reference_check(const Input &in)
{
    Expect e;
    bool overflow = false;
    for (std::size_t r = 0; r < in.P; ++r) {
        const std::size_t base = r * in.bytes;
        const std::uint64_t n = get64(in.payloads, base);
        const std::uint32_t k = get32(in.payloads, base + 8);
        const std::uint32_t flags = get32(in.payloads, base + 12);
        topk::Field f = topk::Field::None;
        if (n != in.n) f = topk::Field::N;
        else if (k != in.k) f = topk::Field::K;
        else if (flags > 1) f = topk::Field::Flags;
        if (f != topk::Field::None) {
            e.verdict = topk::Verdict::Reject;
            e.field = f;
            e.sender = r;
            return e;
        }
        overflow = overflow || flags == 1;
    }
    if (overflow) {
        e.verdict = topk::Verdict::Dense;
        return e;
    }
    for (std::size_t r = 0; r < in.P; ++r) {
        for (std::size_t j = 0; j < in.k; ++j) {
            const std::uint32_t idx = get32(in.payloads, r * in.bytes + 16 + 4 * j);
            const bool range = idx >= in.n;
            const bool order = j > 0 && idx <= get32(in.payloads, r * in.bytes + 16 + 4 * (j - 1));
            if (range || order) {
                e.verdict = topk::Verdict::Reject;
                e.field = range ? topk::Field::IndexRange : topk::Field::IndexOrder;
                e.sender = r;
                e.position = j;
                return e;
            }
        }
    }
    return e;
}

struct Outcome {
    topk::Verdict verdict = topk::Verdict::Reject;
    topk::Fault fault;
    std::string text;
    std::vector<unsigned char> body;
};

Outcome run_once(const Input &in, unsigned char fill)
{
    const std::size_t out_bytes = in.n * dtype_size(in.dtype);
    std::vector<unsigned char> area(kGuard + out_bytes + kGuard, kGuardByte);
    std::memset(area.data() + kGuard, fill, out_bytes);
    std::unique_ptr<unsigned char[]> exact(new unsigned char[in.payloads.size()]);
    std::memcpy(exact.get(), in.payloads.data(), in.payloads.size());
    Outcome out;
    out.verdict =
        fuzz::receive_topk(exact.get(), in.P, in.bytes, in.n, in.k, in.dtype, area.data() + kGuard, &out.fault);
    out.text = topk::describe(out.fault, "count");
    for (std::size_t i = 0; i < kGuard; ++i)
        if (area[i] != kGuardByte || area[kGuard + out_bytes + i] != kGuardByte)
            failed("a guard byte around the receive buffer was written", in.payloads, out.text);
    out.body.assign(area.begin() + kGuard, area.begin() + static_cast<std::ptrdiff_t>(kGuard + out_bytes));
    if (out.verdict != topk::Verdict::Decode)
        for (unsigned char c : out.body)
            if (c != fill) failed("not decoded, but the receive buffer was written", in.payloads, out.text);
    return out;
}

// The device receiver's view: only the header and index bytes of each
// payload, copied to the host (CudaExec::read_records), in an allocation of
// exactly their size.
void check_records(const Input &in, const Outcome &whole)
{
    const std::size_t rec = topk::checked_bytes(in.k);
    std::unique_ptr<unsigned char[]> records(new unsigned char[in.P * rec]);
    for (std::size_t r = 0; r < in.P; ++r) std::memcpy(records.get() + r * rec, in.payloads.data() + r * in.bytes, rec);
    topk::Fault f;
    const topk::Verdict v = topk::check_payloads(records.get(), in.P, rec, in.n, in.k, &f);
    if (v != whole.verdict || topk::describe(f, "count") != whole.text)
        failed("the header and index bytes alone give another verdict", in.payloads, whole.text);
}

const char *field_name(topk::Field f)
{
    switch (f) {
    case topk::Field::None: return "none";
    case topk::Field::N: return "n";
    case topk::Field::K: return "k";
    case topk::Field::Flags: return "flags";
    case topk::Field::IndexRange: return "index not below n";
    case topk::Field::IndexOrder: return "index not ascending";
    case topk::Field::Format: return "value or index format";
    case topk::Field::IndexBytes: return "coded index stream length";
    }
    return "?";
}

// The coded payload (docs/wire.md, "The coded TOPK payload"): one payload
// of a random value width (dtype's element, 16, 8, 4) and dtype over n = 1
// .. 5000 with random ascending indices (sometimes runs, sometimes one large
// gap, so both index codes occur), encoded by the library into a record of
// its size or a little more, then 0 to 4 mutations (bit flips, random
// bytes, the stream length, the first index, the flags). Asserted: an
// unmutated payload is decoded (F64: to the values the encoder kept in
// sent); a
// mutated one is rejected, or decodes (the checks passed) writing only
// elements below n (guard bytes on both sides) and its message is empty;
// the check reads only the record (an allocation of exactly its size).
// Returns the number of rejected payloads.
std::uint64_t fuzz_coded(Rng &rng, std::uint64_t inputs)
{
    static const unsigned widths[] = {0, 16, 8, 4};
    static const cc_coll_dtype_t dtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    std::uint64_t rejected = 0;
    for (std::uint64_t i = 0; i < inputs; ++i, ++g_input) {
        const std::size_t n = 1 + static_cast<std::size_t>(rng.below(5000));
        const cc_coll_dtype_t dtype = dtypes[rng.below(4)];
        const topk::Format fmt{widths[rng.below(4)], true};
        std::vector<double> x(n);
        for (auto &v : x) v = rng.uniform() * 8.0 - 4.0;
        std::vector<std::uint32_t> idx;
        const unsigned every = 1 + static_cast<unsigned>(rng.below(60));
        for (std::uint32_t j = 0; j < n; ++j)
            if (rng.below(every) == 0 || (rng.chance(5) && !idx.empty() && idx.back() + 1 == j)) idx.push_back(j);
        if (idx.empty()) idx.push_back(static_cast<std::uint32_t>(rng.below(n)));
        const std::size_t k = idx.size();
        std::vector<unsigned char> cap(topk::coded_capacity(k, dtype, fmt), 0);
        std::vector<double> sent(k);
        const std::size_t size =
            topk::encode_coded<double>(x.data(), n, idx.data(), k, 0, dtype, fmt, cap.data(), sent.data());
        const std::size_t record = std::min(cap.size(), size + 8 * static_cast<std::size_t>(rng.below(3)));
        std::vector<unsigned char> payload(cap.begin(), cap.begin() + static_cast<std::ptrdiff_t>(record));
        const int mutations = rng.chance(20) ? 0 : 1 + static_cast<int>(rng.below(4));
        for (int m = 0; m < mutations; ++m) {
            switch (rng.below(5)) {
            case 0: payload[rng.below(record)] ^= static_cast<unsigned char>(1u << rng.below(8)); break;
            case 1: payload[rng.below(record)] = static_cast<unsigned char>(rng.below(256)); break;
            case 2: {
                std::uint32_t v;
                std::memcpy(&v, &payload[16], 4);
                v = rng.chance(50) ? v + static_cast<std::uint32_t>(rng.below(3)) - 1u : static_cast<std::uint32_t>(rng.next());
                std::memcpy(&payload[16], &v, 4);
                break;
            }
            case 3: {
                const std::uint32_t v = rng.chance(50) ? static_cast<std::uint32_t>(n - rng.below(2))
                                                       : static_cast<std::uint32_t>(rng.below(n));
                std::memcpy(&payload[20], &v, 4);
                break;
            }
            default: payload[12 + rng.below(2)] ^= static_cast<unsigned char>(1u << rng.below(8)); break;
            }
        }
        std::unique_ptr<unsigned char[]> exact(new unsigned char[record]);
        std::memcpy(exact.get(), payload.data(), record);
        topk::Fault f;
        const topk::Verdict v = topk::check_payloads(exact.get(), 1, record, n, k, &f, fmt, dtype);
        const std::string text = topk::describe(f, "count");
        if (mutations == 0 && v != topk::Verdict::Decode)
            failed("an unmutated coded payload was not decoded", payload, text);
        if (v == topk::Verdict::Reject) {
            if (text.find("rank 0 sent ") == std::string::npos)
                failed("a coded rejection that does not name the sender", payload, text);
            ++rejected;
            continue;
        }
        if (v == topk::Verdict::Dense) continue;
        if (!text.empty()) failed("a coded payload decoded with a fault message", payload, text);
        const std::size_t es = dtype_size(dtype);
        std::vector<unsigned char> out((n + 2 * kGuard) * es, kGuardByte);
        std::memset(out.data() + kGuard * es, 0, n * es);
        topk::scatter_add(exact.get(), dtype, out.data() + kGuard * es);
        for (std::size_t b = 0; b < kGuard * es; ++b)
            if (out[b] != kGuardByte || out[out.size() - 1 - b] != kGuardByte)
                failed("a coded payload's decode wrote outside the buffer", payload, text);
        if (mutations == 0 && (dtype == CC_COLL_F64)) {
            for (std::size_t j = 0; j < k; ++j) {
                double got;
                std::memcpy(&got, out.data() + (kGuard + idx[j]) * es, 8);
                if (got != sent[j]) failed("an unmutated coded payload decoded to other values than sent", payload, "");
            }
        }
    }
    return rejected;
}

}  // namespace

int main(int argc, char **argv)
{
    fuzz::DriverArgs args;
    args.inputs = 20000;
    if (!fuzz::parse_driver_args(argc, argv, &args)) return 2;
    g_seed = args.seed;
    const std::uint64_t inputs = args.inputs;
    const bool verbose = args.verbose;
    Rng rng(g_seed);
    std::uint64_t decoded = 0, dense = 0, rejected = 0, unmutated = 0;
    std::map<std::string, std::uint64_t> faults;
    for (g_input = 0; g_input < inputs; ++g_input) {
        Input in = make_input(rng);
        const std::vector<unsigned char> original = in.payloads;
        in.mutations = rng.chance(10) ? 0 : 1 + static_cast<int>(rng.below(4));
        for (int i = 0; i < in.mutations; ++i) mutate(in, rng);
        const bool pristine = in.payloads == original && in.matching;

        const Outcome a = run_once(in, 0xa5);
        const Outcome b = run_once(in, 0x5a);
        if (a.verdict != b.verdict || a.text != b.text) failed("two receives of one set disagree", in.payloads, a.text);
        const Expect e = reference_check(in);
        if (a.verdict != e.verdict || a.fault.field != e.field ||
            (e.verdict == topk::Verdict::Reject && (a.fault.sender != e.sender || a.fault.position != e.position))) {
            char what[160];
            std::snprintf(what, sizeof what,
                          "verdict %d, %s of sender %zu at %zu; the reference: %d, %s of sender %zu at %zu",
                          static_cast<int>(a.verdict), field_name(a.fault.field), a.fault.sender, a.fault.position,
                          static_cast<int>(e.verdict), field_name(e.field), e.sender, e.position);
            failed(what, in.payloads, a.text);
        }
        check_records(in, a);
        switch (a.verdict) {
        case topk::Verdict::Decode:
            if (a.body != b.body) failed("decoded, but not every byte of the buffer was written", in.payloads, "");
            {
                const std::vector<unsigned char> ref =
                    fuzz::reference_topk_sum(in.payloads.data(), in.P, in.bytes, in.n, in.k, in.dtype);
                if (!fuzz::same_values(a.body, ref, in.n, in.dtype)) {
                    std::size_t at = 0;
                    while (a.body[at] == ref[at]) ++at;
                    char what[160];
                    std::snprintf(what, sizeof what,
                                  "decoded to other values than the reference sum (dtype %d, byte %zu: 0x%02x, the "
                                  "reference 0x%02x)",
                                  static_cast<int>(in.dtype), at, a.body[at], ref[at]);
                    failed(what, in.payloads, "");
                }
            }
            if (!a.text.empty()) failed("decoded with a fault message", in.payloads, a.text);
            ++decoded;
            break;
        case topk::Verdict::Dense: ++dense; break;
        case topk::Verdict::Reject: {
            char rank[32];
            std::snprintf(rank, sizeof rank, "rank %zu sent ", a.fault.sender);
            if (a.text.find(rank) == std::string::npos)
                failed("a rejection that does not name the sender", in.payloads, a.text);
            ++rejected;
            ++faults[field_name(a.fault.field)];
            break;
        }
        }
        if (pristine) {
            ++unmutated;
            if (a.verdict == topk::Verdict::Reject)
                failed("a well-formed set to a matching call was rejected", in.payloads, a.text);
        }
    }
    const std::uint64_t coded_inputs = inputs / 4;
    const std::uint64_t coded_rejected = fuzz_coded(rng, coded_inputs);
    std::printf("cc_coll_fuzz_topk_payloads: %" PRIu64 " coded payloads, %" PRIu64 " rejected; no failure\n",
                coded_inputs, coded_rejected);
    std::printf("cc_coll_fuzz_topk_payloads: seed %" PRIu64 ", %" PRIu64 " payload sets: %" PRIu64 " decoded, %" PRIu64
                " dense (overflow), %" PRIu64 " rejected with %zu kinds of fault; %" PRIu64
                " unmutated to a matching call; no failure\n",
                g_seed, inputs, decoded, dense, rejected, faults.size(), unmutated);
    if (verbose)
        for (const auto &f : faults) std::printf("  %8" PRIu64 "  %s\n", f.second, f.first.c_str());
    return 0;
}
