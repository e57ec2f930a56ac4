// Seeded mutation fuzzing of the import of state checkpoints
// (cc_coll_state_import's import_state, dispatch/checkpoint.hpp), without MPI
// and without libFuzzer.
//
// Each input: a communicator of 1 to 4 ranks holding a random state
// (residuals keyed by ef_key or address in every dtype, LEP residuals of
// channels by tag or ef_key, LOWRANK entries of tensors and channels: call
// counts alone, or binary32 / binary64 factors with and without P), its
// exported blob, and 0 to 4 mutations: bit flips, random bytes, a 1-, 2-,
// 4- or 8-byte field at a random offset set to a boundary value, truncation,
// extension, a range deleted or repeated; half the time the body length and
// the checksum are then fixed up, so that the mutation reaches the checks
// behind them. The blob is copied into an allocation of exactly its size
// and imported into another communicator holding another random state (the
// same rank and size, or, now and then, another; sometimes with
// CC_COLL_EF_MAX_BYTES or CC_COLL_STATE_MAX_BYTES set). Asserted:
//   - rejected: the status is one an import documents (INVALID_ARG,
//     VERSION_MISMATCH, MISMATCH, NOT_SUPPORTED, EF_LIMIT), the message
//     names cc_coll_state_import, and the target's state is untouched (its
//     blob is the same before and after);
//   - accepted: the target's state is within its caps, and its blob
//     imports into a fresh communicator and exports again byte for byte;
//   - an unmutated blob into a matching communicator within the caps is
//     accepted and re-exports byte for byte; a mutated blob whose checksum
//     was not fixed up is rejected;
//   - the process does not crash (run it under the sanitizers for reads out
//     of bounds: tests/fuzz/README.md, "Fuzzing the state import").
//
//   cc_coll_fuzz_state_blob [--inputs N] [--seed S] [--verbose]
//
// Exit status 0 when every input passed; else 1 after printing the input's
// number, the seed and the blob in hex.
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "core/comm.hpp"
#include "core/config.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "dispatch/checkpoint.hpp"
#include "wire/state_codec.hpp"
#include "fuzz_rng.hpp"
#include "compressors/lowrank/lowrank_state.hpp"

using namespace cc_coll::detail;
using fuzz::Rng;

