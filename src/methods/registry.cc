// The method registry's table. Adding a method: its descriptor in
// src/methods/<name>.cc (a function <name>_method() returning it) and its
// name in the one line below, in id order (ids are the public enumerators:
// a new method takes the next value after the last one here).
#include "core/method.hpp"

#include <array>
#include <cstdlib>

#define CC_COLL_METHODS(X) X(none) X(topk) X(sketch) X(lowrank) X(auto) X(half) X(quant) X(onebit)

namespace cc_coll::detail {

#define CC_COLL_DECLARE_METHOD(name) const Method &name##_method();
CC_COLL_METHODS(CC_COLL_DECLARE_METHOD)
#undef CC_COLL_DECLARE_METHOD

const std::vector<const Method *> &methods()
{
#define CC_COLL_METHOD_ENTRY(name) &name##_method(),
    static const std::vector<const Method *> table = [] {
        std::vector<const Method *> t = {CC_COLL_METHODS(CC_COLL_METHOD_ENTRY)};
        // Ids ascend (the table is in id order) and fit Comm's state slots.
        for (std::size_t i = 0; i < t.size(); ++i)
            if (static_cast<int>(t[i]->id) >= kMaxMethods || (i > 0 && t[i]->id <= t[i - 1]->id)) std::abort();
        return t;
    }();
#undef CC_COLL_METHOD_ENTRY
    return table;
}

unsigned method_caps(const Method &m)
{
    unsigned caps = 0;
    if (m.lossy) caps |= CC_COLL_METHOD_CAP_LOSSY;
    if (m.reduce_scatter != nullptr || m.select != nullptr) caps |= CC_COLL_METHOD_CAP_REDUCE_SCATTER;
    if (m.p2p != P2pCompression::Refused && m.p2p != P2pCompression::None) caps |= CC_COLL_METHOD_CAP_P2P;  // AUTO sends uncompressed
    if (m.matrix_view) caps |= CC_COLL_METHOD_CAP_MATRIX;
    if (m.state_export != nullptr) caps |= CC_COLL_METHOD_CAP_STATE;
    if (m.select != nullptr) caps |= CC_COLL_METHOD_CAP_SELECTS;
    if (m.auto_candidate) caps |= CC_COLL_METHOD_CAP_AUTO_CANDIDATE;
    if (m.takes_density) caps |= CC_COLL_METHOD_CAP_DENSITY;
    return caps;
}
const Method *find_method(int id)
{
    // Indexed by id (every call looks its method up, some twice).
    static const auto by_id = [] {
        std::array<const Method *, kMaxMethods> t{};
        for (const Method *m : methods()) t[static_cast<std::size_t>(m->id)] = m;
        return t;
    }();
    return id >= 0 && id < kMaxMethods ? by_id[static_cast<std::size_t>(id)] : nullptr;
}

const Method *find_method_by_name(const std::string &name)
{
    for (const Method *m : methods())
        if (name == m->name) return m;
    return nullptr;
}

std::string method_names(const char *separator)
{
    std::string out;
    for (const Method *m : methods()) {
        if (!out.empty()) out += separator;
        out += m->name;
    }
    return out;
}

std::string auto_candidate_names()
{
    std::string out;
    for (const Method *m : methods()) {
        if (!m->auto_candidate) continue;
        if (!out.empty()) out += ", ";
        out += m->name;
    }
    return out;
}

void reset_method_states(Comm &comm, const EfKey *key)
{
    for (const Method *m : methods())
        if (m->reset_state != nullptr) m->reset_state(comm, key);
}

}  // namespace cc_coll::detail
