#include "wire/state_codec.hpp"

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail {

namespace {

constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// Key kinds (docs/wire.md, "State checkpoint").
constexpr std::uint8_t kKeyTensorAddress = 0;
constexpr std::uint8_t kKeyTensorExplicit = 1;
constexpr std::uint8_t kKeyChannelExplicit = 2;
constexpr std::uint8_t kKeyChannelTag = 3;

unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }

}  // namespace

std::uint64_t load_le(const unsigned char *p, int n)
{
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
    return v;
}

// ---- checksum ------------------------------------------------------------------

std::uint64_t fnv1a64(const void *data, std::size_t bytes, std::uint64_t hash)
{
    const auto *p = static_cast<const unsigned char *>(data);
    for (std::size_t i = 0; i < bytes; ++i) {
        hash ^= p[i];
        hash *= 0x100000001b3ull;
    }
    return hash;
}

std::uint64_t state_checksum(const unsigned char *blob, std::size_t bytes)
{
    const std::uint64_t h = fnv1a64(blob, kStateChecksumOffset);
    return fnv1a64(blob + kStateHeaderBytes, bytes - kStateHeaderBytes, h);
}

void store_state_checksum(unsigned char *blob, std::size_t bytes)
{
    const std::uint64_t sum = state_checksum(blob, bytes);
    for (int i = 0; i < 8; ++i) blob[kStateChecksumOffset + i] = static_cast<unsigned char>(sum >> (8 * i));
}

// ---- writer ----------------------------------------------------------------------

unsigned char *StateWriter::room(std::size_t n)
{
    const std::size_t at = pos_;
    pos_ += n;
    if (out_ == nullptr) return nullptr;
    if (pos_ > capacity_ || pos_ < at) {
        overflow_ = true;
        return nullptr;
    }
    return out_ + at;
}

void StateWriter::uint(std::uint64_t v, int n)
{
    unsigned char *p = room(static_cast<std::size_t>(n));
    if (p == nullptr) return;
    for (int i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

void StateWriter::bytes(const void *data, std::size_t n)
{
    unsigned char *p = room(n);
    if (p != nullptr && n > 0) std::memcpy(p, data, n);
}

void StateWriter::values(const float *v, std::size_t n)
{
    if (kLittleEndianHost) return bytes(v, n * sizeof(float));
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, &v[i], sizeof bits);
        u32(bits);
    }
}

void StateWriter::values(const double *v, std::size_t n)
{
    if (kLittleEndianHost) return bytes(v, n * sizeof(double));
    for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t bits;
        std::memcpy(&bits, &v[i], sizeof bits);
        u64(bits);
    }
}

cc_coll_status_t StateWriter::device_values(const void *v, std::size_t n, std::size_t work, const char *fn)
{
    if (measuring()) {
        pos_ += n * work;
        return CC_COLL_OK;
    }
    if (work == sizeof(double)) {
        std::vector<double> host(n);
        CC_COLL_TRY(gpu::copy_to_host(host.data(), v, n * work, fn));
        values(host.data(), n);
    } else {
        std::vector<float> host(n);
        CC_COLL_TRY(gpu::copy_to_host(host.data(), v, n * work, fn));
        values(host.data(), n);
    }
    return CC_COLL_OK;
}

std::size_t StateWriter::placeholder_u64()
{
    const std::size_t at = pos_;
    u64(0);
    return at;
}

void StateWriter::patch_u64(std::size_t at, std::uint64_t v)
{
    if (out_ == nullptr || at + 8 > capacity_) return;
    for (int i = 0; i < 8; ++i) out_[at + i] = static_cast<unsigned char>(v >> (8 * i));
}

// ---- reader ----------------------------------------------------------------------

cc_coll_status_t StateReader::malformed(const char *fmt, ...) const
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return fail(CC_COLL_ERR_INVALID_ARG, "%s: malformed state blob: %s%s%s (at byte %zu); nothing was changed", fn_,
                context_.c_str(), context_.empty() ? "" : ": ", text, offset());
}

cc_coll_status_t StateReader::need(std::uint64_t n, const char *what) const
{
    if (n <= remaining()) return CC_COLL_OK;
    return malformed("%s needs %llu bytes but only %zu remain (truncated or corrupt)", what, ull(n), remaining());
}

