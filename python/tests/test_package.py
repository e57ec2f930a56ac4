# SPDX-License-Identifier: BSD-3-Clause
"""Checks of the cc_coll package that need no MPI ranks: the ctypes mirror of
the C ABI against the compiler's, the version against the header, library
loading, settings, and that docs/python.md and docs/pytorch.md link the
tested examples.

    PYTHONPATH=python CC_COLL_LIBRARY=build/libcc_coll.so.0 \
        python3 python/tests/test_package.py [path/to/abi_layout]

The optional argument (or $CC_COLL_ABI_LAYOUT) is the abi_layout program
built from python/tests/abi_layout.c by CMake; without it the layout is
compared with the values computed for the x86-64/aarch64 (LP64) ABI.
"""

import ctypes
import os
import pickle
import re
import subprocess
import sys
import unittest

import numpy as np

import api_checks  # noqa: E402 (python/tests)
import cc_coll
from cc_coll import _lib

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CC_COLL_SOURCE_DIR", os.path.join(HERE, os.pardir, os.pardir))
HEADER = os.path.join(SOURCE_DIR, "include", "cc_coll.h")
LAYOUT_EXE = os.environ.get("CC_COLL_ABI_LAYOUT")
if __name__ == "__main__" and len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    LAYOUT_EXE = sys.argv.pop(1)

# The C layouts on an LP64 ABI (x86-64, aarch64), worked out by hand:
#   cc_coll_params_t: mask u64 @0, method enum(int) @8 + 4 padding,
#     density double @16, ef int @24 + 4 padding, ef_key u64 @32,
#     sparsifier enum(int) @40 + 4 padding, zero_fraction double @48,
#     load_factor double @56, seed u64 @64, rows u64 @72, cols u64 @80,
#     rank int @88, warm_start int @92, start_iter u64 @96,
#     min_compression_rate double @104 -> 112 bytes
#   cc_coll_stats_t: 15 eight-byte fields, sketch_elements @56,
#     sketch_peeled @64, time_total @72, auto_calls @80,
#     auto_lossy_calls @88, auto_predicted @96, auto_explored_calls @104,
#     auto_measured @112 -> 120 bytes
#   cc_coll_setting_t: 5 pointers @0..32, from_env int @40 + 4 padding -> 48
LP64_LAYOUT = {
    "sizeof.cc_coll_params_t": 112,
    "offsetof.cc_coll_params_t.mask": 0,
    "offsetof.cc_coll_params_t.method": 8,
    "offsetof.cc_coll_params_t.density": 16,
    "offsetof.cc_coll_params_t.ef": 24,
    "offsetof.cc_coll_params_t.ef_key": 32,
    "offsetof.cc_coll_params_t.sparsifier": 40,
    "offsetof.cc_coll_params_t.zero_fraction": 48,
    "offsetof.cc_coll_params_t.load_factor": 56,
    "offsetof.cc_coll_params_t.seed": 64,
    "offsetof.cc_coll_params_t.rows": 72,
    "offsetof.cc_coll_params_t.cols": 80,
    "offsetof.cc_coll_params_t.rank": 88,
    "offsetof.cc_coll_params_t.warm_start": 92,
    "offsetof.cc_coll_params_t.start_iter": 96,
    "offsetof.cc_coll_params_t.min_compression_rate": 104,
    "sizeof.cc_coll_params_t.rows": 8,
    "sizeof.cc_coll_params_t.cols": 8,
    "sizeof.cc_coll_params_t.rank": 4,
    "sizeof.cc_coll_params_t.warm_start": 4,
    "sizeof.cc_coll_params_t.start_iter": 8,
    "sizeof.cc_coll_params_t.min_compression_rate": 8,
    "sizeof.cc_coll_params_t.method": 4,
    "sizeof.cc_coll_params_t.ef": 4,
    "sizeof.cc_coll_params_t.sparsifier": 4,
    "sizeof.cc_coll_stats_t": 120,
    "offsetof.cc_coll_stats_t.sketch_elements": 56,
    "offsetof.cc_coll_stats_t.sketch_peeled": 64,
    "offsetof.cc_coll_stats_t.time_total": 72,
    "offsetof.cc_coll_stats_t.auto_calls": 80,
    "offsetof.cc_coll_stats_t.auto_lossy_calls": 88,
    "offsetof.cc_coll_stats_t.auto_predicted": 96,
    "offsetof.cc_coll_stats_t.auto_explored_calls": 104,
    "offsetof.cc_coll_stats_t.auto_measured": 112,
    "sizeof.cc_coll_setting_t": 48,
    "offsetof.cc_coll_setting_t.from_env": 40,
}

STRUCTS = {
    "cc_coll_params_t": _lib.ParamsStruct,
    "cc_coll_stats_t": _lib.StatsStruct,
    "cc_coll_setting_t": _lib.SettingStruct,
}


def header_text():
    with open(HEADER) as f:
        return f.read()


def run_python(code, env_update, env_remove=()):
    env = dict(os.environ)
    env.update(env_update)
    for k in env_remove:
        env.pop(k, None)
    return subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


