// An EnvLookup over a map: the settings a unit test gives load_config.
#pragma once

#include <map>
#include <string>

#include "core/config.hpp"

namespace cc_coll::test {

struct MapEnv {
    std::map<std::string, std::string> vars;
    cc_coll::detail::EnvLookup lookup() const
    {
        return [this](const char *name, std::string *value) {
            auto it = vars.find(name);
            if (it == vars.end()) return false;
            *value = it->second;
            return true;
        };
    }
};

}  // namespace cc_coll::test
