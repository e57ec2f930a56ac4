#include "core/method.hpp"

namespace cc_coll::detail {

const std::vector<const Method *> &methods()
{
    // The registry: one line per method, in id order.
    static const std::vector<const Method *> table = {
        &none_method(),
        &topk_method(),
        &sketch_method(),
        &lowrank_method(),
    };
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
