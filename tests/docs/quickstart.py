"""Runs one of README.md's quickstarts as written and checks its output.

A quickstart is the fenced ```sh block after the line
"<!-- quickstart: NAME -->"; the next fenced block is its expected output.
With --marker run, the same for a "<!-- run: NAME -->" block of another
page (--readme names the page).
The commands run with sh -e from a scratch copy of the repository root
(symbolic links to the source tree's entries, with build/ linking to this
build directory), with the build's MPI launcher first on the PATH as
`mpirun` and `mpiexec` and its C compiler wrapper as `mpicc`. Every line of
the expected block must be a whole line of the output (stdout and stderr
together, in any order), where "…" stands for any text; a line that is only
"…" marks omitted output and is not matched. The test fails when a command
fails or an expected line is missing.

    python3 quickstart.py --readme README.md --name c --source <repo> --build <build>
        --mpiexec <launcher> [--mpiexec-flag <flag>]... --mpicc <wrapper> [--marker run]
"""
import argparse
import os
import re
import shlex
import subprocess
import sys


def blocks_after(text, marker):
    """The first two fenced blocks after the marker line: (commands, expected)."""
    at = text.find(marker)
    if at < 0:
        sys.exit("quickstart.py: the README has no line %r" % marker)
    fence = re.compile(r"^```([A-Za-z]*)\n(.*?)^```$", re.M | re.S)
    found = fence.findall(text, at)
    if len(found) < 2:
        sys.exit("quickstart.py: %r is not followed by a command block and an output block" % marker)
    (lang, commands), (_, expected) = found[0], found[1]
    if lang != "sh":
        sys.exit("quickstart.py: the block after %r is ```%s, not ```sh" % (marker, lang))
    return commands, expected


def pattern(line):
    return re.compile(".*".join(re.escape(part) for part in line.split("\u2026")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--readme", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--mpiexec-flag", action="append", default=[])
    ap.add_argument("--mpicc", required=True)
    ap.add_argument("--marker", default="quickstart",
                    help='the marker\'s word: "<!-- MARKER: NAME -->" (default quickstart)')
    a = ap.parse_args()

    with open(a.readme, encoding="utf-8") as f:
        commands, expected = blocks_after(f.read(), "<!-- %s: %s -->" % (a.marker, a.name))
    wanted = [l.rstrip() for l in expected.splitlines() if l.strip() and l.strip() != "\u2026"]
    if not wanted:
        sys.exit("quickstart.py: the expected output of %r has no line to check" % a.name)

    root = os.path.join(os.path.abspath(a.build), "%s_%s" % (a.marker, a.name))
    bindir = os.path.join(root, ".bin")
    os.makedirs(bindir, exist_ok=True)
    source = os.path.abspath(a.source)
    for entry in os.listdir(source):
        link = os.path.join(root, entry)
        if entry.startswith(("build", ".")) or os.path.lexists(link):
            continue
        os.symlink(os.path.join(source, entry), link)
    if not os.path.lexists(os.path.join(root, "build")):
        os.symlink(os.path.abspath(a.build), os.path.join(root, "build"))
    wrappers = {"mpirun": [a.mpiexec] + a.mpiexec_flag, "mpiexec": [a.mpiexec] + a.mpiexec_flag,
                "mpicc": [a.mpicc]}
    for name, argv in wrappers.items():
        path = os.path.join(bindir, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexec %s \"$@\"\n" % " ".join(shlex.quote(x) for x in argv))
        os.chmod(path, 0o755)

    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    print("$ cd <repository root>\n" + commands, flush=True)
    run = subprocess.run(["sh", "-e", "-c", commands], cwd=root, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = run.stdout.decode("utf-8", "replace")
    print(out, flush=True)
    if run.returncode != 0:
        sys.exit("quickstart %s: the commands exited with status %d" % (a.name, run.returncode))
    lines = [l.rstrip() for l in out.splitlines()]
    missing = [w for w in wanted if not any(pattern(w).fullmatch(l) for l in lines)]
    if missing:
        sys.exit("quickstart %s: the output lacks the README's expected line(s):\n  %s"
                 % (a.name, "\n  ".join(missing)))
    print("%s %s: the %d expected line(s) of %s are in the output"
          % (a.marker, a.name, len(wanted), os.path.basename(a.readme)))


if __name__ == "__main__":
    main()