class AbiLayout(unittest.TestCase):
    def ctypes_layout(self):
        out = {}
        for cname, cls in STRUCTS.items():
            out["sizeof.%s" % cname] = ctypes.sizeof(cls)
            for fname, _ in cls._fields_:
                out["offsetof.%s.%s" % (cname, fname)] = getattr(cls, fname).offset
                out["sizeof.%s.%s" % (cname, fname)] = getattr(cls, fname).size
        for enum_type in ("cc_coll_method_t", "cc_coll_sparsifier_t", "cc_coll_dtype_t", "cc_coll_op_t",
                          "cc_coll_status_t"):
            out["sizeof.%s" % enum_type] = ctypes.sizeof(ctypes.c_int)
        out["sizeof.MPI_Fint"] = ctypes.sizeof(ctypes.c_int)
        return out

    @unittest.skipUnless(LAYOUT_EXE, "no abi_layout program (set CC_COLL_ABI_LAYOUT)")
    def test_matches_compiler(self):
        text = subprocess.run([LAYOUT_EXE], stdout=subprocess.PIPE, check=True,
                              universal_newlines=True).stdout
        c_layout = {k: int(v) for k, v in (line.split() for line in text.splitlines())}
        self.assertEqual(len(c_layout), 81)
        self.assertEqual(self.ctypes_layout(), c_layout)

    @unittest.skipUnless(ctypes.sizeof(ctypes.c_void_p) == 8 and ctypes.sizeof(ctypes.c_long) == 8,
                         "not an LP64 platform")
    def test_matches_lp64_by_hand(self):
        layout = self.ctypes_layout()
        for key, value in LP64_LAYOUT.items():
            self.assertEqual(layout[key], value, key)


class Version(unittest.TestCase):
    def header_version(self):
        return tuple(int(re.search(r"^#define CC_COLL_VERSION_%s (\d+)$" % part, header_text(), re.M).group(1))
                     for part in ("MAJOR", "MINOR", "PATCH"))

    def test_package_mirrors_header(self):
        self.assertEqual((cc_coll.ABI_MAJOR, cc_coll.ABI_MINOR, cc_coll.ABI_PATCH), self.header_version())

    def test_library_version(self):
        self.assertEqual(cc_coll.version_info(), self.header_version())
        self.assertEqual(cc_coll.version(), "%d.%d.%d" % self.header_version())

    def test_check_version(self):
        cc_coll.check_version()
        cc_coll.check_version(cc_coll.ABI_MAJOR, 0)
        with self.assertRaises(cc_coll.Error) as cm:
            cc_coll.check_version(cc_coll.ABI_MAJOR + 1, 0)
        self.assertEqual(cm.exception.status, cc_coll.Status.VERSION_MISMATCH)
        self.assertIn("%d." % (cc_coll.ABI_MAJOR + 1), cm.exception.message)
        with self.assertRaises(cc_coll.Error) as cm:
            cc_coll.check_version(cc_coll.ABI_MAJOR, cc_coll.ABI_MINOR + 1)
        self.assertEqual(cm.exception.status, cc_coll.Status.VERSION_MISMATCH)

    def test_import_refuses_older_library(self):
        # The package pretends to need a newer minor version than the library has.
        code = ("import sys, types\n"
                "v = types.ModuleType('cc_coll._version')\n"
                "v.ABI_MAJOR, v.ABI_MINOR, v.ABI_PATCH, v.__version__ = %d, %d, 0, 'x'\n"
                "sys.modules['cc_coll._version'] = v\n"
                "try:\n"
                "    import cc_coll\n"
                "except ImportError as e:\n"
                "    print('IMPORTERROR', e)\n"
                % (cc_coll.ABI_MAJOR, cc_coll.ABI_MINOR + 1))
        r = run_python(code, {})
        self.assertIn("IMPORTERROR", r.stdout, r.stderr)
        self.assertIn("CC_COLL_ERR_VERSION_MISMATCH", r.stdout)


