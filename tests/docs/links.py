"""Every relative link of README.md and docs/ leads somewhere: the file
exists, and a #fragment names a heading of the Markdown page it points to
(GitHub's anchors: the heading in lower case, punctuation dropped, blanks
as hyphens). Links inside fenced blocks are not links.

    python3 links.py <source dir>
"""
import glob
import os
import re
import sys


def strip_fences(text):
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def anchors(path):
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in strip_fences(f.read()).split("\n"):
            m = re.match(r"#+ (.*)", line)
            if m:
                out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def main():
    root = sys.argv[1]
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"),
                                                              recursive=True))
    bad, count = [], 0
    for page in pages:
        with open(page, encoding="utf-8") as f:
            text = strip_fences(f.read())
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            count += 1
            path, _, fragment = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            where = os.path.relpath(page, root)
            if not os.path.exists(full):
                bad.append("%s: link to %s: no such file" % (where, target))
            elif fragment and full.endswith(".md") and fragment not in anchors(full):
                bad.append("%s: link to %s: no heading has that anchor" % (where, target))
    if bad:
        sys.exit("\n".join(bad))
    print("links.py: %d relative links in %d pages, all lead somewhere" % (count, len(pages)))


if __name__ == "__main__":
    main()
