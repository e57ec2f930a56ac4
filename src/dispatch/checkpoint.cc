#include "dispatch/checkpoint.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "core/method.hpp"
#include "gpu/gpu.hpp"
#include "wire/state_codec.hpp"

namespace cc_coll::detail {

namespace {

unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }

std::size_t work_size_of(cc_coll_dtype_t dtype) { return dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float); }

// A residual section's payload: the number of records, then per record its
// key, dtype, memory kind, count and values in the work type.
cc_coll_status_t write_residuals(const EfStore &store, StateWriter &out, const char *fn)
{
    std::vector<std::pair<EfKey, const Residual *>> all;
    store.for_each([&](const EfKey &k, const Residual &r) { all.emplace_back(k, &r); });
    std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) { return state_key_less(a.first, b.first); });
    out.u64(all.size());
    for (const auto &kr : all) {
        const Residual &r = *kr.second;
        write_state_key(out, kr.first);
        out.u8(static_cast<std::uint8_t>(r.dtype));
        out.u8(r.on_device() ? kStateDeviceMemory : kStateHostMemory);
        out.u16(0);
        out.u32(0);
        out.u64(r.count);
        if (r.on_device()) {
            CC_COLL_TRY(out.device_values(r.device.get(), r.count, r.work_size(), fn));
        } else if (r.dtype == CC_COLL_F64) {
            out.values(r.f64.data(), r.f64.size());
        } else {
            out.values(r.f32.data(), r.f32.size());
        }
    }
    return CC_COLL_OK;
}

// Reads a residual section into `out`, checking every record; *bytes: the
// memory the residuals will hold.
cc_coll_status_t read_residuals(StateReader &in, KeyScope scope, int ranks, EfStore::Map *out, std::uint64_t *bytes)
{
    const std::string section = in.context();
    std::uint64_t n = 0;
    CC_COLL_TRY(in.u64(&n, "the number of residuals"));
    constexpr std::uint64_t kRecordBytes = kStateKeyBytes + 16;
    if (n > in.remaining() / kRecordBytes)
        return in.malformed("%llu residuals cannot fit in the %zu bytes that remain", ull(n), in.remaining());
    out->reserve(static_cast<std::size_t>(n));
    *bytes = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        in.set_context(section + ", residual " + std::to_string(i) + " of " + std::to_string(n));
        EfKey key;
        CC_COLL_TRY(read_state_key(in, scope, ranks, &key));
        std::uint8_t dtype = 0, memory = 0;
        std::uint16_t r16 = 0;
        std::uint32_t r32 = 0;
        std::uint64_t count = 0;
        CC_COLL_TRY(in.u8(&dtype, "residual dtype"));
        CC_COLL_TRY(in.u8(&memory, "residual memory kind"));
        CC_COLL_TRY(in.u16(&r16, "residual reserved field"));
        CC_COLL_TRY(in.u32(&r32, "residual reserved field"));
        CC_COLL_TRY(in.u64(&count, "residual count"));
        if (!dtype_valid(dtype)) return in.malformed("residual dtype %u is not a cc_coll_dtype_t value", dtype);
        if (memory > kStateDeviceMemory) return in.malformed("residual memory kind %u is not 0 or 1", memory);
        if (memory == kStateDeviceMemory && scope == KeyScope::Channel)
            return in.malformed("a LEP residual in device memory (point-to-point channels keep theirs in host "
                                "memory)");
        if (r16 != 0 || r32 != 0) return in.malformed("residual reserved fields are not 0");
        if (count > static_cast<std::uint64_t>(INT_MAX))
            return in.malformed("residual count %llu is above the largest count of a call", ull(count));
        if (!key.is_explicit && (key.count != count || key.dtype != dtype))
            return in.malformed("the residual of %s holds %llu %s elements; a key by address names its count and "
                                "dtype",
                                state_key_text(key).c_str(), ull(count), dtype_name(static_cast<cc_coll_dtype_t>(dtype)));
        if (out->count(key) != 0) return in.malformed("a second residual of %s", state_key_text(key).c_str());
        Residual r;
        r.dtype = static_cast<cc_coll_dtype_t>(dtype);
        r.count = static_cast<std::size_t>(count);
        if (r.dtype == CC_COLL_F64) CC_COLL_TRY(in.values<double>(count, &r.f64, "residual values"));
        else CC_COLL_TRY(in.values<float>(count, &r.f32, "residual values"));
        if (memory == kStateDeviceMemory) {
            if (gpu::device_count() == 0)
                return fail(CC_COLL_ERR_NOT_SUPPORTED,
                            "%s: the state blob holds the residual of %s in device memory, and this process has no "
                            "usable CUDA device (a build without CUDA, or no GPU); nothing was changed",
                            in.fn(), state_key_text(key).c_str());
            cc_coll_status_t st = CC_COLL_OK;
            const std::size_t b = r.count * work_size_of(r.dtype);
            r.device = gpu::device_zeroed(b, &st);
            if (r.device == nullptr) return st;
            const void *host = r.dtype == CC_COLL_F64 ? static_cast<const void *>(r.f64.data())
                                                      : static_cast<const void *>(r.f32.data());
            CC_COLL_TRY(gpu::copy_to_device(r.device.get(), host, b, in.fn()));
            std::vector<float>().swap(r.f32);
            std::vector<double>().swap(r.f64);
        }
        *bytes += r.bytes();
        out->emplace(key, std::move(r));
    }
    if (in.remaining() != 0)
        return in.malformed("%zu bytes follow the last residual in the section", in.remaining());
    return CC_COLL_OK;
}