class Enums(unittest.TestCase):
    """The IntEnums carry the header's values."""

    def header_enum(self, prefix):
        return {m.group(1): int(m.group(2))
                for m in re.finditer(r"^\s*%s(\w+)\s*=\s*(-?\d+)" % prefix, header_text(), re.M)}

    def test_status(self):
        c = self.header_enum("CC_COLL_ERR_")
        c["OK"] = 0
        self.assertEqual({m.name: int(m) for m in cc_coll.Status}, c)

    def test_dtype_op_method(self):
        self.assertEqual({m.name: int(m) for m in cc_coll.Dtype},
                         {k: v for k, v in self.header_enum("CC_COLL_").items() if k in ("F32", "F64", "F16", "BF16")})
        self.assertEqual({m.name: int(m) for m in cc_coll.Op},
                         {k: v for k, v in self.header_enum("CC_COLL_").items() if k in ("SUM", "AVG")})
        # the header's methods (a later library may have more: test_methods.py)
        header = self.header_enum("CC_COLL_METHOD_(?!CAP_)")
        self.assertEqual({m.name: int(m) for m in cc_coll.Method if m.name in header}, header)
        for m in cc_coll.Method:
            self.assertEqual(_lib.lib.cc_coll_method_name(int(m)).decode(), m.name.lower())
        self.assertIsNone(_lib.lib.cc_coll_method_name(max(cc_coll.Method) + 1))

    def test_method_from_library(self):
        # Method is read from the library's registry: cc_coll_method_at(0 ..
        # cc_coll_method_count() - 1), each named by cc_coll_method_name.
        names = []
        for i in range(_lib.lib.cc_coll_method_count()):
            m = ctypes.c_int()
            self.assertEqual(_lib.lib.cc_coll_method_at(i, ctypes.byref(m)), 0)
            names.append((_lib.lib.cc_coll_method_name(m.value).decode(), m.value))
        self.assertEqual([(m.name, int(m)) for m in cc_coll.Method],
                         [(name.upper(), value) for name, value in names])
        self.assertIs(cc_coll.Method.TOPK, cc_coll.Method(1))
        self.assertEqual(cc_coll.Method.__module__, "cc_coll._methods")
        self.assertEqual(cc_coll.Method.__qualname__, "Method")
        for m in cc_coll.Method:
            self.assertIs(pickle.loads(pickle.dumps(m)), m)
            self.assertIn(m.name, cc_coll.Method.__doc__)
            self.assertIs(cc_coll.Params(method=m.name.lower()).method, m)
        with self.assertRaises(ValueError) as cm:
            cc_coll.Params(method="no-such-method")
        for name, _ in names:
            self.assertIn(repr(name), str(cm.exception))

    def test_method_enum_follows_the_library(self):
        # A library with another method gives Method another member, with no
        # change in the package; ids may have gaps.
        from cc_coll._args import _enum_arg
        from cc_coll._methods import _method_enum
        fake = [(0, "none", 2, "a"), (1, "topk", 71, "b"), (3, "lowrank", 93, "c"), (7, "newmethod", 1, "d")]
        Method = _method_enum(fake)
        self.assertEqual([(m.name, int(m)) for m in Method],
                         [("NONE", 0), ("TOPK", 1), ("LOWRANK", 3), ("NEWMETHOD", 7)])
        self.assertIs(_enum_arg(Method, "NewMethod", "method"), Method.NEWMETHOD)
        self.assertIs(_enum_arg(Method, 7, "method"), Method.NEWMETHOD)
        self.assertEqual(_enum_arg(Method, 2, "method"), 2)   # a gap: left for the library to refuse
        self.assertEqual(Method.NEWMETHOD.caps, cc_coll.MethodCap.LOSSY)
        self.assertEqual(Method.NEWMETHOD.summary, "d")
        with self.assertRaises(ImportError):
            _method_enum([])

    def test_sparsifier(self):
        self.assertEqual({m.name: int(m) for m in cc_coll.Sparsifier}, self.header_enum("CC_COLL_SPARSIFY_"))
        self.assertEqual(set(cc_coll.Sparsifier.__members__), {"TOPK", "THRESHOLD"})

    def test_params_bits(self):
        bits = {m.group(1): 1 << int(m.group(2)) for m in re.finditer(
            r"CC_COLL_PARAMS_FIELD_(\w+)\s*=\s*\(1ULL << (\d+)\)", header_text())}
        self.assertEqual(bits, {"METHOD": _lib.PARAMS_FIELD_METHOD, "DENSITY": _lib.PARAMS_FIELD_DENSITY,
                                "EF": _lib.PARAMS_FIELD_EF, "EF_KEY": _lib.PARAMS_FIELD_EF_KEY,
                                "SPARSIFIER": _lib.PARAMS_FIELD_SPARSIFIER,
                                "ZERO_FRACTION": _lib.PARAMS_FIELD_ZERO_FRACTION,
                                "LOAD_FACTOR": _lib.PARAMS_FIELD_LOAD_FACTOR,
                                "SEED": _lib.PARAMS_FIELD_SEED, "SHAPE": _lib.PARAMS_FIELD_SHAPE,
                                "RANK": _lib.PARAMS_FIELD_RANK, "WARM_START": _lib.PARAMS_FIELD_WARM_START,
                                "START_ITER": _lib.PARAMS_FIELD_START_ITER,
                                "MIN_COMPRESSION_RATE": _lib.PARAMS_FIELD_MIN_COMPRESSION_RATE})
        # every Params field sets its own bit, and together they set every bit
        from cc_coll._params import _FIELDS
        self.assertEqual(sorted(bit for _, bit in _FIELDS.values()), sorted(bits.values()))
        self.assertEqual(list(_FIELDS), list(cc_coll.Params.__slots__))
        stats = re.findall(r"CC_COLL_STATS_FIELD_(\w+)\s*=\s*\(1ULL << (\d+)\)", header_text())
        self.assertEqual(sum(1 << int(b) for _, b in stats), _lib.STATS_FIELD_ALL)
        # every stats bit has its field in StatsStruct (same name, lower case)
        self.assertEqual({name.lower() for name, _ in stats},
                         {name for name, _ in _lib.StatsStruct._fields_ if name != "mask"})


