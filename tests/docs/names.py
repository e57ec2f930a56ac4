"""Every CC_COLL_* and cc_coll_* name that README.md and docs/ mention
exists in the project's code: the headers, the library and binding sources,
the tools, the scripts, the examples and the build files (CMake options,
targets, the CC_COLL_* variables the code reads), or in the short allowlist
below, each entry with its reason. A name followed by "*" in the docs
("CC_COLL_ERR_*") is a prefix and must begin some name of the code.

    python3 names.py <source dir>
"""
import glob
import os
import re
import sys

NAME = re.compile(r"\b(CC_COLL_[A-Z0-9_]*[A-Z0-9]|cc_coll_[a-z0-9_]*[a-z0-9])(_?\*)?")
CODE_DIRS = ["include", "src", "c_api", "tools", "python/cc_coll", "python/examples", "cmake", "scripts",
             "examples", "bench", "demo"]
CODE_EXT = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".py", ".cmake", ".sh", ".f90", ".F90",
            ".in", ".map", ".toml")

# Names the docs may mention that no source file spells out whole, each with
# its reason; an entry the docs no longer mention fails the test too.
ALLOWLIST = {
}


def code_names(root):
    names = set()
    paths = []
    for d in CODE_DIRS:
        for base, dirs, files in os.walk(os.path.join(root, d)):
            paths += [os.path.join(base, f) for f in files if f.endswith(CODE_EXT)]
    for base, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
        paths += [os.path.join(base, f) for f in files if f == "CMakeLists.txt"]
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            names.update(m.group(1) for m in NAME.finditer(f.read()))
    return names


def main():
    root = sys.argv[1]
    known = code_names(root)
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"),
                                                              recursive=True))
    bad = []
    checked = 0
    for page in pages:
        with open(page, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                for m in NAME.finditer(line):
                    name, star = m.group(1), m.group(2)
                    checked += 1
                    if name in known or name in ALLOWLIST:
                        continue
                    if star and any(k.startswith(name) for k in known):
                        continue
                    bad.append("%s:%d: %s%s" % (os.path.relpath(page, root), lineno, name, star or ""))
    mentioned = set()
    for page in pages:
        with open(page, encoding="utf-8") as f:
            mentioned.update(m.group(1) for m in NAME.finditer(f.read()))
    bad += ["allowlist entry %s: no page mentions it any more" % n for n in sorted(set(ALLOWLIST) - mentioned)]
    if not checked:
        sys.exit("names.py: no CC_COLL_* or cc_coll_* name found in the docs: wrong directory?")
    if bad:
        sys.exit("names the docs mention that the code does not define or read:\n  " + "\n  ".join(bad))
    print("names.py: %d mentions of CC_COLL_* and cc_coll_* names in %d pages, all in the code"
          % (checked, len(pages)))


if __name__ == "__main__":
    main()
