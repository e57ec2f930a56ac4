# SPDX-License-Identifier: BSD-3-Clause
"""The package's methods come from the library's registry (include/cc_coll.h,
"The methods of this library"): Method and MethodCap equal what the C ABI
reports, what the package decides per method it decides from the caps, and
no module of the package names a lossy or selecting method itself.

Run by ctest (python_methods) with CC_COLL_LIBRARY and CC_COLL_SOURCE_DIR
set; needs no MPI.
"""

import ast
import ctypes
import glob
import os
import re
import unittest

import cc_coll
from cc_coll import _lib
from cc_coll._methods import MethodCap, _method_enum, may_view_as_matrix, method_caps, method_named, methods_with

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CC_COLL_SOURCE_DIR", os.path.join(HERE, os.pardir, os.pardir))
PACKAGE_DIR = os.path.dirname(os.path.abspath(cc_coll.__file__))


def header_text():
    with open(os.path.join(SOURCE_DIR, "include", "cc_coll.h")) as f:
        return f.read()


def registry():
    """[(id, name, caps, summary)] straight from the C ABI."""
    lib = _lib.lib
    out = []
    for i in range(lib.cc_coll_method_count()):
        m = ctypes.c_int()
        assert lib.cc_coll_method_at(i, ctypes.byref(m)) == 0
        out.append((m.value, lib.cc_coll_method_name(m.value).decode(), lib.cc_coll_method_caps(m.value),
                    lib.cc_coll_method_summary(m.value).decode()))
    return out


class MatchesTheAbi(unittest.TestCase):
    def test_method_is_the_registry(self):
        reg = registry()
        self.assertTrue(reg)
        self.assertEqual([(int(m), m.name) for m in cc_coll.Method], [(v, n.upper()) for v, n, _, _ in reg])
        for value, name, caps, summary in reg:
            m = cc_coll.Method(value)
            self.assertEqual(int(m.caps), caps)
            self.assertIsInstance(m.caps, MethodCap)
            self.assertEqual(method_caps(m), m.caps)
            self.assertEqual(int(method_caps(value)), caps)
            self.assertEqual(m.summary, summary)
            self.assertTrue(summary)
            for spelling in (name, name.upper()):
                out = ctypes.c_int()
                self.assertEqual(_lib.lib.cc_coll_method_from_name(spelling.encode(), ctypes.byref(out)), 0)
                self.assertEqual(out.value, value)
                self.assertIs(method_named(spelling), m)
        self.assertIsNone(method_named("no-such-method"))
        # past the last index: refused, and an unknown id has no caps
        out = ctypes.c_int()
        self.assertNotEqual(_lib.lib.cc_coll_method_at(len(reg), ctypes.byref(out)), 0)
        self.assertEqual(int(method_caps(max(cc_coll.Method) + 1)), 0)

    def test_lists_the_quantisers(self):
        # QUANT and ONEBIT, from the registry like every method: dense lossy
        # codecs with a reduce-scatter, AUTO candidates, no density.
        M = cc_coll.Method
        self.assertEqual((int(M.QUANT), int(M.ONEBIT)), (6, 7))
        for m in (M.QUANT, M.ONEBIT):
            self.assertEqual(m.caps, MethodCap.LOSSY | MethodCap.REDUCE_SCATTER | MethodCap.AUTO_CANDIDATE)
            self.assertIs(method_named(m.name.lower()), m)
        self.assertIn(M.QUANT, methods_with(MethodCap.REDUCE_SCATTER, MethodCap.SELECTS))
        self.assertEqual(methods_with(MethodCap.DENSITY), (M.TOPK, M.SKETCH))
        settings = [s["name"] for s in cc_coll.settings()]
        for name in ("QUANT_BITS", "QUANT_CHUNK", "QUANT_SCHEME", "QUANT_ROUNDING", "ONEBIT_CHUNK"):
            self.assertIn(name, settings)

    def test_method_cap_is_the_header(self):
        header = {m.group(1): 1 << int(m.group(2)) for m in re.finditer(
            r"CC_COLL_METHOD_CAP_(\w+)\s*=\s*1\s*<<\s*(\d+)", header_text())}
        self.assertIn("MATRIX", header)
        self.assertEqual({c.name: int(c) for c in MethodCap}, header)
        self.assertIs(cc_coll.MethodCap, MethodCap)
        # every bit a method has is a MethodCap
        everything = 0
        for c in MethodCap:
            everything |= int(c)
        for _, name, caps, _ in registry():
            self.assertEqual(caps & ~everything, 0, name)


# A registry with a method added later (HALF, id 5, lossy, no matrix view)
# and a gap (no id 6): the package's decisions follow the caps alone.
C = MethodCap
FAKE = [(0, "none", int(C.REDUCE_SCATTER), "exact"),
        (1, "topk", int(C.LOSSY | C.REDUCE_SCATTER | C.P2P | C.AUTO_CANDIDATE), "sparse"),
        (3, "lowrank", int(C.LOSSY | C.P2P | C.MATRIX | C.STATE | C.AUTO_CANDIDATE), "matrix"),
        (4, "auto", int(C.LOSSY | C.REDUCE_SCATTER | C.SELECTS), "selects"),
        (5, "half", int(C.LOSSY | C.REDUCE_SCATTER | C.P2P | C.AUTO_CANDIDATE), "half precision"),
        (7, "later", int(C.LOSSY | C.MATRIX), "another matrix method")]


