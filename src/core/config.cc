#include "core/config.hpp"
#include "core/parallel.hpp"
#include "core/method.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

namespace cc_coll::detail {

std::string trim_lower(const std::string &text)
{
    std::size_t b = 0, e = text.size();
    while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
    std::string s = text.substr(b, e - b);
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool parse_u64(const std::string &text, std::uint64_t *out)
{
    const std::string s = trim_lower(text);
    errno = 0;
    char *end = nullptr;
    if (s.empty() || s[0] == '-') return false;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 0);
    if (end != s.c_str() + s.size() || errno != 0) return false;
    *out = v;
    return true;
}

namespace {



bool apply_method(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_method(text, &cfg->method)) return true;
    *why = "expected one of: " + method_names();
    return false;
}



bool apply_density(const std::string &text, Config *cfg, std::string *why)
{
    double d = 0;
    if (parse_double(text, &d) && density_valid(d)) {
        cfg->density = d;
        return true;
    }
    *why = "expected a number in (0, 1]";
    return false;
}

bool apply_ef(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_bool(text, &cfg->ef)) return true;
    *why = "expected 1/0, true/false, yes/no or on/off";
    return false;
}




bool apply_seed(const std::string &text, Config *cfg, std::string *why)
{
    const std::string s = trim_lower(text);
    errno = 0;
    char *end = nullptr;
    const unsigned long long v = s.empty() || s[0] == '-' ? 0 : std::strtoull(s.c_str(), &end, 0);
    if (!s.empty() && s[0] != '-' && end == s.c_str() + s.size() && errno == 0) {
        cfg->seed = v;
        return true;
    }
    *why = "expected an unsigned 64-bit integer (decimal, or 0x hexadecimal)";
    return false;
}

bool apply_ef_max_bytes(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_bytes(text, &cfg->ef_max_bytes)) return true;
    *why = "expected a byte count such as 0, 4096, 512M or 2G (0 = no cap)";
    return false;
}

bool apply_state_max_bytes(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_bytes(text, &cfg->state_max_bytes)) return true;
    *why = "expected a byte count such as 0, 4096, 512M or 2G (0 = no cap)";
    return false;
}

bool apply_log_level(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_log_level(text, &cfg->log_level)) return true;
    *why = "expected one of: none, error, info, debug";
    return false;
}

bool apply_cuda_transport(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"auto", "direct", "staged"};
    static const CudaTransport values[] = {CudaTransport::Auto, CudaTransport::Direct, CudaTransport::Staged};
    return apply_choice(text, names, values, &cfg->cuda_transport, why);
}

bool apply_cuda_chunk_bytes(const std::string &text, Config *cfg, std::string *why)
{
    std::uint64_t v = 0;
    if (parse_bytes(text, &v) && v >= 4096 && v <= (std::uint64_t{1} << 30)) {
        cfg->cuda_chunk_bytes = v;
        return true;
    }
    *why = "expected a byte count from 4K to 1G, such as 256K or 4M";
    return false;
}






bool apply_hierarchy(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"off", "on", "auto"};
    static const HierarchyMode values[] = {HierarchyMode::Off, HierarchyMode::On, HierarchyMode::Auto};
    return apply_choice(text, names, values, &cfg->hierarchy, why);
}

bool apply_node_sizes(const std::string &text, Config *cfg, std::string *why)
{
    std::vector<int> sizes;
    // The communicator's size is unknown here: check the syntax with a
    // count that any list fits, the sum at communicator creation.
    if (!text.empty() && !parse_node_sizes(text, -1, &sizes, why)) return false;
    cfg->node_sizes = text;
    return true;
}

bool apply_pipeline_bytes(const std::string &text, Config *cfg, std::string *why)
{
    std::uint64_t v = 0;
    if (parse_bytes(text, &v) && (v == 0 || (v >= (std::uint64_t{64} << 10) && v <= (std::uint64_t{1} << 31)))) {
        cfg->pipeline_bytes = v;
        return true;
    }
    *why = "expected 0 (off) or a byte count from 64K to 2G, such as 8M";
    return false;
}

bool apply_threads(const std::string &text, Config *cfg, std::string *why)
{
    const std::string s = trim_lower(text);
    if (s == "auto") {
        cfg->threads = 0;
        return true;
    }
    std::uint64_t v = 0;
    if (parse_u64(s, &v) && v >= 1 && v <= static_cast<std::uint64_t>(kMaxThreads)) {
        cfg->threads = static_cast<int>(v);
        return true;
    }
    *why = "expected auto or a thread count from 1 to " + std::to_string(kMaxThreads);
    return false;
}



