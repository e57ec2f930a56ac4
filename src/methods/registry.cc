// The method registry's table. Adding a method: its descriptor in
// src/methods/<name>.cc (a function <name>_method() returning it) and its
// name in the one line below, in id order.
#include "core/method.hpp"

#define CC_COLL_METHODS(X) X(none) X(topk) X(sketch) X(lowrank)

namespace cc_coll::detail {

#define CC_COLL_DECLARE_METHOD(name) const Method &name##_method();
CC_COLL_METHODS(CC_COLL_DECLARE_METHOD)
#undef CC_COLL_DECLARE_METHOD

const std::vector<const Method *> &methods()
{
#define CC_COLL_METHOD_ENTRY(name) &name##_method(),
    static const std::vector<const Method *> table = {CC_COLL_METHODS(CC_COLL_METHOD_ENTRY)};
#undef CC_COLL_METHOD_ENTRY
    return table;
}
const Method *find_method(int id)
{
    for (const Method *m : methods())
        if (static_cast<int>(m->id) == id) return m;
    return nullptr;
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

void reset_method_states(Comm &comm, const EfKey *key)
{
    for (const Method *m : methods())
        if (m->reset_state != nullptr) m->reset_state(comm, key);
}

}  // namespace cc_coll::detail
