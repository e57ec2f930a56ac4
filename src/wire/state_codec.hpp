// The byte format of state checkpoints (docs/wire.md, "State checkpoint"):
// the blob's header constants and checksum, a little-endian writer and a
// bounds-checked reader, section headers and keys. What a blob holds and
// how an import checks and installs it is the checkpoint's
// (dispatch/checkpoint.hpp); each method with per-tensor state of its own
// writes and reads its section's payload with the writer and reader below,
// through its descriptor (core/method.hpp: state_export, state_parse,
// state_install).
//
// Every field is little-endian whatever the host's byte order, and floating
// point values are IEEE-754 bit patterns, so a blob means the same on every
// host. Reading checks every length against the bytes that remain before it
// allocates or copies anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cc_coll.h"

namespace cc_coll::detail {

struct EfKey;

static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "the state blob stores IEEE-754 binary32 and binary64 bit patterns");

// The blob's header (docs/wire.md, "State checkpoint").
constexpr std::uint32_t kStateMagic = 0x53534343;  // bytes "CCSS" in little-endian order
constexpr std::uint16_t kStateFormatVersion = 1;
constexpr std::size_t kStateHeaderBytes = 48;
constexpr std::size_t kStateChecksumOffset = 40;
// Section kinds.
constexpr std::uint16_t kSectionResiduals = 1;     // collective residuals (Comm::ef)
constexpr std::uint16_t kSectionLepResiduals = 2;  // point-to-point LEP residuals (Comm::lep)
constexpr std::uint16_t kSectionMethod = 3;        // one method's own state
constexpr std::uint16_t kSectionRail = 4;          // a hierarchical communicator's rail: a whole nested blob
constexpr std::uint16_t kRailSectionVersion = 1;
constexpr std::uint16_t kResidualSectionVersion = 1;
constexpr std::size_t kSectionHeaderBytes = 16;
constexpr std::size_t kStateKeyBytes = 24;
// Memory kinds of a record's values.
constexpr std::uint8_t kStateHostMemory = 0;
constexpr std::uint8_t kStateDeviceMemory = 1;

// FNV-1a, 64 bits, continued from `hash` (start: kFnvOffset).
constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
std::uint64_t fnv1a64(const void *data, std::size_t bytes, std::uint64_t hash = kFnvOffset);
// The checksum of a blob: FNV-1a 64 over every byte but the checksum field's.
std::uint64_t state_checksum(const unsigned char *blob, std::size_t bytes);
// Computes a whole blob's checksum and stores it in its header.
void store_state_checksum(unsigned char *blob, std::size_t bytes);
// The little-endian unsigned integer of n bytes (1 to 8) at p.
std::uint64_t load_le(const unsigned char *p, int n);

// Appends fields to a blob, or only counts their bytes (a null output: the
// size query and the first of export's two passes).
class StateWriter {
public:
    StateWriter(unsigned char *out, std::size_t capacity) : out_(out), capacity_(capacity) {}

    bool measuring() const { return out_ == nullptr; }
    std::size_t size() const { return pos_; }
    // False when a write passed the capacity (the two passes disagreed).
    bool overflowed() const { return overflow_; }

    void u8(std::uint8_t v) { uint(v, 1); }
    void u16(std::uint16_t v) { uint(v, 2); }
    void u32(std::uint32_t v) { uint(v, 4); }
    void u64(std::uint64_t v) { uint(v, 8); }
    void i32(std::int32_t v) { uint(static_cast<std::uint32_t>(v), 4); }
    void bytes(const void *data, std::size_t n);
    // n binary32 / binary64 values.
    void values(const float *v, std::size_t n);
    void values(const double *v, std::size_t n);
    // n values of `work` bytes each (4 or 8) in device memory, copied down.
    cc_coll_status_t device_values(const void *v, std::size_t n, std::size_t work, const char *fn);
    // The bytes written from offset `at` on (nullptr while measuring).
    unsigned char *written(std::size_t at) { return out_ == nullptr ? nullptr : out_ + at; }
    // A u64 written later (a section's length): its offset.
    std::size_t placeholder_u64();
    void patch_u64(std::size_t at, std::uint64_t v);

private:
    void uint(std::uint64_t v, int n);
    unsigned char *room(std::size_t n);