bool apply_progress(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"auto", "thread", "caller"};
    static const ProgressMode values[] = {ProgressMode::Auto, ProgressMode::Thread, ProgressMode::Caller};
    return apply_choice(text, names, values, &cfg->progress, why);
}

const SettingDef kSettings[] = {
    {"METHOD", "CC_COLL_METHOD", "none", nullptr /* from the method registry: method_doc() */, apply_method},
    {"DENSITY", "CC_COLL_DENSITY", "0.01",
     "TOPK: fraction of each rank's elements sent, k = ceil(density * count), in (0, 1]. When the "
     "gathered payloads would outweigh the dense buffer (ranks * payload > count * element size, "
     "payload = 16 + k * (4 + element size) rounded up to 8 bytes) the call sends the buffer densely "
     "instead.",
     apply_density},
    {"SEED", "CC_COLL_SEED", "0x5eed5eed",
     "SKETCH: seed of the block hashes; LOWRANK: seed of the initial Gaussian Q. Must be the same on "
     "every rank. Different SKETCH seeds give different layouts and the same result when decoding is "
     "lossless.",
     apply_seed},
    {"EF", "CC_COLL_EF", "1",
     "Error feedback for lossy methods: what a call did not transmit is kept per tensor and added to "
     "that tensor's next input. 1 = on, 0 = off.",
     apply_ef},
    {"EF_MAX_BYTES", "CC_COLL_EF_MAX_BYTES", "0",
     "Cap on the residual memory of one communicator on one rank (K/M/G/T suffixes, powers of 1024); "
     "0 = no cap. A call that would need a new residual beyond the cap fails with "
     "CC_COLL_ERR_EF_LIMIT; nothing is evicted. Use the same value on every rank.",
     apply_ef_max_bytes},
    {"STATE_MAX_BYTES", "CC_COLL_STATE_MAX_BYTES", "0",
     "Cap on the methods' per-tensor state other than residuals, of one communicator on one rank: "
     "LOWRANK's call count and factors P and Q of each tensor and point-to-point channel, kept with EF "
     "off too (K/M/G/T suffixes, powers of 1024); 0 = no cap, like CC_COLL_EF_MAX_BYTES. A call that "
     "would create state for a new key (or grow a key's factors) beyond the cap fails with "
     "CC_COLL_ERR_EF_LIMIT before communicating; nothing is evicted. cc_coll_state_bytes reports the "
     "bytes held. Use the same value on every rank.",
     apply_state_max_bytes},
    {"LOG_LEVEL", "CC_COLL_LOG_LEVEL", "none",
     "Diagnostics printed to stderr: none; error (every failed call's message); info (also "
     "communicator creation, and AUTO's model, agreements and changes of choice); debug (also every call). Read "
     "once per process.",
     apply_log_level},
    {"CUDA_TRANSPORT", "CC_COLL_CUDA_TRANSPORT", "auto",
     "How device buffers reach MPI: direct (device pointers straight to MPI; needs an MPI that "
     "reports CUDA-aware support, else calls fail with CC_COLL_ERR_NOT_SUPPORTED), staged (through "
     "pinned host buffers in chunks, copies overlapping the communication), or auto (direct when "
     "MPIX_Query_cuda_support() says yes, else staged). F16/BF16 sums are always staged: MPI's "
     "user-defined reduction runs on the host.",
     apply_cuda_transport},
    {"CUDA_STAGING_CHUNK", "CC_COLL_CUDA_STAGING_CHUNK", "1M",
     "Staged transport: bytes per chunk of a dense device sum (K/M/G/T suffixes, powers of 1024; 4K to "
     "1G). Smaller chunks overlap more, larger ones pay less per-message overhead.",
     apply_cuda_chunk_bytes},
    {"PROGRESS", "CC_COLL_PROGRESS", "auto",
     "Who advances non-blocking collectives (cc_coll_iallreduce and the others): thread (one "
     "library progress thread per process runs their compression, MPI calls and decompression "
     "while the caller computes; needs MPI_THREAD_MULTIPLE, else those calls fail with "
     "CC_COLL_ERR_NOT_SUPPORTED), caller (no thread: a request advances only inside cc_coll_test, "
     "cc_coll_wait and cc_coll_waitall), or auto (thread when MPI_Query_thread reports "
     "MPI_THREAD_MULTIPLE, else caller). Blocking calls are unaffected.",
     apply_progress},
    {"HIERARCHY", "CC_COLL_HIERARCHY", "auto",
     "Node-by-node allreduce of host tensors (cc_coll_allreduce, cc_coll_allreduce_group and their "
     "non-blocking forms): off "
     "(every rank compresses to every other), on (wherever some node holds two or more ranks: a "
     "dense reduce-scatter inside each node, the compressed allreduce between nodes on each rank's "
     "shard, an allgather inside each node), or auto (on when the communicator spans two or more "
     "nodes of two or more ranks each). Nodes are MPI's shared-memory nodes, or CC_COLL_NODES. "
     "Every rank must use the same value.",
     apply_hierarchy},
    {"NODES", "CC_COLL_NODES", "",
     "Node boundaries for CC_COLL_HIERARCHY, replacing MPI's shared-memory nodes (tests, emulated "
     "clusters): the sizes of consecutive blocks of the communicator's ranks, comma-separated "
     "(\"3,1\"), or one size k for blocks of k ranks. Empty: MPI_Comm_split_type "
     "(MPI_COMM_TYPE_SHARED).",
     apply_node_sizes},
    {"PIPELINE_BYTES", "CC_COLL_PIPELINE_BYTES", "0",
     "The pipelined allreduce of host buffers: 0 (off), or cut a call of more input bytes than this "
     "into parts of about this many bytes (64K to 2G), each with its own non-blocking MPI collectives, "
     "so that coding part i+1 overlaps sending part i. TOPK's allgather algorithm: each part has its own "
     "top k (k = ceil(density * part)) and payload. HALF, QUANT and ONEBIT: each part runs the coded "
     "reduce-scatter and allgather on its own. Every rank gets the same result; it differs from the "
     "uncut call's (TOPK: the top k of each part, not of the whole buffer; the codecs: blocks and "
     "chunks start at each part's start). Every rank must use the same value.",
     apply_pipeline_bytes},
    {"THREADS", "CC_COLL_THREADS", "auto",
     "Threads of each rank's host compression and decompression kernels (the error-feedback add, "
     "the top-k selection, the element-wise residual, rounding and store passes, the scatter-add): "
     "a count from 1 to 256, or auto (the CPUs of the rank's affinity mask divided among the ranks "
     "of its node: OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or PMI_LOCAL_SIZE from the launcher, "
     "else the ranks MPI_Comm_split_type puts on its node). Results do not depend on it. LOWRANK's "
     "matrix products run in the BLAS, with its own threads (OPENBLAS_NUM_THREADS).",
     apply_threads},
};

}  // namespace

