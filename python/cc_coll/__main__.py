# SPDX-License-Identifier: BSD-3-Clause
"""python3 -m cc_coll: the package and library versions, the build, the
methods of the library and the settings in effect (like the cc_coll_info
tool). Needs no MPI."""

import cc_coll


def main():
    info = cc_coll.build_info()
    print("cc_coll (Python) %s, libcc_coll %s" % (cc_coll.__version__, cc_coll.version()))
    print("library: %s" % info["library"])
    print("build: CUDA %s, Fortran %s" % ("on" if info["cuda"] else "off",
                                         "on" if info["fortran"] else "off"))
    print("methods: %s" % ", ".join(m.name.lower() for m in cc_coll.Method))
    print("settings:")
    for s in cc_coll.settings():
        origin = "environment" if s["from_env"] else "default"
        print("  %-22s = %-8s (%s; default %s)" % (s["env_var"], s["value"], origin, s["default"]))
        if s["error"]:
            print("    error: %s" % s["error"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