const char *section_name(std::uint16_t kind)
{
    switch (kind) {
    case kSectionResiduals: return "residuals";
    case kSectionLepResiduals: return "LEP residuals";
    case kSectionMethod: return "method state";
    case kSectionRail: return "rail state";
    }
    return "?";
}

constexpr std::size_t kMaxMethodName = 64;

// One method's staged state, waiting for the whole blob to pass.
struct StagedMethod {
    const Method *method = nullptr;
    StagedState staged;
};

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

}  // namespace

// ---- export ----------------------------------------------------------------------

namespace {

cc_coll_status_t write_blob(Comm &comm, StateWriter &out, const char *fn)
{
    const auto &ms = methods();
    std::uint32_t sections = 2;
    for (const Method *m : ms)
        if (m->state_export != nullptr) ++sections;
    const NodeTopology *topo = comm.topology();
    Comm *rail = topo != nullptr ? topo->rail.get() : nullptr;
    if (rail != nullptr) ++sections;
    const std::size_t start = out.size();  // a nested blob starts inside its parent
    out.u32(kStateMagic);
    out.u16(kStateFormatVersion);
    out.u16(static_cast<std::uint16_t>(kStateHeaderBytes));
    out.u16(CC_COLL_VERSION_MAJOR);
    out.u16(CC_COLL_VERSION_MINOR);
    out.u16(CC_COLL_VERSION_PATCH);
    out.u16(0);
    out.u32(static_cast<std::uint32_t>(comm.rank()));
    out.u32(static_cast<std::uint32_t>(comm.size()));
    const std::size_t body_at = out.placeholder_u64();
    out.u32(sections);
    out.u32(0);
    out.u64(0);  // the checksum, filled in once the body is written
    std::size_t length_at = 0;
    struct Store {
        std::uint16_t kind;
        const EfStore *store;
    };
    for (const Store &s : {Store{kSectionResiduals, &comm.ef()}, Store{kSectionLepResiduals, &comm.lep()}}) {
        write_section_header(out, s.kind, kResidualSectionVersion, &length_at);
        const std::size_t begin = out.size();
        CC_COLL_TRY(write_residuals(*s.store, out, fn));
        out.patch_u64(length_at, out.size() - begin);
    }
    for (const Method *m : ms) {
        if (m->state_export == nullptr) continue;
        write_section_header(out, kSectionMethod, m->state_version, &length_at);
        const std::size_t begin = out.size();
        const std::size_t name_length = std::strlen(m->name);
        out.u16(static_cast<std::uint16_t>(name_length));
        out.bytes(m->name, name_length);
        CC_COLL_TRY(m->state_export(comm, out));
        out.patch_u64(length_at, out.size() - begin);
    }
    if (rail != nullptr) {
        // The shards' state of a hierarchical communicator: the rail's own
        // blob, checksum included, nested whole.
        write_section_header(out, kSectionRail, kRailSectionVersion, &length_at);
        const std::size_t begin = out.size();
        CC_COLL_TRY(write_blob(*rail, out, fn));
        if (unsigned char *nested = out.written(begin); nested != nullptr && !out.overflowed())
            store_state_checksum(nested, out.size() - begin);
        out.patch_u64(length_at, out.size() - begin);
    }
    out.patch_u64(body_at, out.size() - start - kStateHeaderBytes);
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t export_state(Comm &comm, void *buf, std::size_t *size, bool *too_small, const char *fn)
{
    *too_small = false;
    StateWriter measure(nullptr, 0);
    CC_COLL_TRY(write_blob(comm, measure, fn));
    const std::size_t need = measure.size();
    if (buf == nullptr) {
        *size = need;
        return CC_COLL_OK;
    }
    if (*size < need) {
        const std::size_t given = *size;
        *size = need;
        *too_small = true;
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: the buffer of %zu bytes is too small for the state blob of %zu bytes (*size now holds "
                    "the size needed)",
                    fn, given, need);
    }
    auto *bytes = static_cast<unsigned char *>(buf);
    StateWriter out(bytes, need);
    CC_COLL_TRY(write_blob(comm, out, fn));
    if (out.overflowed() || out.size() != need)
        return fail(CC_COLL_ERR_INTERNAL, "%s: the state blob took %zu bytes, not the %zu measured", fn, out.size(),
                    need);
    store_state_checksum(bytes, need);
    *size = need;
    return CC_COLL_OK;
}

// ---- import ----------------------------------------------------------------------

namespace {

// A whole blob, read and checked, not yet installed.
struct StagedBlob {
    EfStore::Map residuals, lep;
    std::uint64_t residual_bytes = 0, lep_bytes = 0;
    std::vector<StagedMethod> staged;
    std::unique_ptr<StagedBlob> rail;  // a hierarchical communicator's rail section
};

cc_coll_status_t parse_blob(Comm &comm, const unsigned char *blob, std::size_t size, const char *fn,
                            StagedBlob *out)
{
    // The header, field by field: what identifies the blob first, so that
    // another file or another format version is named as such.
    if (size < 4 || load_le(blob, 4) != kStateMagic) {
        if (size >= 4 && load_le(blob, 4) == __builtin_bswap32(kStateMagic))
            return fail(CC_COLL_ERR_INVALID_ARG,
                        "%s: not a libcc_coll state blob: its magic is byte-swapped (written with the other byte "
                        "order by a foreign tool); nothing was changed",
                        fn);
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: not a libcc_coll state blob (%zu bytes%s; a blob starts with the magic bytes \"CCSS\"); "
                    "nothing was changed",
                    fn, size, size < 4 ? ", shorter than the magic" : ", wrong magic");
    }
    if (size < 6)
        return fail(CC_COLL_ERR_INVALID_ARG, "%s: truncated state blob: %zu bytes, no format version; nothing was "
                    "changed", fn, size);
    const auto version = static_cast<std::uint16_t>(load_le(blob + 4, 2));
    if (version != kStateFormatVersion)
        return fail(CC_COLL_ERR_VERSION_MISMATCH,
                    "%s: the state blob has format version %u; this library (%d.%d.%d) reads version %u; nothing was "
                    "changed",
                    fn, version, CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR, CC_COLL_VERSION_PATCH,
                    kStateFormatVersion);
    if (size < kStateHeaderBytes)
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: truncated state blob: %zu bytes, shorter than its %zu-byte header; nothing was changed", fn,
                    size, kStateHeaderBytes);
    const auto header_bytes = load_le(blob + 6, 2);
    const std::uint64_t body = load_le(blob + 24, 8);
    if (header_bytes != kStateHeaderBytes)
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: malformed state blob: header of %llu bytes, format version 1 has %zu; nothing was changed", fn,
                    ull(header_bytes), kStateHeaderBytes);
    if (body != size - kStateHeaderBytes)
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: %s state blob: %zu bytes, but its header says %llu (a %zu-byte header and a body of %llu); "
                    "nothing was changed",
                    fn, body > size - kStateHeaderBytes ? "truncated" : "malformed", size,
                    body > UINT64_MAX - kStateHeaderBytes ? ull(UINT64_MAX) : ull(body + kStateHeaderBytes),
                    kStateHeaderBytes, ull(body));
    const std::uint64_t stored = load_le(blob + kStateChecksumOffset, 8);
    const std::uint64_t sum = state_checksum(blob, size);
    if (stored != sum)
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: corrupt state blob: checksum 0x%016llx, but its bytes give 0x%016llx (FNV-1a 64); nothing "
                    "was changed",
                    fn, ull(stored), ull(sum));
    const auto major = static_cast<int>(load_le(blob + 8, 2));
    const auto minor = static_cast<int>(load_le(blob + 10, 2));
    const auto patch = static_cast<int>(load_le(blob + 12, 2));
    if (major != CC_COLL_VERSION_MAJOR)
        return fail(CC_COLL_ERR_VERSION_MISMATCH,
                    "%s: the state blob was written by libcc_coll %d.%d.%d; this library is %d.%d.%d, another major "
                    "version; nothing was changed",
                    fn, major, minor, patch, CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR, CC_COLL_VERSION_PATCH);
    if (load_le(blob + 14, 2) != 0 || load_le(blob + 36, 4) != 0)
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: malformed state blob: header flags 0x%04llx and reserved field 0x%08llx (both must be 0); "
                    "nothing was changed",
                    fn, ull(load_le(blob + 14, 2)), ull(load_le(blob + 36, 4)));
    const auto rank = load_le(blob + 16, 4), ranks = load_le(blob + 20, 4);
    if (rank != static_cast<std::uint64_t>(comm.rank()) || ranks != static_cast<std::uint64_t>(comm.size()))
        return fail(CC_COLL_ERR_MISMATCH,
                    "%s: the state blob was exported by rank %llu of a communicator of %llu ranks, but this is rank "
                    "%d of %d: every rank restores the blob it exported, on a communicator of the same size; nothing "
                    "was changed",
                    fn, ull(rank), ull(ranks), comm.rank(), comm.size());
    const auto sections = static_cast<std::uint32_t>(load_le(blob + 32, 4));

    // The body: every section read and checked into staged state.
    StateReader in(blob + kStateHeaderBytes, size - kStateHeaderBytes, kStateHeaderBytes, fn);
    EfStore::Map &residuals = out->residuals, &lep = out->lep;
    std::uint64_t &residual_bytes = out->residual_bytes, &lep_bytes = out->lep_bytes;
    bool have_residuals = false, have_lep = false;
    std::vector<StagedMethod> &staged = out->staged;
    for (std::uint32_t i = 0; i < sections; ++i) {
        in.set_context("section " + std::to_string(i) + " of " + std::to_string(sections));
        SectionHeader h;
        CC_COLL_TRY(read_section_header(in, &h));
        if (h.kind < kSectionResiduals || h.kind > kSectionRail)
            return in.malformed("unknown section kind %u", h.kind);
        if (h.reserved != 0) return in.malformed("section reserved field is %u, not 0", h.reserved);
        StateReader payload(nullptr, 0, 0, fn);
        CC_COLL_TRY(in.sub(h.bytes, "the section's payload", &payload));
        if (h.kind == kSectionRail) {
            if (h.version != kRailSectionVersion)
                return fail(CC_COLL_ERR_VERSION_MISMATCH,
                            "%s: the state blob's rail section has version %u; this library reads version %u; "
                            "nothing was changed",
                            fn, h.version, kRailSectionVersion);
            if (out->rail != nullptr) return payload.malformed("a second rail section");
            const NodeTopology *topo = comm.topology();
            if (topo == nullptr || topo->rail == nullptr)
                return fail(CC_COLL_ERR_MISMATCH,
                            "%s: the state blob holds the shards' state of a hierarchical communicator, but this "
                            "communicator %s; create it with the same CC_COLL_HIERARCHY and nodes; nothing was "
                            "changed",
                            fn, topo == nullptr ? "is not hierarchical" : "owns no shard on this rank");
            out->rail = std::make_unique<StagedBlob>();
            CC_COLL_TRY(parse_blob(*topo->rail, payload.here(), payload.remaining(), fn, out->rail.get()));
            continue;
        }
        if (h.kind == kSectionResiduals || h.kind == kSectionLepResiduals) {
            const bool is_lep = h.kind == kSectionLepResiduals;
            payload.set_context(std::string("section ") + std::to_string(i) + " (" + section_name(h.kind) + ")");
            if (h.version != kResidualSectionVersion)
                return fail(CC_COLL_ERR_VERSION_MISMATCH,
                            "%s: the state blob's %s section has version %u; this library reads version %u; nothing "
                            "was changed",
                            fn, section_name(h.kind), h.version, kResidualSectionVersion);
            bool &seen = is_lep ? have_lep : have_residuals;
            if (seen) return payload.malformed("a second %s section", section_name(h.kind));
            seen = true;
            CC_COLL_TRY(read_residuals(payload, is_lep ? KeyScope::Channel : KeyScope::Tensor, comm.size(),
                                       is_lep ? &lep : &residuals, is_lep ? &lep_bytes : &residual_bytes));
            continue;
        }
        // A method's section: its name, then its own payload.
        std::uint16_t name_length = 0;
        CC_COLL_TRY(payload.u16(&name_length, "method name length"));
        if (name_length == 0 || name_length > kMaxMethodName)
            return payload.malformed("method name of %u bytes (1 to %zu)", name_length, kMaxMethodName);
        CC_COLL_TRY(payload.need(name_length, "the method name"));
        std::string name(name_length, '\0');
        for (auto &c : name) {
            std::uint8_t b = 0;
            CC_COLL_TRY(payload.u8(&b, "the method name"));
            if (b < 0x21 || b > 0x7e) return payload.malformed("method name byte 0x%02x is not printable", b);
            c = static_cast<char>(b);
        }
        const Method *m = find_method_by_name(name);
        if (m == nullptr || m->state_parse == nullptr)
            return fail(CC_COLL_ERR_NOT_SUPPORTED,
                        "%s: the state blob holds state of method \"%s\", which this library %s; nothing was changed",
                        fn, name.c_str(), m == nullptr ? "does not know" : "keeps none of");
        for (const StagedMethod &s : staged)
            if (s.method == m) return payload.malformed("a second state section of method \"%s\"", m->name);
        payload.set_context(std::string("section ") + std::to_string(i) + " (" + m->name + " state)");
        StagedMethod sm;
        sm.method = m;
        CC_COLL_TRY(m->state_parse(comm, h.version, payload, &sm.staged));
        if (payload.remaining() != 0)
            return payload.malformed("%zu bytes follow the method's state in its section", payload.remaining());
        staged.push_back(std::move(sm));
    }
    if (in.remaining() != 0) {
        in.set_context("body");
        return in.malformed("%zu bytes follow the last of the %u sections", in.remaining(), sections);
    }
    return CC_COLL_OK;
}

