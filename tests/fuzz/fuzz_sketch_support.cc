// Seeded mutation fuzzing of the SKETCH collectives' receiver, without MPI
// and without libFuzzer: the coded support message of each allreduce input
// (check_coded and or_coded against a reference decoder written here, the
// message mutated or not: fuzz_coded below); the OR-ed support message
// (bitmap + flag byte) checked by sketch_support::check_tail, the reduce-scatter's rows per
// table checked by check_rows, the sizing (rows_per_table) and the peeling
// decoder (sketch::decode) over whatever support passes.
//
// Each input: n = 1 .. 40000 elements (mostly 6200 .. 20200, where a
// sketch of one row per table is smaller than the buffer in every dtype),
// a support of random density with integer values (so that every sum is
// exact), a flag byte, the work type (float or double) and dtype, the load
// factor and seed; the allreduce's receiver or the reduce-scatter's. Then 0
// to 4 mutations of the message (bit flips, bits past n, the flag byte,
// support bits set or cleared), sometimes of the rows value every
// reduce-scatter rank receives (boundary values, kRowsMalformed) and of the
// summed sketch's cells (NaN, Inf, the largest finite value, other
// integers). The receiver's steps run as the collectives run them
// (allreduce/sketch.cc, reduce_scatter/sketch.cc): check the tail; compute
// m (allreduce) or check the received m (reduce-scatter); the flag or the
// size rule may choose the dense fallback; else the senders' sketch (over
// the original support, with the layout every rank uses) is decoded over
// the received support, twice, into buffers filled with 0xa5 and 0x5a with
// 64 guard bytes on both sides, the cells also guarded. Asserted:
//   - no guard byte written, around the output or the cells;
//   - the verdict (decode, dense, reject) and the field are those of a
//     reference check written here from docs/wire.md, and a rejection has
//     a message;
//   - decoded: both decodes byte-identical; the support and peeled counts
//     those of a reference peeling decoder (collective_payloads.hpp); +0
//     off the support; and, where the sketch is consistent with the
//     support (cells unmutated, no bit of the senders' support cleared),
//     every value equal to the reference decoder's and, when every element
//     peeled, to what the senders sent;
//   - an unmutated input is never rejected.
// The driver finishing is the check that peeling ends on any input.
//
//   cc_coll_fuzz_sketch_support [--inputs N] [--seed S] [--verbose]
//
// Exit status 0 when every input passed; else 1 after printing the input's
// number, the seed and the message's tail in hex.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collective_payloads.hpp"
#include "core/dtype.hpp"

using namespace cc_coll::detail;
using fuzz::Rng;