namespace {

std::uint64_t g_seed = 1;
std::uint64_t g_input = 0;

[[noreturn]] void failed(const char *what, const std::vector<unsigned char> &blob, const std::string &message)
{
    fuzz::report_failure(g_input, g_seed, what, "message", message, "blob", blob, 512);
}

std::shared_ptr<Comm> make_comm(int rank, int size, std::uint64_t ef_cap = 0, std::uint64_t state_cap = 0)
{
    Config config;
    config.ef_max_bytes = ef_cap;
    config.state_max_bytes = state_cap;
    return std::make_shared<Comm>(MPI_COMM_NULL, rank, size, config);
}

std::vector<unsigned char> blob_of(Comm &c)
{
    std::size_t size = 0;
    bool too_small = false;
    if (export_state(c, nullptr, &size, &too_small, "cc_coll_state_export") != CC_COLL_OK)
        failed("export (size query) failed", {}, last_error());
    std::vector<unsigned char> out(size);
    if (export_state(c, out.data(), &size, &too_small, "cc_coll_state_export") != CC_COLL_OK || size != out.size())
        failed("export failed", {}, last_error());
    return out;
}

// Imports from an allocation of exactly the blob's size.
cc_coll_status_t import_exact(Comm &c, const std::vector<unsigned char> &blob)
{
    std::unique_ptr<unsigned char[]> exact(new unsigned char[blob.size() > 0 ? blob.size() : 1]);
    if (!blob.empty()) std::memcpy(exact.get(), blob.data(), blob.size());
    return import_state(c, blob.empty() ? nullptr : exact.get(), blob.size(), "cc_coll_state_import");
}

std::size_t pick_count(Rng &rng)
{
    const std::size_t counts[] = {0, 1, 2, 3, 7, 16, 33, 100};
    return rng.chance(70) ? counts[rng.below(sizeof counts / sizeof counts[0])]
                          : static_cast<std::size_t>(rng.below(300));
}

EfKey tensor_key(Rng &rng, std::size_t count, cc_coll_dtype_t dtype)
{
    if (rng.chance(70)) return EfKey::from(true, rng.chance(50) ? rng.below(20) : rng.next(), nullptr, count, dtype);
    const auto address = static_cast<std::uintptr_t>(rng.chance(50) ? 0x1000 * (1 + rng.below(8)) : rng.next());
    return EfKey::from(false, 0, reinterpret_cast<const void *>(address), count, dtype);
}

EfKey channel_key(Rng &rng, int size)
{
    const int peer = static_cast<int>(rng.below(static_cast<std::uint64_t>(size)));
    if (rng.chance(50)) return EfKey::channel(peer, false, 0, static_cast<int>(rng.below(1000)));
    return EfKey::channel(peer, true, rng.chance(50) ? rng.below(20) : rng.next(), 0);
}

void add_residual(Rng &rng, EfStore &store, const EfKey &key, std::size_t count, cc_coll_dtype_t dtype)
{
    Residual *r = nullptr;
    if (store.acquire(key, count, dtype, &r) != CC_COLL_OK) return;  // a key reused with another count
    for (std::size_t i = 0; i < count; ++i) {
        if (dtype == CC_COLL_F64) r->f64[i] = rng.value();
        else r->f32[i] = static_cast<float>(rng.value());
    }
}

template <typename W>
void fill_factors(Rng &rng, LowRankState &s, bool with_p)
{
    if (with_p) {
        s.p<W>().resize(s.rows * static_cast<std::size_t>(s.rank));
        for (auto &v : s.p<W>()) v = static_cast<W>(rng.value());
    }
    s.q<W>().resize(s.cols * static_cast<std::size_t>(s.rank));
    for (auto &v : s.q<W>()) v = static_cast<W>(rng.value());
}

void add_lowrank(Rng &rng, LowRankStore &store, const EfKey &key)
{
    LowRankState *s = nullptr;
    if (store.acquire(key, 0, false, [](bool) { return std::string("fuzz"); }, &s) != CC_COLL_OK || !s->empty())
        return;  // over the cap, or a key drawn twice
    s->calls = rng.below(10);
    if (rng.chance(25)) {
        if (s->calls == 0) s->calls = 1;
        return;  // a 1-D tensor: a call count only
    }
    s->rows = 1 + static_cast<std::size_t>(rng.below(12));
    s->cols = 1 + static_cast<std::size_t>(rng.below(12));
    const std::size_t most = std::min<std::size_t>(std::min(s->rows, s->cols), 4);
    s->rank = 1 + static_cast<int>(rng.below(most));
    if (rng.chance(50)) fill_factors<float>(rng, *s, rng.chance(80));
    else fill_factors<double>(rng, *s, rng.chance(80));
}

void populate(Rng &rng, Comm &c)
{
    const int residuals = static_cast<int>(rng.below(5)), channels = static_cast<int>(rng.below(4));
    for (int i = 0; i < residuals; ++i) {
        const std::size_t n = pick_count(rng);
        const auto d = static_cast<cc_coll_dtype_t>(rng.below(4));
        add_residual(rng, c.ef(), tensor_key(rng, n, d), n, d);
    }
    for (int i = 0; i < channels; ++i) {
        const std::size_t n = pick_count(rng);
        add_residual(rng, c.lep(), channel_key(rng, c.size()), n, static_cast<cc_coll_dtype_t>(rng.below(4)));
    }
    const int tensors = static_cast<int>(rng.below(5)), lr_channels = static_cast<int>(rng.below(3));
    for (int i = 0; i < tensors; ++i) {
        const std::size_t n = pick_count(rng);
        add_lowrank(rng, lowrank_tensor_states(c), tensor_key(rng, n, static_cast<cc_coll_dtype_t>(rng.below(4))));
    }
    for (int i = 0; i < lr_channels; ++i) add_lowrank(rng, lowrank_channel_states(c), channel_key(rng, c.size()));
}

// The method-state bytes an import of `c`'s blob charges: each LOWRANK
// entry that holds something, and P and Q of its shape once it has factors.
std::uint64_t import_charge(Comm &c)
{
    std::uint64_t bytes = 0;
    const auto add = [&](const EfKey &, const LowRankState &s) {
        if (s.empty()) return;
        const bool f64 = !s.p_f64.empty() || !s.q_f64.empty();
        const bool factors = f64 || !s.p_f32.empty() || !s.q_f32.empty();
        bytes += kLowRankEntryBytes + (factors ? (s.rows + s.cols) * static_cast<std::uint64_t>(s.rank) *
                                                      (f64 ? sizeof(double) : sizeof(float))
                                               : 0);
    };
    lowrank_tensor_states(c).for_each(add);
    lowrank_channel_states(c).for_each(add);
    return bytes;
}

std::uint64_t field(const std::vector<unsigned char> &b, std::size_t at, int n)
{
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | b[at + static_cast<std::size_t>(i)];
    return v;
}

// A boundary value for a field whose well-formed value is `v`.
std::uint64_t boundary(Rng &rng, std::uint64_t v)
{
    const std::uint64_t values[] = {0,          1,           2,           3,         4,          8,
                                    v - 1,      v + 1,       v * 2,       v / 2,     0xffull,    0xffffull,
                                    0x7fffffffull, 0x80000000ull, 0xffffffffull, ~0ull, ~0ull / 2, 65536,
                                    65537,      rng.next()};
    return values[rng.below(sizeof values / sizeof values[0])];
}

void mutate(std::vector<unsigned char> &b, Rng &rng)
{
    const std::size_t n = b.size();
    switch (rng.below(7)) {
    case 0:  // a bit flip
        if (n > 0) b[rng.below(n)] ^= static_cast<unsigned char>(1u << rng.below(8));
        break;
    case 1:  // a random byte
        if (n > 0) b[rng.below(n)] = static_cast<unsigned char>(rng.next());
        break;
    case 2: {  // a field set to a boundary value
        const int width = 1 << rng.below(4);
        if (n < static_cast<std::size_t>(width)) break;
        const std::size_t at = rng.below(n - static_cast<std::size_t>(width) + 1);
        std::uint64_t old = 0;
        for (int i = width - 1; i >= 0; --i) old = old << 8 | b[at + static_cast<std::size_t>(i)];
        const std::uint64_t v = boundary(rng, old);
        for (int i = 0; i < width; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<unsigned char>(v >> (8 * i));
        break;
    }
    case 3:  // truncation
        b.resize(rng.below(n + 1));
        break;
    case 4: {  // extension
        const std::size_t extra = 1 + rng.below(24);
        for (std::size_t i = 0; i < extra; ++i) b.push_back(static_cast<unsigned char>(rng.next()));
        break;
    }
    case 5: {  // a range deleted
        if (n == 0) break;
        const std::size_t at = rng.below(n), len = 1 + rng.below(std::min<std::size_t>(n - at, 32));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + len));
        break;
    }
    default: {  // a range repeated
        if (n == 0) break;
        const std::size_t at = rng.below(n), len = 1 + rng.below(std::min<std::size_t>(n - at, 32));
        const std::vector<unsigned char> copy(b.begin() + static_cast<std::ptrdiff_t>(at),
                                              b.begin() + static_cast<std::ptrdiff_t>(at + len));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at + len), copy.begin(), copy.end());
        break;
    }
    }
}