// The caps, on the state as a whole, before anything changes.
cc_coll_status_t check_caps(Comm &comm, const StagedBlob &b, const char *fn)
{
    const std::uint64_t residual_bytes = b.residual_bytes, lep_bytes = b.lep_bytes;
    const std::vector<StagedMethod> &staged = b.staged;
    const std::uint64_t ef_cap = comm.ef().max_bytes();
    for (const auto &[bytes, what] : {std::pair<std::uint64_t, const char *>{residual_bytes, "collective residuals"},
                                      std::pair<std::uint64_t, const char *>{lep_bytes, "LEP residuals"}})
        if (ef_cap != 0 && bytes > ef_cap)
            return fail(CC_COLL_ERR_EF_LIMIT,
                        "%s: the state blob's %s hold %llu bytes, over this communicator's CC_COLL_EF_MAX_BYTES = "
                        "%llu; nothing was changed: raise the cap",
                        fn, what, ull(bytes), ull(ef_cap));
    std::uint64_t state_bytes = 0;
    for (const StagedMethod &s : staged) state_bytes = saturating_add(state_bytes, s.staged.bytes);
    const std::uint64_t state_cap = comm.state_budget().max_bytes();
    if (state_cap != 0 && state_bytes > state_cap)
        return fail(CC_COLL_ERR_EF_LIMIT,
                    "%s: the state blob's method state needs %llu bytes, over this communicator's "
                    "CC_COLL_STATE_MAX_BYTES = %llu; nothing was changed: raise the cap",
                    fn, ull(state_bytes), ull(state_cap));

    return CC_COLL_OK;
}

// Replaces the state. Cannot fail.
void install(Comm &comm, StagedBlob &b)
{
    comm.ef().replace_all(std::move(b.residuals));
    comm.lep().replace_all(std::move(b.lep));
    reset_method_states(comm, nullptr);
    for (StagedMethod &s : b.staged) s.method->state_install(comm, s.staged);
}

}  // namespace

cc_coll_status_t import_state(Comm &comm, const void *buf, std::size_t size, const char *fn)
{
    StagedBlob staged;
    CC_COLL_TRY(parse_blob(comm, static_cast<const unsigned char *>(buf), size, fn, &staged));
    CC_COLL_TRY(check_caps(comm, staged, fn));
    const NodeTopology *topo = comm.topology();
    Comm *rail = topo != nullptr ? topo->rail.get() : nullptr;
    if (staged.rail != nullptr) CC_COLL_TRY(check_caps(*rail, *staged.rail, fn));
    // Everything checked: replace the state (a hierarchical communicator's
    // rail too: with none in the blob, its shards' state is emptied).
    install(comm, staged);
    if (rail != nullptr) {
        StagedBlob empty;
        install(*rail, staged.rail != nullptr ? *staged.rail : empty);
    }
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