cc_coll_status_t StateReader::uint(std::uint64_t *v, int n, const char *what)
{
    CC_COLL_TRY(need(static_cast<std::uint64_t>(n), what));
    *v = load_le(data_ + pos_, n);
    pos_ += static_cast<std::size_t>(n);
    return CC_COLL_OK;
}

cc_coll_status_t StateReader::u8(std::uint8_t *v, const char *what)
{
    std::uint64_t x = 0;
    CC_COLL_TRY(uint(&x, 1, what));
    *v = static_cast<std::uint8_t>(x);
    return CC_COLL_OK;
}

cc_coll_status_t StateReader::u16(std::uint16_t *v, const char *what)
{
    std::uint64_t x = 0;
    CC_COLL_TRY(uint(&x, 2, what));
    *v = static_cast<std::uint16_t>(x);
    return CC_COLL_OK;
}

cc_coll_status_t StateReader::u32(std::uint32_t *v, const char *what)
{
    std::uint64_t x = 0;
    CC_COLL_TRY(uint(&x, 4, what));
    *v = static_cast<std::uint32_t>(x);
    return CC_COLL_OK;
}

cc_coll_status_t StateReader::u64(std::uint64_t *v, const char *what) { return uint(v, 8, what); }

cc_coll_status_t StateReader::i32(std::int32_t *v, const char *what)
{
    std::uint32_t x = 0;
    CC_COLL_TRY(u32(&x, what));
    std::memcpy(v, &x, sizeof x);
    return CC_COLL_OK;
}

template <typename W>
cc_coll_status_t StateReader::values(std::uint64_t n, std::vector<W> *out, const char *what)
{
    if (n > remaining() / sizeof(W))
        return malformed("%s: %llu values of %zu bytes but only %zu bytes remain (truncated or corrupt)", what, ull(n),
                         sizeof(W), remaining());
    out->resize(static_cast<std::size_t>(n));
    const unsigned char *p = data_ + pos_;
    if (kLittleEndianHost) {
        if (n > 0) std::memcpy(out->data(), p, static_cast<std::size_t>(n) * sizeof(W));
    } else {
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t bits = load_le(p + i * sizeof(W), sizeof(W));
            if (sizeof(W) == sizeof(float)) {
                const auto b = static_cast<std::uint32_t>(bits);
                std::memcpy(&(*out)[i], &b, sizeof(W));
            } else {
                std::memcpy(&(*out)[i], &bits, sizeof(W));
            }
        }
    }
    pos_ += static_cast<std::size_t>(n) * sizeof(W);
    return CC_COLL_OK;
}

template cc_coll_status_t StateReader::values<float>(std::uint64_t, std::vector<float> *, const char *);
template cc_coll_status_t StateReader::values<double>(std::uint64_t, std::vector<double> *, const char *);

cc_coll_status_t StateReader::sub(std::uint64_t n, const char *what, StateReader *out)
{
    CC_COLL_TRY(need(n, what));
    *out = StateReader(data_ + pos_, static_cast<std::size_t>(n), offset(), fn_);
    out->context_ = context_;
    pos_ += static_cast<std::size_t>(n);
    return CC_COLL_OK;
}

// ---- section headers ---------------------------------------------------------------

void write_section_header(StateWriter &out, std::uint16_t kind, std::uint16_t version, std::size_t *length_at)
{
    out.u16(kind);
    out.u16(version);
    out.u32(0);
    *length_at = out.placeholder_u64();
}

cc_coll_status_t read_section_header(StateReader &in, SectionHeader *h)
{
    CC_COLL_TRY(in.need(kSectionHeaderBytes, "a section header"));
    CC_COLL_TRY(in.u16(&h->kind, "section kind"));
    CC_COLL_TRY(in.u16(&h->version, "section version"));
    CC_COLL_TRY(in.u32(&h->reserved, "section reserved field"));
    return in.u64(&h->bytes, "section length");
}

// ---- keys ------------------------------------------------------------------------

void write_state_key(StateWriter &out, const EfKey &key)
{
    std::uint8_t kind;
    if (key.peer >= 0) kind = key.by_tag ? kKeyChannelTag : kKeyChannelExplicit;
    else kind = key.is_explicit ? kKeyTensorExplicit : kKeyTensorAddress;
    const bool by_address = kind == kKeyTensorAddress;
    out.u8(kind);
    out.u8(by_address ? static_cast<std::uint8_t>(key.dtype) : 0);
    out.u16(0);
    out.i32(key.peer >= 0 ? key.peer : -1);
    out.u64(by_address ? static_cast<std::uint64_t>(key.address) : key.key);
    out.u64(by_address ? static_cast<std::uint64_t>(key.count) : 0);
}