bool parse_node_sizes(const std::string &text, int ranks, std::vector<int> *sizes, std::string *why)
{
    sizes->clear();
    std::vector<long> parts;
    std::size_t pos = 0;
    while (true) {
        const std::size_t comma = text.find(',', pos);
        std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        std::string t;
        for (char ch : item)
            if (ch != ' ' && ch != '\t') t += ch;
        char *end = nullptr;
        const long v = t.empty() ? 0 : std::strtol(t.c_str(), &end, 10);
        if (t.empty() || end == nullptr || *end != '\0' || v < 1 || v > (1L << 24)) {
            *why = "expected node sizes >= 1, comma-separated (\"2,2\"), or one size";
            return false;
        }
        parts.push_back(v);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (ranks < 0) return true;  // syntax only
    if (parts.size() == 1) {
        for (int left = ranks; left > 0; left -= static_cast<int>(parts[0]))
            sizes->push_back(static_cast<int>(std::min<long>(parts[0], left)));
        return true;
    }
    long sum = 0;
    for (long v : parts) {
        sum += v;
        sizes->push_back(static_cast<int>(v));
    }
    if (sum != ranks) {
        *why = "node sizes add up to " + std::to_string(sum) + ", the communicator has " + std::to_string(ranks) +
               " ranks";
        sizes->clear();
        return false;
    }
    return true;
}

EnvLookup process_env()
{
    return [](const char *name, std::string *value) {
        const char *v = std::getenv(name);
        if (v == nullptr) return false;
        *value = v;
        return true;
    };
}

// CC_COLL_METHOD's documentation, listing the registered methods.
std::string method_doc()
{
    std::string doc = "Compression method used when a call's params do not set one. Values: ";
    bool first = true;
    for (const Method *m : methods()) {
        doc += first ? "" : "; ";
        doc += std::string(m->name) + " (" + m->summary + ")";
        first = false;
    }
    return doc + ".";
}

const SettingDef *settings(std::size_t *count)
{
    static const std::string doc = method_doc();
    static const std::vector<SettingDef> table = [] {
        std::vector<SettingDef> t(std::begin(kSettings), std::end(kSettings));
        for (SettingDef &s : t)
            if (s.doc == nullptr) s.doc = doc.c_str();
        for (const Method *m : methods())
            if (m->settings != nullptr) t.insert(t.end(), m->settings, m->settings + m->settings_count);
        std::size_t n = 0;
        const SettingDef *shim = preload_setting_defs(&n);
        t.insert(t.end(), shim, shim + n);
        return t;
    }();
    *count = table.size();
    return table.data();
}

cc_coll_status_t load_config(const EnvLookup &env, Config *cfg, std::string *why)
{
    Config result;
    std::string reason;
    std::size_t n = 0;
    const SettingDef *table = settings(&n);
    for (std::size_t i = 0; i < n; ++i) {
        const SettingDef &s = table[i];
        if (!s.apply(s.default_value, &result, &reason)) {
            if (why) *why = std::string("built-in default of ") + s.env_var + " is invalid";
            return CC_COLL_ERR_INTERNAL;
        }
        std::string value;
        if (!env(s.env_var, &value)) continue;
        if (!s.apply(value, &result, &reason)) {
            if (why) *why = std::string(s.env_var) + "=\"" + value + "\" is invalid: " + reason;
            return CC_COLL_ERR_CONFIG;
        }
    }
    *cfg = result;
    return CC_COLL_OK;
}

bool parse_method(const std::string &text, cc_coll_method_t *out)
{
    const Method *m = find_method_by_name(trim_lower(text));
    if (m == nullptr) return false;
    *out = m->id;
    return true;
}

bool parse_log_level(const std::string &text, LogLevel *out)
{
    const std::string s = trim_lower(text);
    if (s == "none") *out = LogLevel::None;
    else if (s == "error") *out = LogLevel::Error;
    else if (s == "info") *out = LogLevel::Info;
    else if (s == "debug") *out = LogLevel::Debug;
    else return false;
    return true;
}

bool parse_bytes(const std::string &text, std::uint64_t *out)
{
    const std::string s = trim_lower(text);
    std::size_t i = 0;
    std::uint64_t value = 0;
    if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
        const std::uint64_t digit = static_cast<std::uint64_t>(s[i] - '0');
        if (value > (UINT64_MAX - digit) / 10) return false;
        value = value * 10 + digit;
    }
    std::string suffix = s.substr(i);
    while (!suffix.empty() && suffix[0] == ' ') suffix.erase(0, 1);
    unsigned shift = 0;
    if (!suffix.empty()) {
        switch (suffix[0]) {
        case 'k': shift = 10; break;
        case 'm': shift = 20; break;
        case 'g': shift = 30; break;
        case 't': shift = 40; break;
        case 'b': break;
        default: return false;
        }
        const std::string rest = suffix[0] == 'b' ? suffix.substr(1) : suffix.substr(1);
        if (suffix[0] == 'b' && !rest.empty()) return false;
        if (suffix[0] != 'b' && !(rest.empty() || rest == "b" || rest == "ib")) return false;
    }
    if (shift != 0 && value > (UINT64_MAX >> shift)) return false;
    *out = value << shift;
    return true;
}