class Prototypes(unittest.TestCase):
    def test_every_header_function_is_declared(self):
        # Every function of the C API has its ctypes prototype, but the one
        # that takes a C MPI_Comm (Python passes Fortran handles).
        header = set(re.findall(r"CC_COLL_API\s[^;{]*?\b(cc_coll_\w+)\s*\(", header_text()))
        self.assertIn("cc_coll_allreduce_group", header)
        declared = {name for name, fn in vars(_lib.lib).items()
                    if name.startswith("cc_coll_") and getattr(fn, "argtypes", None) is not None}
        self.assertEqual(header - declared, {"cc_coll_comm_create_versioned"})


class Loading(unittest.TestCase):
    def test_loaded_from_env(self):
        if os.environ.get("CC_COLL_LIBRARY"):
            self.assertEqual(cc_coll.library_path, os.environ["CC_COLL_LIBRARY"])

    def test_bad_env_path_is_an_import_error(self):
        r = run_python("import cc_coll", {"CC_COLL_LIBRARY": "/nonexistent/libcc_coll.so.0"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError", r.stderr)
        self.assertIn("CC_COLL_LIBRARY=/nonexistent/libcc_coll.so.0", r.stderr)

    def test_dynamic_loader_fallback(self):
        lib = _lib.library_path
        r = run_python("import cc_coll; print(cc_coll.library_path)",
                       {"LD_LIBRARY_PATH": os.path.dirname(os.path.abspath(lib))}, ["CC_COLL_LIBRARY"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_not_found_message(self):
        r = run_python("import cc_coll", {"LD_LIBRARY_PATH": "/nonexistent"}, ["CC_COLL_LIBRARY"])
        if r.returncode == 0:
            self.skipTest("a libcc_coll is installed system-wide")
        self.assertIn("ImportError: cc_coll: cannot load the libcc_coll shared library", r.stderr)
        self.assertIn("set CC_COLL_LIBRARY", r.stderr)


class Settings(unittest.TestCase):
    def test_settings(self):
        s = {x["name"]: x for x in cc_coll.settings()}
        self.assertEqual(len(s), _lib.lib.cc_coll_setting_count())
        for name in ("METHOD", "DENSITY", "SPARSIFIER", "ZERO_FRACTION", "LOAD_FACTOR", "SEED", "EF",
                     "EF_MAX_BYTES", "STATE_MAX_BYTES", "LOG_LEVEL"):
            self.assertIn(name, s)
            self.assertEqual(s[name]["env_var"], "CC_COLL_" + name)
            self.assertTrue(s[name]["doc"])
        if "CC_COLL_DENSITY" not in os.environ:
            self.assertEqual(s["DENSITY"]["value"], s["DENSITY"]["default"])
            self.assertFalse(s["DENSITY"]["from_env"])

    def test_settings_from_env(self):
        code = ("import cc_coll\n"
                "s = {x['name']: x for x in cc_coll.settings()}\n"
                "print(s['DENSITY']['value'], s['DENSITY']['from_env'], s['DENSITY']['error'] is None)\n"
                "print(s['METHOD']['from_env'], s['METHOD']['error'])\n")
        r = run_python(code, {"CC_COLL_DENSITY": "0.25", "CC_COLL_METHOD": "zip"})
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "0.25 True True")
        self.assertTrue(lines[1].startswith("False "), lines[1])
        self.assertIn("CC_COLL_METHOD", lines[1])

    def test_build_info(self):
        info = cc_coll.build_info()
        self.assertEqual(set(info), {"library", "cuda", "fortran", "mpi_cuda_aware", "cuda_devices"})

    def test_main(self):
        r = subprocess.run([sys.executable, "-m", "cc_coll"], stdout=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        self.assertEqual(r.returncode, 0)
        self.assertIn("CC_COLL_DENSITY", r.stdout)
        self.assertIn("methods: %s\n" % ", ".join(m.name.lower() for m in cc_coll.Method), r.stdout)


class FakeDeviceBuffer:
    """An object with the CUDA Array Interface (no device memory behind it:
    the pointer is never dereferenced here)."""

    def __init__(self, shape, typestr="<f4", strides=None, readonly=False, ptr=0x7f0000000000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, readonly),
                                         "strides": strides, "version": 3}


class DeviceArrays(unittest.TestCase):
    def test_wrapping(self):
        if not cc_coll.build_info()["cuda"]:
            with self.assertRaisesRegex(TypeError, "built without CUDA"):
                cc_coll.DeviceArray(FakeDeviceBuffer((4,)))
            return
        d = cc_coll.DeviceArray(FakeDeviceBuffer((3, 4)))
        self.assertEqual((d.shape, d.ndim, d.size, d.nbytes, d.dtype), ((3, 4), 2, 12, 48, np.dtype(np.float32)))
        self.assertTrue(d.flags.c_contiguous and d.flags.writeable)
        self.assertEqual(d.ctypes.data, 0x7f0000000000)
        flat = d.reshape(-1)
        self.assertEqual((flat.shape, flat.ctypes.data), ((12,), d.ctypes.data))
        part = flat[2:5]
        self.assertEqual((part.shape, part.ctypes.data), ((3,), d.ctypes.data + 8))
        self.assertEqual(flat[10:].size, 2)
        self.assertIs(part.obj, d.obj)
        self.assertRaises(ValueError, d.reshape, 5)
        self.assertRaises(TypeError, flat.__getitem__, 3)
        self.assertRaises(TypeError, d.__getitem__, slice(0, 1))
        half = cc_coll.DeviceArray(FakeDeviceBuffer((8,), "<f2", readonly=True))
        self.assertEqual(half.dtype, np.dtype(np.float16))
        self.assertFalse(half.flags.writeable)
        # C-contiguous strides are contiguous, others are not
        self.assertTrue(cc_coll.DeviceArray(FakeDeviceBuffer((2, 3), strides=(12, 4))).flags.c_contiguous)
        strided = cc_coll.DeviceArray(FakeDeviceBuffer((2, 3), strides=(4, 8)))
        self.assertFalse(strided.flags.c_contiguous)
        self.assertRaises(ValueError, strided.reshape, -1)
        with self.assertRaisesRegex(TypeError, "__cuda_array_interface__"):
            cc_coll.DeviceArray(np.zeros(3))


class NoMpi(unittest.TestCase):
    def test_comm_needs_initialised_mpi(self):
        # This process never initialises MPI.
        with self.assertRaises(cc_coll.Error) as cm:
            cc_coll.Comm(0)
        self.assertEqual(cm.exception.status, cc_coll.Status.MPI_NOT_INITIALIZED)

    def test_comm_argument_type(self):
        for bad in (None, "world", 1.5, True):
            with self.assertRaises(TypeError):
                cc_coll.Comm(bad)
        with self.assertRaises(ValueError):
            cc_coll.Comm(1 << 40)

    def test_error(self):
        e = cc_coll.Error(cc_coll.Status.INVALID_ARG, "cc_coll_allreduce: params->density = 0 is outside (0, 1]")
        self.assertIsInstance(e.status, cc_coll.Status)
        self.assertEqual(str(e), "CC_COLL_ERR_INVALID_ARG: cc_coll_allreduce: params->density = 0 is outside (0, 1]")
        self.assertEqual(cc_coll.Error(-99).status, -99)
        self.assertTrue(cc_coll.Error(cc_coll.Status.MPI).message)
        import pickle
        e2 = pickle.loads(pickle.dumps(e))
        self.assertEqual((e2.status, e2.message), (e.status, e.message))
        self.assertIs(type(e2), cc_coll.InvalidArgError)

    # The exception class of every status but OK, named after it.
    STATUS_ERRORS = {
        "NULL_BUFFER": "NullBufferError", "INVALID_DTYPE": "InvalidDtypeError", "INVALID_OP": "InvalidOpError",
        "INVALID_METHOD": "InvalidMethodError", "COUNT_OVERFLOW": "CountOverflowError",
        "INVALID_COMM": "InvalidCommError", "INVALID_PARAMS": "InvalidParamsError", "INVALID_ARG": "InvalidArgError",
        "MPI": "MPIError", "MPI_NOT_INITIALIZED": "MPINotInitializedError",
        "VERSION_MISMATCH": "VersionMismatchError", "CONFIG": "ConfigError", "NOT_SUPPORTED": "NotSupportedError",
        "NO_MEMORY": "NoMemoryError", "INTERNAL": "InternalError", "EF_LIMIT": "EFLimitError",
        "MISMATCH": "MismatchError", "CUDA": "CUDAError",
    }

    def test_error_class_per_status(self):
        self.assertEqual(set(self.STATUS_ERRORS), {s.name for s in cc_coll.Status if s != cc_coll.Status.OK})
        for name, cls_name in self.STATUS_ERRORS.items():
            status = cc_coll.Status[name]
            cls = getattr(cc_coll, cls_name)
            self.assertIn(cls_name, cc_coll.__all__)
            self.assertTrue(issubclass(cls, cc_coll.Error) and cls is not cc_coll.Error, cls_name)
            self.assertEqual(cls.STATUS, status)
            self.assertTrue(cls.__doc__ and cls.__doc__.startswith("Status.%s: " % name), cls_name)
            # Error(status, message), as the library's status comes back, builds the subclass
            e = cc_coll.Error(int(status), "the message")
            self.assertIs(type(e), cls)
            self.assertEqual((e.status, e.message), (status, "the message"))
            # and the subclass takes its message alone
            e = cls("why")
            self.assertEqual((e.status, e.message, str(e)), (status, "why", "CC_COLL_ERR_%s: why" % name))
            with self.assertRaises(cc_coll.Error):
                raise e
        self.assertIs(type(cc_coll.Error(-99)), cc_coll.Error)
        with self.assertRaisesRegex(TypeError, "needs a status"):
            cc_coll.Error()
        # the library's own statuses come back as their classes
        with self.assertRaises(cc_coll.VersionMismatchError):
            cc_coll.check_version(cc_coll.ABI_MAJOR + 1, 0)
        with self.assertRaises(cc_coll.MPINotInitializedError):
            cc_coll.Comm(0)

    def test_stats_type(self):
        import dataclasses
        import warnings
        s = cc_coll.Stats(calls=2, bytes_uncompressed=800, bytes_wire=100)
        self.assertTrue(dataclasses.is_dataclass(s))
        self.assertEqual((s.calls, s.bytes_wire, s.ratio), (2, 100, 8.0))
        self.assertEqual(cc_coll.Stats(bytes_uncompressed=8).ratio, float("inf"))
        self.assertEqual(s.as_dict()["bytes_uncompressed"], 800)
        # every field is described in the class's docstring
        for f in dataclasses.fields(cc_coll.Stats):
            self.assertRegex(cc_coll.Stats.__doc__, r"\n    %s +-- " % f.name)
        # the dict of earlier versions: item access still works, deprecated
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertEqual(s["bytes_wire"], 100)
            with self.assertRaises(KeyError):
                s["no_such_counter"]
        self.assertTrue(caught and all(issubclass(w.category, DeprecationWarning) for w in caught))
        self.assertIn("stats.bytes_wire", str(caught[0].message))
        self.assertEqual(dict(zip(s.keys(), (getattr(s, k) for k in s))), s.as_dict())

    def test_params_struct(self):
        from cc_coll._params import _params
        p = _params("topk", 0.5, True, 7)
        self.assertEqual(p.mask, 0xF)
        self.assertEqual((p.method, p.density, p.ef, p.ef_key), (1, 0.5, 1, 7))
        self.assertEqual(_params(None, None, None, None).mask, 0)
        self.assertEqual(_params(None, None, False, None).mask, _lib.PARAMS_FIELD_EF)
        self.assertEqual(_params(None, None, None, (1 << 64) - 1).ef_key, (1 << 64) - 1)
        with self.assertRaises(ValueError):
            _params("zip", None, None, None)
        with self.assertRaises(ValueError):
            _params(None, None, None, -1)
        with self.assertRaises(TypeError):
            _params(None, "0.5", None, None)
        with self.assertRaises(TypeError):
            _params(None, None, "yes", None)

    def test_sketch_params(self):
        from cc_coll._params import _params
        p = _params("sketch", 0.25, False, None, "threshold", 0.9, 0.75, (1 << 64) - 1)
        self.assertEqual(p.mask, 0xF7)  # all but EF_KEY
        self.assertEqual((p.method, p.density, p.ef, p.sparsifier, p.zero_fraction, p.load_factor, p.seed),
                         (2, 0.25, 0, 1, 0.9, 0.75, (1 << 64) - 1))
        p = _params(method=cc_coll.Method.SKETCH, sparsifier=cc_coll.Sparsifier.TOPK, seed=0)
        self.assertEqual(p.mask, _lib.PARAMS_FIELD_METHOD | _lib.PARAMS_FIELD_SPARSIFIER | _lib.PARAMS_FIELD_SEED)
        self.assertEqual((p.method, p.sparsifier, p.seed), (2, 0, 0))
        self.assertEqual(_params(zero_fraction=0).mask, _lib.PARAMS_FIELD_ZERO_FRACTION)
        self.assertEqual(_params(load_factor=1).mask, _lib.PARAMS_FIELD_LOAD_FACTOR)
        # unknown integer values are left for the library to reject
        self.assertEqual(_params(sparsifier=7).sparsifier, 7)
        with self.assertRaisesRegex(ValueError, "sparsifier = 'bloom' is not one of 'topk', 'threshold'"):
            _params(sparsifier="bloom")
        with self.assertRaises(ValueError):
            _params(seed=1 << 64)
        with self.assertRaises(ValueError):
            _params(seed=-1)
        for bad in ({"seed": 1.0}, {"seed": True}, {"zero_fraction": "0.5"}, {"load_factor": "x"},
                    {"sparsifier": 1.5}):
            with self.assertRaises(TypeError, msg=str(bad)):
                _params(**bad)

    def test_lowrank_params(self):
        from cc_coll._params import _params
        p = _params(method="lowrank", shape=(6, 7), rank=4, warm_start=False, start_iter=2,
                    min_compression_rate=1.5)
        self.assertEqual(p.mask, _lib.PARAMS_FIELD_METHOD | _lib.PARAMS_FIELD_SHAPE | _lib.PARAMS_FIELD_RANK
                         | _lib.PARAMS_FIELD_WARM_START | _lib.PARAMS_FIELD_START_ITER
                         | _lib.PARAMS_FIELD_MIN_COMPRESSION_RATE)
        self.assertEqual((p.method, p.rows, p.cols, p.rank, p.warm_start, p.start_iter, p.min_compression_rate),
                         (3, 6, 7, 4, 0, 2, 1.5))
        # one int is (rows, 0): cols = count / rows
        self.assertEqual((_params(shape=5).rows, _params(shape=5).cols), (5, 0))
        self.assertEqual(_params(shape=[2, 0]).mask, _lib.PARAMS_FIELD_SHAPE)
        self.assertEqual(_params(start_iter=(1 << 64) - 1).start_iter, (1 << 64) - 1)
        self.assertEqual(_params(warm_start=True).warm_start, 1)
        # values are the library's to judge
        self.assertEqual(_params(rank=0).rank, 0)
        self.assertEqual(_params(warm_start=3).warm_start, 3)
        self.assertEqual(_params(min_compression_rate=0.5).min_compression_rate, 0.5)
        for bad in ({"shape": (1, 2, 3)}, {"shape": "3x4"}, {"shape": (1.5, 2)}, {"shape": (True, 1)},
                    {"rank": 1.0}, {"rank": "2"}, {"warm_start": "yes"}, {"start_iter": 2.0},
                    {"min_compression_rate": "2"}):
            with self.assertRaises(TypeError, msg=str(bad)):
                _params(**bad)
        for bad in ({"shape": (-1, 2)}, {"shape": (2, 1 << 64)}, {"rank": 1 << 31}, {"start_iter": -1}):
            with self.assertRaises(ValueError, msg=str(bad)):
                _params(**bad)

    def test_params_object(self):
        P = cc_coll.Params
        p = P(method=cc_coll.Method.LOWRANK, rank=2, shape=(4, 0))
        self.assertEqual(p.method, cc_coll.Method.LOWRANK)
        self.assertEqual((p.rank, p.shape, p.density), (2, (4, 0), None))
        self.assertEqual(P(method="LowRank", rank=2, shape=4), p)
        self.assertNotEqual(P(rank=2), p)
        self.assertEqual(hash(P(method="lowrank", rank=2, shape=(4, 0))), hash(p))
        self.assertEqual(repr(p), "Params(method='lowrank', shape=(4, 0), rank=2)")
        self.assertEqual(p.to_dict(), {"method": cc_coll.Method.LOWRANK, "shape": (4, 0), "rank": 2})
        q = p.replace(rank=4, shape=None, ef_key=9)
        self.assertEqual(q.to_dict(), {"method": cc_coll.Method.LOWRANK, "rank": 4, "ef_key": 9})
        self.assertEqual(p.rank, 2)  # immutable
        with self.assertRaises(AttributeError):
            p.rank = 3
        with self.assertRaises(TypeError):
            p.replace(colour=1)
        with self.assertRaises(TypeError):
            P(colour=1)
        self.assertEqual(P("topk", 0.5)._struct().mask, _lib.PARAMS_FIELD_METHOD | _lib.PARAMS_FIELD_DENSITY)
        # what the calls accept as params
        from cc_coll._params import _as_params, _merge
        self.assertEqual(_as_params(None), P())
        self.assertIs(_as_params(p), p)
        self.assertEqual(_as_params({"method": "lowrank", "rank": 2, "shape": 4}), p)
        with self.assertRaisesRegex(TypeError, "params"):
            _as_params({"colour": 1})
        with self.assertRaises(TypeError):
            _as_params([("rank", 2)])
        # keyword fields go over params
        self.assertEqual(_merge(p, {"rank": 8, "density": None}).to_dict(),
                         {"method": cc_coll.Method.LOWRANK, "shape": (4, 0), "rank": 8})

    def test_matrix_shape(self):
        # the Python mirror of the library's shape resolution (for Q's size)
        from cc_coll._params import _matrix_shape
        self.assertEqual(_matrix_shape(12, (3, 4), 2), (3, 4, 2))
        self.assertEqual(_matrix_shape(12, (3, 0), 8), (3, 4, 3))
        self.assertEqual(_matrix_shape(12, None, 1), (4, 3, 1))      # ceil(sqrt(12)) = 4
        self.assertEqual(_matrix_shape(16, None, 9), (4, 4, 4))
        self.assertEqual(_matrix_shape(17, None, 2), (5, 4, 2))      # padded: 5 x 4 = 20
        self.assertEqual(_matrix_shape(1, None, 4), (1, 1, 1))
        self.assertEqual(_matrix_shape((1 << 40) + 1, None, 1)[:2], ((1 << 20) + 1, (1 << 20)))
        # (0, 0) is the near-square view on request (no shape: an allreduce
        # sends the tensor densely; the mirror resolves it like the library)
        self.assertEqual(_matrix_shape(12, (0, 0), 1), (4, 3, 1))
        self.assertEqual(_matrix_shape(17, (0, 0), 2), (5, 4, 2))
        for bad in ((12, (5, 0)), (12, (3, 5)), (12, (0, 12)), (12, (0, 1)), (0, None), (0, (0, 0))):
            self.assertIsNone(_matrix_shape(bad[0], bad[1], 1), bad)

    def test_bfloat16(self):
        x = np.array([0.0, -0.0, 1.0, -2.5, 3.140625, np.inf, -np.inf, 2.0 ** 100], dtype=np.float32)
        self.assertTrue(np.array_equal(cc_coll.from_bfloat16(cc_coll.to_bfloat16(x)), x))
        self.assertEqual(cc_coll.to_bfloat16(np.float32(1.0))[()], 0x3F80)
        # ties to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7
        self.assertEqual(cc_coll.to_bfloat16(np.float32(1 + 2 ** -8))[()], 0x3F80)
        self.assertEqual(cc_coll.to_bfloat16(np.float32(1 + 3 * 2 ** -8))[()], 0x3F82)
        self.assertTrue(np.isnan(cc_coll.from_bfloat16(cc_coll.to_bfloat16(np.float32(np.nan)))))


class Api(unittest.TestCase):
    """help() answers and the type hints are there (PEP 561: py.typed)."""

    def test_help_answers(self):
        import pydoc
        self.assertEqual(api_checks.undocumented(cc_coll), [])
        text = pydoc.render_doc(cc_coll.Stats, renderer=pydoc.plaintext)
        self.assertIn("bytes_wire         -- the bytes this rank sent", text)
        text = pydoc.render_doc(cc_coll.Comm.allreduce, renderer=pydoc.plaintext)
        self.assertRegex(text, r"sendbuf: [^,]*ndarray")
        self.assertIn("Allreduce numpy arrays over the communicator", text)

    def test_type_hints(self):
        self.assertEqual(api_checks.unannotated(cc_coll), [])
        import typing
        hints = typing.get_type_hints(cc_coll.Comm.stats)
        self.assertIs(hints["return"], cc_coll.Stats)

    def test_py_typed_installed(self):
        # pip installs the marker with the package (from a copy of python/:
        # building writes into the source folder)
        import shutil
        import tempfile
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(cc_coll.__file__), "py.typed")))
        r = subprocess.run([sys.executable, "-m", "pip", "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            self.skipTest("no pip in %s" % sys.executable)
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(SOURCE_DIR, "python"), os.path.join(tmp, "src"),
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
            r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                                "--no-index", "--target", os.path.join(tmp, "t"), os.path.join(tmp, "src")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                               timeout=300)
            if r.returncode != 0 and "setuptools" in r.stderr and "No module named" in r.stderr:
                self.skipTest("no setuptools in %s" % sys.executable)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.isfile(os.path.join(tmp, "t", "cc_coll", "py.typed")))
        # and CMake's install rule (CC_COLL_INSTALL_PYTHON) copies it
        with open(os.path.join(SOURCE_DIR, "python", "CMakeLists.txt")) as f:
            self.assertRegex(f.read(), r'install\(DIRECTORY cc_coll .*\n.*PATTERN "py\.typed"')