// The body length and the checksum made right for the bytes as they are.
void fix_up(std::vector<unsigned char> &b)
{
    if (b.size() < kStateHeaderBytes) return;
    const std::uint64_t body = b.size() - kStateHeaderBytes;
    for (int i = 0; i < 8; ++i) b[24 + static_cast<std::size_t>(i)] = static_cast<unsigned char>(body >> (8 * i));
    const std::uint64_t sum = state_checksum(b.data(), b.size());
    for (int i = 0; i < 8; ++i)
        b[kStateChecksumOffset + static_cast<std::size_t>(i)] = static_cast<unsigned char>(sum >> (8 * i));
}

bool documented(cc_coll_status_t st)
{
    return st == CC_COLL_ERR_INVALID_ARG || st == CC_COLL_ERR_VERSION_MISMATCH || st == CC_COLL_ERR_MISMATCH ||
           st == CC_COLL_ERR_NOT_SUPPORTED || st == CC_COLL_ERR_EF_LIMIT;
}

// The kind of a rejection, for the summary: its status and the message
// without the function, the position in the blob, numbers and names.
std::string reason_class(cc_coll_status_t st, const std::string &message)
{
    std::string m = message;
    for (const char *prefix : {"cc_coll_state_import: ", "malformed state blob: "})
        if (m.rfind(prefix, 0) == 0) m = m.substr(std::strlen(prefix));
    if (m.rfind("section ", 0) == 0 || m.rfind("body: ", 0) == 0) m = m.substr(m.find(": ") + 2);
    m = m.substr(0, m.find(" (at byte"));
    m = m.substr(0, m.find("; nothing was changed"));
    const std::string name = status_string(st);
    std::string out = name.substr(0, name.find(':')) + ": ";
    // A quoted name (a method's, as the blob spells it) is one word.
    const std::size_t open = m.find('"'), close = m.rfind('"');
    if (open != std::string::npos && close > open) m = m.substr(0, open) + "\"#\"" + m.substr(close + 1);
    for (std::size_t i = 0; i < m.size(); ++i) {
        if (m.compare(i, 2, "0x") == 0) {
            i += 2;
            while (i < m.size() && std::isxdigit(static_cast<unsigned char>(m[i]))) ++i;
            --i;
            out += '#';
            continue;
        }
        const bool digit = m[i] >= '0' && m[i] <= '9';
        if (digit && out.back() == '#') continue;
        out += digit ? '#' : m[i];
    }
    return out;
}

}  // namespace