cc_coll_status_t read_state_key(StateReader &in, KeyScope scope, int ranks, EfKey *key)
{
    std::uint8_t kind = 0, dtype = 0;
    std::uint16_t reserved = 0;
    std::int32_t peer = 0;
    std::uint64_t value = 0, count = 0;
    CC_COLL_TRY(in.need(kStateKeyBytes, "a key"));
    CC_COLL_TRY(in.u8(&kind, "key kind"));
    CC_COLL_TRY(in.u8(&dtype, "key dtype"));
    CC_COLL_TRY(in.u16(&reserved, "key reserved field"));
    CC_COLL_TRY(in.i32(&peer, "key peer"));
    CC_COLL_TRY(in.u64(&value, "key value"));
    CC_COLL_TRY(in.u64(&count, "key count"));
    if (kind > kKeyChannelTag) return in.malformed("key kind %u is not 0 to 3", kind);
    const bool channel = kind == kKeyChannelExplicit || kind == kKeyChannelTag;
    if (scope == KeyScope::Tensor && channel)
        return in.malformed("a point-to-point channel key (kind %u) where a tensor key belongs", kind);
    if (scope == KeyScope::Channel && !channel)
        return in.malformed("a tensor key (kind %u) where a point-to-point channel key belongs", kind);
    if (reserved != 0) return in.malformed("key reserved field is %u, not 0", reserved);
    *key = EfKey{};
    if (channel) {
        if (peer < 0 || peer >= ranks)
            return in.malformed("channel key names peer %d, not a rank of this communicator of %d", peer, ranks);
        if (dtype != 0 || count != 0)
            return in.malformed("channel key with dtype %u and count %llu (both must be 0)", dtype, ull(count));
        if (kind == kKeyChannelTag && value > static_cast<std::uint64_t>(INT_MAX))
            return in.malformed("channel key by tag %llu, above the largest tag", ull(value));
        const bool by_tag = kind == kKeyChannelTag;
        *key = EfKey::channel(peer, !by_tag, value, static_cast<int>(by_tag ? value : 0));
        return CC_COLL_OK;
    }
    if (peer != -1) return in.malformed("tensor key with peer %d (must be -1)", peer);
    if (kind == kKeyTensorExplicit) {
        if (dtype != 0 || count != 0)
            return in.malformed("ef_key %llu with dtype %u and count %llu (both must be 0)", ull(value), dtype,
                                ull(count));
        *key = EfKey::from(true, value, nullptr, 0, CC_COLL_F32);
        return CC_COLL_OK;
    }
    if (!dtype_valid(dtype)) return in.malformed("tensor key with dtype %u, not a cc_coll_dtype_t value", dtype);
    if (count > static_cast<std::uint64_t>(INT_MAX))
        return in.malformed("tensor key with count %llu, above the largest count of a call", ull(count));
    if (value > static_cast<std::uint64_t>(UINTPTR_MAX))
        return in.malformed("tensor key with address 0x%llx, wider than this host's pointers", ull(value));
    key->address = static_cast<std::uintptr_t>(value);
    key->count = static_cast<std::size_t>(count);
    key->dtype = dtype;
    return CC_COLL_OK;
}

bool state_key_less(const EfKey &a, const EfKey &b)
{
    const auto fields = [](const EfKey &k) {
        return std::make_tuple(k.peer, k.by_tag, k.is_explicit, k.key, k.address, k.count, k.dtype);
    };
    return fields(a) < fields(b);
}

std::string state_key_text(const EfKey &k)
{
    char text[128];
    if (k.peer >= 0)
        std::snprintf(text, sizeof text, "channel (peer %d, %s %llu)", k.peer, k.by_tag ? "tag" : "ef_key",
                      ull(k.key));
    else if (k.is_explicit)
        std::snprintf(text, sizeof text, "ef_key %llu", ull(k.key));
    else
        std::snprintf(text, sizeof text, "recvbuf 0x%llx (%zu %s)", ull(k.address), k.count,
                      dtype_name(static_cast<cc_coll_dtype_t>(k.dtype)));
    return text;
}

}  // namespace cc_coll::detail
