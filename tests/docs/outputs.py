"""Every sample output in README.md and docs/ says whether a test checks it
(docs/architecture.md, "Conventions of these docs").

A sample output is a fenced block with no language: what a program
printed. Other plain text (diagrams, usage lines) is fenced as ```text.
The last line of prose before each sample output (blank lines and HTML
comments skipped) carries one of two visible tags:

  [tested: <ctest name>]   a test reruns the command and compares the
                           block's lines with what it prints; the name must
                           be a test registered in a CMakeLists.txt
  [illustrative]           printed once by the command shown, not rerun:
                           its figures may differ on another run or version

    python3 outputs.py <source dir>
"""
import glob
import os
import re
import sys

TAG = re.compile(r"\[(illustrative|tested: ([A-Za-z0-9_]+))\]")


def registered_tests(root):
    """Regular expressions for the test names the CMakeLists.txt files register."""
    names = []
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        if "CMakeLists.txt" in files:
            with open(os.path.join(base, "CMakeLists.txt"), encoding="utf-8") as f:
                text = f.read()
            for m in re.finditer(r"(?:add_test\(NAME|cc_coll_add_mpi_test\()\s*([A-Za-z0-9_${}]+)", text):
                parts = re.split(r"\$\{[^}]*\}", m.group(1))
                names.append(re.compile("[A-Za-z0-9_]+".join(re.escape(p) for p in parts)))
    return names


def main():
    root = sys.argv[1]
    tests = registered_tests(root)
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"),
                                                              recursive=True))
    bad, count = [], 0
    for page in pages:
        with open(page, encoding="utf-8") as f:
            lines = f.read().split("\n")
        fence = None
        for i, line in enumerate(lines):
            if fence is None:
                m = re.match(r"^(`{3,})(.*)$", line)
                if not m:
                    continue
                fence = m.group(1)
                if m.group(2).strip():
                    continue
                count += 1
                where = "%s:%d" % (os.path.relpath(page, root), i + 1)
                j = i - 1
                while j >= 0 and (not lines[j].strip() or lines[j].lstrip().startswith("<!--")):
                    j -= 1
                tag = TAG.search(lines[j]) if j >= 0 else None
                if not tag:
                    bad.append("%s: a sample output without [illustrative] or [tested: <test>] in the line "
                               "before it (or a block of other text: fence it as ```text)" % where)
                elif tag.group(2) and not any(t.fullmatch(tag.group(2)) for t in tests):
                    bad.append("%s: [tested: %s] names no test registered in a CMakeLists.txt"
                               % (where, tag.group(2)))
            elif line.startswith(fence) and not line[len(fence):].strip():
                fence = None
    if bad:
        sys.exit("\n".join(bad))
    print("outputs.py: %d sample outputs in %d pages, each tagged" % (count, len(pages)))


if __name__ == "__main__":
    main()