class FollowsTheCaps(unittest.TestCase):
    def setUp(self):
        self.M = _method_enum(FAKE)

    def test_matrix_view(self):
        M = self.M
        self.assertEqual([m.name for m in M if may_view_as_matrix(m)], ["LOWRANK", "AUTO", "LATER"])
        # a selecting method wants a shape only while a candidate views a matrix
        no_matrix = _method_enum([e for e in FAKE if not e[2] & C.MATRIX])
        self.assertFalse(may_view_as_matrix(no_matrix.AUTO))
        self.assertFalse(may_view_as_matrix(None))

    def test_methods_with(self):
        M = self.M
        self.assertEqual(methods_with(C.REDUCE_SCATTER, C.SELECTS, methods=M), (M.NONE, M.TOPK, M.HALF))
        self.assertEqual(methods_with(without=C.SELECTS, methods=M), (M.NONE, M.TOPK, M.LOWRANK, M.HALF, M.LATER))
        self.assertEqual(methods_with(without=C.SELECTS | C.MATRIX, methods=M), (M.NONE, M.TOPK, M.HALF))

    def test_hook_takes_a_new_method(self):
        try:
            import cc_coll.torch as cct
        except ImportError as exc:
            self.skipTest("cc_coll.torch: %s" % exc)
        M = self.M
        # the flat bucket for a lossy method without matrix view or selection
        self.assertEqual([m.name for m in M if cct._flat_method(m)], ["NONE", "TOPK", "HALF"])
        # every method of the loaded library is one the hook takes
        for m in cc_coll.Method:
            self.assertIsInstance(cct._flat_method(m), bool)


# --------------------------------------------------------------------------
# No module of the package names a method itself
# --------------------------------------------------------------------------

def forbidden_names():
    """The lower-case names of the registry's methods that are lossy or
    select one: every method but the exact one (NONE, the uncompressed
    reference the package may name)."""
    return sorted(m.name.lower() for m in cc_coll.Method if m.caps & (MethodCap.LOSSY | MethodCap.SELECTS))


def docstrings(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.add(id(first.value))
        # `X.__doc__ = "..."`
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "__doc__"
                                                for t in node.targets):
            out.add(id(node.value))
    return out


def method_defaults(tree):
    """The default values of parameters named `method`: a public
    signature's default choice (method="topk"), which the library checks by
    name like any caller's."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
                if arg.arg == "method":
                    out.add(id(default))
            for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                if default is not None and arg.arg == "method":
                    out.add(id(default))
    return out


def violations(source, names, filename="<source>"):
    """(line, what) for each place `source` names one of `names` other than
    through the registry: a string literal holding the name as a word
    (outside docstrings and `method` defaults), or Method.<NAME>."""
    tree = ast.parse(source, filename)
    skip = docstrings(tree) | method_defaults(tree)
    word = re.compile(r"(?<![A-Za-z0-9_])(%s)(?![A-Za-z0-9_])" % "|".join(map(re.escape, names)), re.I)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            m = word.search(node.value)
            if m:
                out.append((node.lineno, "string %r names %s" % (node.value[:60], m.group(1))))
        elif isinstance(node, ast.Attribute) and node.attr.lower() in names:
            out.append((node.lineno, "attribute .%s" % node.attr))
    return sorted(out)


class NamesNoMethod(unittest.TestCase):
    def test_the_check_finds_what_it_looks_for(self):
        names = ["lowrank", "topk"]
        planted = '''
def f(m, method="topk"):
    """Compress with "lowrank" or TOPK."""
    if m == Method.LOWRANK:
        return Params(method="lowrank")
    if m.name in ("NONE", "TOPK"):
        raise ValueError("TOPK has no such thing")
    X.__doc__ = "topk"
    return lib.cc_coll_lowrank_get_state, "LOWRANK_RANK"
'''
        found = violations(planted, names)
        self.assertEqual([line for line, _ in found], [4, 5, 6, 7], found)

    def test_package_names_methods_only_through_the_registry(self):
        names = forbidden_names()
        self.assertTrue(names)
        files = sorted(glob.glob(os.path.join(PACKAGE_DIR, "*.py")))
        self.assertIn(os.path.join(PACKAGE_DIR, "torch.py"), files)
        self.assertIn(os.path.join(PACKAGE_DIR, "_methods.py"), files)
        found = []
        for path in files:
            with open(path) as f:
                for line, what in violations(f.read(), names, path):
                    found.append("%s:%d: %s" % (os.path.basename(path), line, what))
        self.assertEqual(found, [], "ask the registry (Method, MethodCap) instead:\n" + "\n".join(found))


if __name__ == "__main__":
    unittest.main(verbosity=2)
