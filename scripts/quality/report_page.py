"""The command line the quality reports share (quality_report.py,
frontier_report.py, time_report.py): --collect gathers records into a JSON
file; otherwise the report's section of the page, between its markers, is
rewritten from the JSON (text outside the markers never touched) and its
plots drawn, or, with --check, compared with what the JSON gives."""

import argparse
import os


def run(argv, description, name, json_name, begin, end, load, section, plot, collect, heading=None, *, doc):
    """The report's main(): load(folder) -> data (None when the folder has no
    JSON), section(data, folder relative to the page) -> the section's text
    (markers included, one newline after), plot(data, folder) -> the PNG
    names written, collect(inputs, out, meta) -> a line to print. Without
    markers in the page the section is appended, under `heading` if given.
    `doc` is the page --doc defaults to. Returns the exit status."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--dir", default="docs/quality")
    ap.add_argument("--doc", default=doc)
    ap.add_argument("--collect", nargs="+")
    ap.add_argument("--out")
    ap.add_argument("--meta", nargs="*", default=[])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    if a.collect:
        if not a.out:
            ap.error("--collect needs --out")
        print("%s: %s" % (name, collect(a.collect, a.out, a.meta)))
        return 0
    path = os.path.join(a.dir, json_name)
    data = load(a.dir) if os.path.exists(path) else None
    if data is None:
        print("%s: %s does not exist or holds no run" % (name, path))
        return 1
    rel = os.path.relpath(os.path.abspath(a.dir), os.path.dirname(os.path.abspath(a.doc)))
    text = section(data, rel)
    old = open(a.doc).read() if os.path.exists(a.doc) else ""
    if a.check:
        if begin not in old or end not in old:
            print("%s: %s has no %s ... %s section" % (name, a.doc, begin, end))
            return 1
        current = begin + old.split(begin, 1)[1].split(end, 1)[0] + end + "\n"
        if current != text:
            print("%s: the section %s of %s is not what %s gives; regenerate it with scripts/quality/%s"
                  % (name, begin, a.doc, path, name))
            return 1
        print("%s: %s matches %s" % (name, a.doc, path))
        return 0
    pngs = plot(data, a.dir)
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + text.rstrip("\n") + rest.split(end, 1)[1]
    else:
        if old and not old.endswith("\n"):
            old += "\n"
        new = old + ("\n" if old else "") + (heading + "\n\n" if heading else "") + text
    with open(a.doc, "w") as fh:
        fh.write(new)
    print("%s: wrote %s and %s" % (name, a.doc, ", ".join(os.path.join(a.dir, p) for p in pngs)))
    return 0
