#!/usr/bin/env python3
"""Rules of docs/architecture.md that can be checked on the sources.

1. Includes flow down: a file under src/ includes no header of a layer above
   its own (c_api > dispatch > methods > collectives > exec = compressors =
   wire > transport = progress > core = gpu; a compressor's backend forms
   overload on the executors, and the wire formats name the compressors'
   layouts).
2. A method is its folders: the enumerator CC_COLL_METHOD_<X> of a method
   other than NONE (the identity, which every fallback names) appears under
   src/ only in src/methods/<x>* and src/compressors/<x>/, besides the
   defaults of CC_COLL_AUTO_METHOD (src/core/config.hpp and AUTO's folder);
   a method whose descriptor lives in another method's file (ONEBIT in
   src/methods/quant.cc) has that file's folders.

Usage: layering.py REPO_ROOT. Exits 1 and lists every violation.
"""
import os
import re
import sys

RANK = {"c_api": 0, "dispatch": 1, "methods": 2, "collectives": 3, "exec": 4, "compressors": 4,
        "wire": 4, "transport": 5, "progress": 5, "core": 6, "gpu": 6}
DEFAULT_CANDIDATE = {"src/core/config.hpp", "src/methods/auto/cost_model.hpp"}


def sources(root):
    for d, _, files in os.walk(os.path.join(root, "src")):
        for f in sorted(files):
            yield os.path.relpath(os.path.join(d, f), root)


def main(root):
    bad = []
    header = open(os.path.join(root, "include", "cc_coll.h")).read()
    methods = sorted(set(re.findall(r"CC_COLL_METHOD_([A-Z0-9]+)\s*=", header)) - {"NONE"})
    # A method's home is named by the method file whose descriptor has its
    # id (ONEBIT's is src/methods/quant.cc, beside QUANT's): that file's
    # stem names its folders. Default: the method's own name.
    home = {m: m.lower() for m in methods}
    for path in sources(root):
        if path.startswith("src/methods/") and path.count("/") == 2 and path.endswith(".cc"):
            text = open(os.path.join(root, path), errors="replace").read()
            for m in re.findall(r"\.id\s*=\s*CC_COLL_METHOD_([A-Z0-9]+)", text):
                if m in home:
                    home[m] = os.path.basename(path)[:-3]
    for path in sources(root):
        layer = path.split("/")[1]
        text = open(os.path.join(root, path), errors="replace").read()
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            top = inc.split("/")[0]
            if top in RANK and layer in RANK and RANK[top] < RANK[layer]:
                bad.append("%s includes %s (layer %s is above %s)" % (path, inc, top, layer))
        for m in methods:
            own = any(path.startswith("src/methods/" + h) or path.startswith("src/compressors/%s/" % h)
                      for h in (m.lower(), home[m]))
            if own or path in DEFAULT_CANDIDATE:
                continue
            if re.search(r"\bCC_COLL_METHOD_%s\b" % m, text):
                bad.append("%s names CC_COLL_METHOD_%s outside the method's folders" % (path, m))
    for b in bad:
        print(b)
    print("%d violation(s); %d methods checked" % (len(bad), len(methods)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