bool parse_bool(const std::string &text, bool *out)
{
    const std::string s = trim_lower(text);
    if (s == "1" || s == "true" || s == "yes" || s == "on") *out = true;
    else if (s == "0" || s == "false" || s == "no" || s == "off") *out = false;
    else return false;
    return true;
}

bool zero_fraction_valid(double f) { return std::isfinite(f) && f >= 0.0 && f < 1.0; }

bool parse_sparsifier(const std::string &text, cc_coll_sparsifier_t *out)
{
    const std::string s = trim_lower(text);
    if (s == "topk") *out = CC_COLL_SPARSIFY_TOPK;
    else if (s == "threshold") *out = CC_COLL_SPARSIFY_THRESHOLD;
    else return false;
    return true;
}

bool density_valid(double density) { return std::isfinite(density) && density > 0.0 && density <= 1.0; }

bool parse_double(const std::string &text, double *out)
{
    const std::string s = trim_lower(text);
    if (s.empty()) return false;
    errno = 0;
    char *end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    // ERANGE on underflow still yields a usable (tiny or zero) finite value.
    if (end != s.c_str() + s.size() || !std::isfinite(v) || (errno == ERANGE && std::fabs(v) > 1.0)) return false;
    *out = v;
    return true;
}

}  // namespace cc_coll::detail
