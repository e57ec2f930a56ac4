# SPDX-License-Identifier: BSD-3-Clause
"""The one place that names the package's version and the C ABI it expects.

Keep these equal to CC_COLL_VERSION_* in include/cc_coll.h: the test
python/tests/test_package.py checks that they are.
"""

#: Version of the libcc_coll C header this package mirrors (its ctypes
#: structures, enumerations and prototypes).
ABI_MAJOR = 0
ABI_MINOR = 8
ABI_PATCH = 0

#: Version of the Python package itself (read by pyproject.toml).
__version__ = "0.8.0"