class Docs(unittest.TestCase):
    def test_docs_link_the_tested_examples(self):
        # Each page links its example; an excerpt it shows (the ```python
        # block after "<!-- example: python/examples/NAME -->") is lines of
        # the file in the file's order, indentation aside ("..." omits lines),
        # as cmake/check_docs_example.cmake checks the C, C++ and Fortran pages.
        for page, names in (("python.md", ("allreduce.py", "powersgd.py")), ("pytorch.md", ("train_ddp.py",))):
            with open(os.path.join(SOURCE_DIR, "docs", page)) as f:
                docs = f.read()
            for name in names:
                path = os.path.join(SOURCE_DIR, "python", "examples", name)
                self.assertTrue(os.path.isfile(path), path)
                self.assertIn("](../python/examples/%s)" % name, docs,
                              "docs/%s must link python/examples/%s" % (page, name))
                marker = "<!-- example: python/examples/%s -->\n```python\n" % name
                if marker not in docs:
                    continue
                excerpt = docs.split(marker, 1)[1].split("\n```", 1)[0].split("\n")
                with open(path) as f:
                    lines = [l.strip() for l in f.read().split("\n")]
                at = 0
                for line in (l.strip() for l in excerpt):
                    if not line or re.fullmatch(r"(#\s*)?(\.\.\.|\u2026)", line):
                        continue
                    if line not in lines[at:]:
                        self.fail("docs/%s: the excerpt of %s has a line that is not in the file (or not in "
                                  "the file's order):\n  %s" % (page, name, line))
                    at += lines[at:].index(line) + 1

    def test_examples_exit_cleanly(self):
        # the examples return normally: no os._exit, MPI finalised by mpi4py
        folder = os.path.join(SOURCE_DIR, "python", "examples")
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as f:
                    text = f.read()
                self.assertNotIn("os._exit", text, name)

    def test_import_without_torch(self):
        # cc_coll itself never imports PyTorch (only cc_coll.torch does).
        code = "import sys, cc_coll; sys.exit(1 if 'torch' in sys.modules else 0)"
        self.assertEqual(subprocess.call([sys.executable, "-c", code]), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