int main(int argc, char **argv)
{
    fuzz::DriverArgs args;
    args.inputs = 20000;
    if (!fuzz::parse_driver_args(argc, argv, &args)) return 2;
    g_seed = args.seed;
    Rng rng(g_seed);
    std::uint64_t accepted = 0, rejected = 0, unmutated = 0, unchecked = 0;
    std::map<std::string, std::uint64_t> reasons;
    for (g_input = 0; g_input < args.inputs; ++g_input) {
        const int size = 1 + static_cast<int>(rng.below(4));
        const int rank = static_cast<int>(rng.below(static_cast<std::uint64_t>(size)));
        auto source = make_comm(rank, size);
        populate(rng, *source);
        const std::vector<unsigned char> original = blob_of(*source);

        std::vector<unsigned char> blob = original;
        const int mutations = rng.chance(15) ? 0 : 1 + static_cast<int>(rng.below(4));
        for (int i = 0; i < mutations; ++i) mutate(blob, rng);
        const bool fixed = mutations > 0 && rng.chance(50);
        if (fixed) fix_up(blob);

        // The target: the same rank and size but now and then, caps now and
        // then, and a state of its own.
        int target_rank = rank, target_size = size;
        if (rng.chance(5)) {
            target_size = 1 + static_cast<int>(rng.below(4));
            target_rank = static_cast<int>(rng.below(static_cast<std::uint64_t>(target_size)));
        }
        const std::uint64_t ef_cap = rng.chance(10) ? 1 + rng.below(2000) : 0;
        const std::uint64_t state_cap = rng.chance(10) ? 1 + rng.below(4000) : 0;
        auto target = make_comm(target_rank, target_size, ef_cap, state_cap);
        populate(rng, *target);
        // The target's own state may pass its caps (set directly): only the
        // blob's is checked on import.
        const std::vector<unsigned char> before = blob_of(*target);

        clear_error();
        const cc_coll_status_t st = import_exact(*target, blob);
        const std::string message = last_error();
        const bool pristine = blob == original;
        const bool fits = (ef_cap == 0 || (source->ef().bytes() <= ef_cap && source->lep().bytes() <= ef_cap)) &&
                          (state_cap == 0 || import_charge(*source) <= state_cap);
        if (st != CC_COLL_OK) {
            ++rejected;
            ++reasons[reason_class(st, message)];
            if (!documented(st)) failed("an undocumented status", blob, message);
            if (message.rfind("cc_coll_state_import: ", 0) != 0)
                failed("the message does not name cc_coll_state_import", blob, message);
            if (blob_of(*target) != before) failed("a rejected import changed the state", blob, message);
            if (pristine && target_rank == rank && target_size == size && fits)
                failed("an unmutated blob into a matching communicator was rejected", blob, message);
            continue;
        }
        ++accepted;
        if (mutations > 0 && !fixed && !pristine)
            failed("a mutated blob with its checksum unfixed was accepted", blob, "");
        if (field(blob, 16, 4) != static_cast<std::uint64_t>(target_rank) ||
            field(blob, 20, 4) != static_cast<std::uint64_t>(target_size))
            failed("a blob of another rank was accepted", blob, "");
        if ((ef_cap != 0 && (target->ef().bytes() > ef_cap || target->lep().bytes() > ef_cap)) ||
            (state_cap != 0 && target->state_budget().bytes() > state_cap))
            failed("an accepted import passes a cap", blob, "");
        const std::vector<unsigned char> again = blob_of(*target);
        if (pristine) {
            ++unmutated;
            if (target->state_budget().bytes() != import_charge(*source))
                failed("an unmutated blob charges other method-state bytes", blob, "");
            if (again != original) failed("an unmutated blob does not re-export byte for byte", blob, "");
        } else {
            ++unchecked;
        }
        auto fresh = make_comm(target_rank, target_size);
        if (import_exact(*fresh, again) != CC_COLL_OK)
            failed("the blob of an accepted import does not import", again, last_error());
        if (blob_of(*fresh) != again) failed("the blob of an accepted import does not re-export", again, "");
    }
    std::printf("cc_coll_fuzz_state_blob: seed %" PRIu64 ", %" PRIu64 " blobs: %" PRIu64 " accepted (%" PRIu64
                " unmutated, %" PRIu64 " mutated), %" PRIu64 " rejected with %zu kinds of reason; no failure\n",
                g_seed, args.inputs, accepted, unmutated, unchecked, rejected, reasons.size());
    if (args.verbose)
        for (const auto &r : reasons) std::printf("  %8" PRIu64 "  %s\n", r.second, r.first.c_str());
    return 0;
}