    unsigned char *out_;
    std::size_t capacity_;
    std::size_t pos_ = 0;
    bool overflow_ = false;
};

// Reads fields of a blob. Each read checks that the bytes are there: past
// the end it fails with CC_COLL_ERR_INVALID_ARG, naming `what`, the offset
// in the blob and the context (set_context) in the message.
class StateReader {
public:
    StateReader(const unsigned char *data, std::size_t size, std::size_t base, const char *fn)
        : data_(data), size_(size), base_(base), fn_(fn)
    {
    }

    std::size_t remaining() const { return size_ - pos_; }
    // The bytes not read yet (a nested blob's).
    const unsigned char *here() const { return data_ + pos_; }
    std::size_t offset() const { return base_ + pos_; }  // in the whole blob
    const char *fn() const { return fn_; }
    // Names what is being read in messages ("LOWRANK entry 3 of 7").
    void set_context(std::string context) { context_ = std::move(context); }
    const std::string &context() const { return context_; }

    cc_coll_status_t u8(std::uint8_t *v, const char *what);
    cc_coll_status_t u16(std::uint16_t *v, const char *what);
    cc_coll_status_t u32(std::uint32_t *v, const char *what);
    cc_coll_status_t u64(std::uint64_t *v, const char *what);
    cc_coll_status_t i32(std::int32_t *v, const char *what);
    // n values of W (float or double) into *out, after checking that the
    // blob holds them.
    template <typename W>
    cc_coll_status_t values(std::uint64_t n, std::vector<W> *out, const char *what);
    // A reader over the next n bytes (a section's payload), which this one
    // skips.
    cc_coll_status_t sub(std::uint64_t n, const char *what, StateReader *out);
    // n at most what remains, else the truncation error.
    cc_coll_status_t need(std::uint64_t n, const char *what) const;
    // CC_COLL_ERR_INVALID_ARG with the function, context and offset in front
    // of the message (printf-style).
    cc_coll_status_t malformed(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));

private:
    cc_coll_status_t uint(std::uint64_t *v, int n, const char *what);

    const unsigned char *data_;
    std::size_t size_;
    std::size_t base_;
    std::size_t pos_ = 0;
    const char *fn_;
    std::string context_;
};

// A section's 16-byte header: kind, payload version, reserved, payload
// bytes.
struct SectionHeader {
    std::uint16_t kind = 0;
    std::uint16_t version = 0;
    std::uint32_t reserved = 0;
    std::uint64_t bytes = 0;
};
// Writes a section header whose length is patched in later, at *length_at.
void write_section_header(StateWriter &out, std::uint16_t kind, std::uint16_t version, std::size_t *length_at);
// Reads a section header's fields (their values unchecked).
cc_coll_status_t read_section_header(StateReader &in, SectionHeader *h);

// A residual key: 24 bytes (docs/wire.md). Keys of tensors (kind 0 by
// address, 1 by ef_key) and of point-to-point channels (2 by ef_key, 3 by
// tag).
void write_state_key(StateWriter &out, const EfKey &key);
enum class KeyScope { Tensor, Channel, Any };
// Reads and checks a key of `scope`; a channel's peer must be a rank of a
// communicator of `ranks` ranks.
cc_coll_status_t read_state_key(StateReader &in, KeyScope scope, int ranks, EfKey *key);
// Orders keys as export writes them (so one state gives one blob).
bool state_key_less(const EfKey &a, const EfKey &b);
// Names a key in messages.
std::string state_key_text(const EfKey &key);

// What a method's state_parse produced from its section: its state, not
// yet installed, and the bytes it will charge to the StateBudget.
struct StagedState {
    std::shared_ptr<void> state;
    std::uint64_t bytes = 0;
};

}  // namespace cc_coll::detail