namespace {

constexpr std::size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xcd;

std::uint64_t g_seed = 1;
std::uint64_t g_input = 0;

[[noreturn]] void failed(const char *what, const std::vector<unsigned char> &msg, const std::string &text)
{
    std::fprintf(stderr, "FAIL: input %" PRIu64 " (seed %" PRIu64 "): %s\n", g_input, g_seed, what);
    if (!text.empty()) std::fprintf(stderr, "  message: %s\n", text.c_str());
    std::fprintf(stderr, "  support message: %zu bytes, last 16:", msg.size());
    for (std::size_t i = msg.size() > 16 ? msg.size() - 16 : 0; i < msg.size(); ++i)
        std::fprintf(stderr, " %02x", msg[i]);
    std::fprintf(stderr, "\n");
    std::exit(1);
}

const std::size_t kSmall[] = {1, 2, 7, 8, 9, 13, 16, 63, 64, 65, 1000, 1023, 1024, 1025};
const double kDensities[] = {0.0, 0.001, 0.01, 0.05, 0.1, 0.3};
const double kLoads[] = {0.5, 0.75, 1.0, 3.0};

enum class Verdict { Decode, Dense, Reject };

struct Input {
    bool reduce_scatter = false;
    std::size_t n = 1;
    cc_coll_dtype_t dtype = CC_COLL_F32;
    bool wide = false;  // work type double (F64)
    double load = 0.75;
    std::uint64_t seed = 0;
    std::vector<std::uint32_t> support;  // the senders'
    std::vector<double> x;               // the senders' sum: integers on the support
    std::vector<unsigned char> msg;      // the OR-ed message every rank received
    bool rows_mutated = false;  // reduce-scatter: the m every rank received is edited
    int cell_mutations = 0;
    bool support_cleared = false;  // a bit of the senders' support was cleared
};

Input make_input(Rng &rng)
{
    Input in;
    in.reduce_scatter = rng.chance(40);
    if (rng.chance(25)) in.n = kSmall[rng.below(sizeof kSmall / sizeof kSmall[0])];
    else if (rng.chance(85)) in.n = 6200 + static_cast<std::size_t>(rng.below(14000));
    else in.n = 1 + static_cast<std::size_t>(rng.below(40000));
    in.dtype = static_cast<cc_coll_dtype_t>(rng.below(4));
    in.wide = in.dtype == CC_COLL_F64;
    in.load = kLoads[rng.below(sizeof kLoads / sizeof kLoads[0])];
    in.seed = rng.next();
    const double density = kDensities[rng.below(sizeof kDensities / sizeof kDensities[0])];
    const std::size_t kept =
        std::min(in.n, static_cast<std::size_t>(density * static_cast<double>(in.n)) + rng.below(3));
    in.support = fuzz::random_indices(in.n, kept, rng);
    in.x.assign(in.n, 0.0);
    for (std::uint32_t i : in.support) in.x[i] = static_cast<double>(static_cast<int>(rng.below(2001)) - 1000);
    in.msg = fuzz::support_message(in.n, in.support, rng.chance(8) ? 1 : 0);
    return in;
}

bool bit(const std::vector<unsigned char> &m, std::size_t i) { return (m[i / 8] >> (i % 8)) & 1u; }

void mutate_message(Input &in, Rng &rng)
{
    std::vector<unsigned char> &m = in.msg;
    const std::size_t n = in.n;
    const std::size_t bb = sketch_support::bitmap_bytes(n);
    // Mostly support bits (which pass the checks), so that most inputs
    // reach the decoder.
    const std::uint64_t pick = rng.below(100);
    const int kind = pick < 20 ? 0 : pick < 28 ? 1 : pick < 36 ? 2 : pick < 70 ? 3 : 4;
    switch (kind) {
    case 0:  // bit flips anywhere in the message
        for (std::uint64_t b = 1 + rng.below(4); b > 0; --b) m[rng.below(m.size())] ^= 1u << rng.below(8);
        break;
    case 1:  // a bit past n (none when n is a multiple of 8)
        if (n % 8 != 0) m[bb - 1] |= static_cast<unsigned char>(1u << (n % 8 + rng.below(8 - n % 8)));
        break;
    case 2: {  // the flag byte
        const unsigned char values[] = {0, 1, 2, 3, 0x80, 0xff, static_cast<unsigned char>(rng.next())};
        m[bb] = values[rng.below(sizeof values)];
        break;
    }
    case 3:  // support bits set below n (positions where the senders sent 0)
        for (std::uint64_t b = 1 + rng.below(16); b > 0; --b) {
            const std::size_t i = rng.below(n);
            m[i / 8] |= static_cast<unsigned char>(1u << (i % 8));
        }
        break;
    case 4:  // support bits cleared
        for (std::uint64_t b = 1 + rng.below(4); b > 0; --b) {
            const std::size_t i = rng.below(n);
            m[i / 8] &= static_cast<unsigned char>(~(1u << (i % 8)));
        }
        break;
    }
}

std::uint64_t rows_boundary(Rng &rng, std::uint64_t m)
{
    const std::uint64_t values[] = {0,
                                    1,
                                    2,
                                    m + 1,
                                    m > 0 ? m - 1 : 0,
                                    sketch::kMaxRowsPerTable,
                                    std::uint64_t{sketch::kMaxRowsPerTable} + 1,
                                    0xffffffffull,
                                    0x100000000ull,
                                    0x100000001ull,
                                    sketch_support::kRowsMalformed,
                                    rng.next()};
    return values[rng.below(sizeof values / sizeof values[0])];
}

// The reference check of the message's tail: any bit at or beyond n, or a
// flag byte above 1.
sketch_support::Field reference_tail(const Input &in)
{
    const std::size_t bb = sketch_support::bitmap_bytes(in.n);
    for (std::size_t i = in.n; i < 8 * bb; ++i)
        if (bit(in.msg, i)) return sketch_support::Field::PaddingBits;
    if (in.msg[bb] > 1) return sketch_support::Field::Flag;
    return sketch_support::Field::None;
}

const char *field_name(sketch_support::Field f)
{
    switch (f) {
    case sketch_support::Field::None: return "none";
    case sketch_support::Field::PaddingBits: return "bits past n";
    case sketch_support::Field::Flag: return "flag byte";
    case sketch_support::Field::Rows: return "rows per table";
    case sketch_support::Field::CodedN: return "coded: n";
    case sketch_support::Field::CodedCount: return "coded: count";
    case sketch_support::Field::CodedFlags: return "coded: flags";
    case sketch_support::Field::CodedBytes: return "coded: index stream bytes";
    case sketch_support::Field::CodedIndex: return "coded: index";
    }
    return "?";
}

// ---- The coded support message (docs/wire.md, "The coded SKETCH support") ----

// A reference check and decoder of one coded message in a record of
// rec.size() bytes, written from the page, bit by bit: the field of the
// first fault (or None), and the indices of an accepted message.
sketch_support::Field reference_coded(const std::vector<unsigned char> &rec, std::size_t n,
                                      std::vector<std::uint32_t> *out, bool *flag)
{
    using F = sketch_support::Field;
    out->clear();
    if (rec.size() < 24) return F::CodedBytes;
    std::uint64_t hn;
    std::uint32_t count, flags, bytes, first;
    std::memcpy(&hn, rec.data(), 8);
    std::memcpy(&count, rec.data() + 8, 4);
    std::memcpy(&flags, rec.data() + 12, 4);
    std::memcpy(&bytes, rec.data() + 16, 4);
    std::memcpy(&first, rec.data() + 20, 4);
    if (hn != n) return F::CodedN;
    if (count > n) return F::CodedCount;
    const unsigned code = (flags >> 3) & 3u, param = (flags >> 8) & 0xffu;
    if ((flags & ~0xff19u) != 0 || (code != 1 && code != 2) || param > (code == 1 ? 32u : 31u)) return F::CodedFlags;
    if (bytes > rec.size() - 24) return F::CodedBytes;
    const std::uint64_t gaps = count > 0 ? count - 1 : 0;
    if (code == 1 && bytes != (gaps * param + 7) / 8) return F::CodedBytes;
    *flag = (flags & 1u) != 0;
    if (count == 0) return bytes == 0 ? F::None : F::CodedBytes;
    std::uint64_t at = 0;
    const std::uint64_t limit = std::uint64_t{bytes} * 8;
    const auto next_bit = [&](unsigned *b) {
        if (at >= limit) return false;
        *b = (rec[24 + at / 8] >> (at % 8)) & 1u;
        ++at;
        return true;
    };
    std::uint64_t index = first;
    if (index >= n) return F::CodedIndex;
    out->push_back(static_cast<std::uint32_t>(index));
    for (std::uint64_t j = 1; j < count; ++j) {
        std::uint64_t gap = 0;
        unsigned b = 0;
        if (code == 1) {
            for (unsigned t = 0; t < param; ++t) {
                next_bit(&b);  // the length was checked
                gap |= std::uint64_t{b} << t;
            }
        } else {
            std::uint64_t q = 0;
            for (;;) {
                if (!next_bit(&b)) return F::CodedBytes;
                if (b == 0) break;
                ++q;
            }
            std::uint64_t rest = 0;
            for (unsigned t = 0; t < param; ++t) {
                if (!next_bit(&b)) return F::CodedBytes;
                rest |= std::uint64_t{b} << t;
            }
            gap = (q << param) | rest;
        }
        index += gap + 1;
        if (index >= n) return F::CodedIndex;
        out->push_back(static_cast<std::uint32_t>(index));
    }
    if (code == 2 && (at + 7) / 8 != bytes) return F::CodedBytes;
    return F::None;
}

// One coded message of the input's support, mutated or not, through the
// allreduce's receiver (check_coded, then or_coded): the verdict and field
// are the reference's; an accepted message ORs exactly the reference's
// indices into a bitmap with guards; an unmutated one is accepted and gives
// back the senders' support and flag. The record is a vector of exactly its
// size, so that a sanitizer build sees any read past it.
void fuzz_coded(const Input &in, Rng &rng, std::uint64_t *accepted, std::uint64_t *rejected,
                std::map<std::string, std::uint64_t> *faults)
{
    const std::size_t n = in.n;
    const bool nonfinite = in.msg[sketch_support::flag_offset(n)] != 0;
    std::vector<unsigned char> rec(sketch_support::coded_capacity(in.support.size()), 0);
    const std::size_t bytes = sketch_support::encode_coded(in.support.data(), in.support.size(), n, nonfinite, rec.data());
    rec.resize(bytes);
    const std::vector<unsigned char> original = rec;
    const int mutations = rng.chance(20) ? 0 : 1 + static_cast<int>(rng.below(3));
    for (int i = 0; i < mutations; ++i) {
        const auto set32 = [&](std::size_t at, std::uint32_t v) {
            if (at + 4 <= rec.size()) std::memcpy(rec.data() + at, &v, 4);
        };
        std::uint32_t word = 0;
        switch (rng.below(7)) {
        case 0:  // bit flips anywhere
            for (std::uint64_t b = 1 + rng.below(4); b > 0; --b) rec[rng.below(rec.size())] ^= 1u << rng.below(8);
            break;
        case 1: {  // n
            const std::uint64_t v = rng.chance(50) ? n + 1 : n - 1;
            std::memcpy(rec.data(), &v, 8);
            break;
        }
        case 2: {  // count
            const std::uint32_t values[] = {0, static_cast<std::uint32_t>(in.support.size() + 1),
                                            static_cast<std::uint32_t>(in.support.size() > 0 ? in.support.size() - 1 : 0),
                                            static_cast<std::uint32_t>(n + 1), 0xffffffffu};
            set32(8, values[rng.below(5)]);
            break;
        }
        case 3:  // flags: a random bit, a code of 0 or 3, a parameter out of range
            std::memcpy(&word, rec.data() + 12, 4);
            word ^= 1u << rng.below(32);
            set32(12, word);
            break;
        case 4:  // the stream's bytes
            std::memcpy(&word, rec.data() + 16, 4);
            set32(16, rng.chance(30) ? 0xffffffffu : word + static_cast<std::uint32_t>(rng.below(3)) - 1u);
            break;
        case 5:  // the first index
            set32(20, rng.chance(50) ? static_cast<std::uint32_t>(n) : static_cast<std::uint32_t>(rng.below(n + 2)));
            break;
        case 6:  // the record cut, or longer (zero padding, or garbage)
            if (rng.chance(50)) {
                rec.resize(static_cast<std::size_t>(rng.below(rec.size() + 1)));
            } else {
                const std::size_t more = 8 * (1 + static_cast<std::size_t>(rng.below(4)));
                const bool garbage = rng.chance(50);
                for (std::size_t b = 0; b < more; ++b)
                    rec.push_back(garbage ? static_cast<unsigned char>(rng.next()) : 0);
            }
            break;
        }
    }
    const bool pristine = rec == original;
    std::vector<std::uint32_t> expect_idx;
    bool expect_flag = false;
    const sketch_support::Field expect = reference_coded(rec, n, &expect_idx, &expect_flag);
    sketch_support::Fault fault;
    // check_coded needs 24 bytes to read a header: the collective's records
    // are never shorter (a size below 24 is refused before), so neither is
    // this one; a shorter record is the reference's CodedBytes.
    const bool ok = rec.size() >= sketch_support::kCodedHeaderBytes &&
                    sketch_support::check_coded(rec.data(), rec.size(), n, 1, &fault);
    if (rec.size() < sketch_support::kCodedHeaderBytes) fault.field = sketch_support::Field::CodedBytes;
    if (ok != (expect == sketch_support::Field::None) || (!ok && fault.field != expect)) {
        char what[160];
        std::snprintf(what, sizeof what, "coded support: fault %s; the reference: %s", field_name(fault.field),
                      field_name(expect));
        failed(what, rec, sketch_support::describe(fault));
    }
    if (pristine && !ok) failed("an unmutated coded support message was rejected", rec, sketch_support::describe(fault));
    if (!ok) {
        if (rec.size() >= sketch_support::kCodedHeaderBytes && sketch_support::describe(fault).empty())
            failed("a coded support rejection without a message", rec, "");
        ++*rejected;
        ++(*faults)[field_name(fault.field)];
        return;
    }
    ++*accepted;
    const std::size_t bb = sketch_support::bitmap_bytes(n);
    std::vector<unsigned char> bitmap(bb + 2 * kGuard, kGuardByte);
    std::memset(bitmap.data() + kGuard, 0, bb);
    const bool flag = sketch_support::or_coded(rec.data(), bitmap.data() + kGuard);
    for (std::size_t b = 0; b < kGuard; ++b)
        if (bitmap[b] != kGuardByte || bitmap[kGuard + bb + b] != kGuardByte)
            failed("or_coded wrote outside the bitmap", rec, "");
    std::vector<unsigned char> want(bb, 0);
    for (std::uint32_t i : expect_idx) want[i / 8] |= static_cast<unsigned char>(1u << (i % 8));
    if (std::memcmp(bitmap.data() + kGuard, want.data(), bb) != 0 || flag != expect_flag)
        failed("or_coded differs from the reference decoder", rec, "");
    if (pristine &&
        (expect_idx != in.support || flag != nonfinite))
        failed("an unmutated coded support message did not give back the senders' support", rec, "");
}

template <typename W>
struct Decoded {
    std::vector<unsigned char> out;  // n values of W
    sketch::DecodeInfo info;
};

template <typename W>
Decoded<W> decode_once(const Input &in, const sketch::Layout &layout, const std::vector<W> &cells, unsigned char fill)
{
    const std::size_t n = in.n;
    // The message in an allocation of exactly its size.
    std::unique_ptr<unsigned char[]> msg(new unsigned char[in.msg.size()]);
    std::memcpy(msg.get(), in.msg.data(), in.msg.size());
    std::vector<unsigned char> area(kGuard + n * sizeof(W) + kGuard, kGuardByte);
    std::memset(area.data() + kGuard, fill, n * sizeof(W));
    std::vector<unsigned char> cell_area(kGuard + cells.size() * sizeof(W) + kGuard, kGuardByte);
    std::memcpy(cell_area.data() + kGuard, cells.data(), cells.size() * sizeof(W));
    sketch::DecodeScratch scratch;
    Decoded<W> d;
    d.info = sketch::decode<W>(layout, msg.get(), reinterpret_cast<W *>(cell_area.data() + kGuard),
                               reinterpret_cast<W *>(area.data() + kGuard), &scratch);
    for (std::size_t i = 0; i < kGuard; ++i) {
        if (area[i] != kGuardByte || area[kGuard + n * sizeof(W) + i] != kGuardByte)
            failed("a guard byte around the output was written", in.msg, "");
        if (cell_area[i] != kGuardByte || cell_area[kGuard + cells.size() * sizeof(W) + i] != kGuardByte)
            failed("a guard byte around the cells was written", in.msg, "");
    }
    d.out.assign(area.begin() + kGuard, area.begin() + static_cast<std::ptrdiff_t>(kGuard + n * sizeof(W)));
    return d;
}

template <typename W>
void decode_and_check(const Input &in, const sketch::Layout &layout, Rng &rng, std::uint64_t *exact,
                      std::uint64_t *estimated)
{
    std::vector<W> cells(layout.cells(), W(0));
    std::vector<W> xw(in.n);
    for (std::size_t i = 0; i < in.n; ++i) xw[i] = static_cast<W>(in.x[i]);
    sketch::encode<W>(layout, xw.data(), in.support.data(), in.support.size(), cells.data());
    for (int c = 0; c < in.cell_mutations; ++c) {
        const W values[] = {std::numeric_limits<W>::quiet_NaN(), std::numeric_limits<W>::infinity(),
                            -std::numeric_limits<W>::infinity(), std::numeric_limits<W>::max(),
                            static_cast<W>(static_cast<int>(rng.below(2001)) - 1000)};
        cells[rng.below(cells.size())] = values[rng.below(sizeof values / sizeof values[0])];
    }
    const Decoded<W> a = decode_once<W>(in, layout, cells, 0xa5);
    const Decoded<W> b = decode_once<W>(in, layout, cells, 0x5a);
    if (a.out != b.out) failed("two decodes differ (not every element written, or not deterministic)", in.msg, "");
    const fuzz::ReferenceDecode ref = fuzz::reference_sketch_decode<W>(layout, in.msg.data(), cells);
    if (a.info.support != ref.support || a.info.peeled != ref.peeled) {
        char what[160];
        std::snprintf(what, sizeof what, "support %zu, peeled %zu; the reference: support %zu, peeled %zu",
                      a.info.support, a.info.peeled, ref.support, ref.peeled);
        failed(what, in.msg, "");
    }
    if (ref.peeled < ref.support) ++*estimated;
    const W *out = reinterpret_cast<const W *>(a.out.data());
    std::vector<W> got(in.n);
    std::memcpy(got.data(), out, in.n * sizeof(W));
    for (std::size_t i = 0; i < in.n; ++i)
        if (!bit(in.msg, i) && !(got[i] == W(0) && !std::signbit(got[i])))
            failed("a value off the support is not +0", in.msg, "");
    if (in.cell_mutations == 0 && !in.support_cleared) {
        ++*exact;
        for (std::size_t i = 0; i < in.n; ++i)
            if (static_cast<double>(got[i]) != ref.out[i]) {
                char what[160];
                std::snprintf(what, sizeof what, "element %zu decoded to %g, the reference gives %g", i,
                              static_cast<double>(got[i]), ref.out[i]);
                failed(what, in.msg, "");
            }
        if (ref.peeled == ref.support)
            for (std::size_t i = 0; i < in.n; ++i)
                if (bit(in.msg, i) && static_cast<double>(got[i]) != in.x[i])
                    failed("a fully peeled decode differs from what the senders sent", in.msg, "");
    }
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
    std::uint64_t decoded = 0, dense = 0, rejected = 0, unmutated = 0, exact = 0, estimated = 0;
    std::uint64_t coded_accepted = 0, coded_rejected = 0;
    std::map<std::string, std::uint64_t> faults;
    for (g_input = 0; g_input < inputs; ++g_input) {
        Input in = make_input(rng);
        if (!in.reduce_scatter) fuzz_coded(in, rng, &coded_accepted, &coded_rejected, &faults);
        const std::vector<unsigned char> original = in.msg;
        const int mutations = rng.chance(15) ? 0 : 1 + static_cast<int>(rng.below(4));
        for (int i = 0; i < mutations; ++i) mutate_message(in, rng);
        for (std::uint32_t i : in.support) in.support_cleared = in.support_cleared || !bit(in.msg, i);
        if (in.reduce_scatter && rng.chance(20)) in.rows_mutated = true;
        in.cell_mutations = rng.chance(15) ? 1 + static_cast<int>(rng.below(3)) : 0;
        const bool pristine = in.msg == original && !in.rows_mutated;

        // The receiver's steps, as the collectives run them.
        sketch_support::Fault fault;
        Verdict verdict = Verdict::Decode;
        const std::size_t tail = sketch_support::tail_offset(in.n);
        const bool tail_ok = sketch_support::check_tail(in.msg.data() + tail, in.n, &fault);
        std::uint64_t m = 0;
        if (in.reduce_scatter) {
            m = tail_ok ? sketch::rows_per_table(in.msg.data(), in.n, in.load) : sketch_support::kRowsMalformed;
            if (in.rows_mutated) m = rows_boundary(rng, m);  // what the MPI_MAX gave every rank
            sketch_support::Fault rows_fault;
            if (tail_ok && !sketch_support::check_rows(m, &rows_fault)) fault = rows_fault;
            if (!tail_ok || fault.field == sketch_support::Field::Rows) verdict = Verdict::Reject;
        } else if (!tail_ok) {
            verdict = Verdict::Reject;
        } else {
            m = sketch::rows_per_table(in.msg.data(), in.n, in.load);
        }
        sketch::Layout layout;
        layout.n = in.n;
        layout.seed = in.seed;
        if (verdict != Verdict::Reject) {
            layout.m = static_cast<std::uint32_t>(m);
            const std::size_t w = in.wide ? sizeof(double) : sizeof(float);
            if (in.msg[sketch_support::flag_offset(in.n)] != 0 ||
                layout.cells() * w + sketch_support::message_bytes(in.n) > in.n * dtype_size(in.dtype))
                verdict = Verdict::Dense;
        }

        // The reference verdict.
        sketch_support::Field expect = reference_tail(in);
        if (expect == sketch_support::Field::None && in.reduce_scatter && (m < 1 || m > 1398101))
            expect = sketch_support::Field::Rows;
        if ((verdict == Verdict::Reject) != (expect != sketch_support::Field::None) || fault.field != expect) {
            char what[128];
            std::snprintf(what, sizeof what, "fault %s; the reference: %s", field_name(fault.field),
                          field_name(expect));
            failed(what, in.msg, sketch_support::describe(fault));
        }
        if (verdict == Verdict::Reject && sketch_support::describe(fault).empty())
            failed("a rejection without a message", in.msg, "");
        if (pristine && verdict == Verdict::Reject)
            failed("an unmutated input was rejected", in.msg, sketch_support::describe(fault));
        if (pristine) ++unmutated;

        switch (verdict) {
        case Verdict::Reject:
            ++rejected;
            ++faults[field_name(fault.field)];
            break;
        case Verdict::Dense: ++dense; break;
        case Verdict::Decode:
            if (in.wide) decode_and_check<double>(in, layout, rng, &exact, &estimated);
            else decode_and_check<float>(in, layout, rng, &exact, &estimated);
            ++decoded;
            break;
        }
    }
    std::printf("cc_coll_fuzz_sketch_support: seed %" PRIu64 ", %" PRIu64 " inputs: %" PRIu64 " decoded (%" PRIu64
                " compared value by value, %" PRIu64 " with elements left to the estimate), %" PRIu64 " dense, %" PRIu64
                " rejected; %" PRIu64 " unmutated; coded support messages: %" PRIu64 " accepted, %" PRIu64
                " rejected; %zu kinds of fault in all; no failure\n",
                g_seed, inputs, decoded, exact, estimated, dense, rejected, unmutated, coded_accepted, coded_rejected,
                faults.size());
    if (verbose)
        for (const auto &f : faults) std::printf("  %8" PRIu64 "  %s\n", f.second, f.first.c_str());
    return 0;
}
