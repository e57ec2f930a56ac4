# SPDX-License-Identifier: BSD-3-Clause
"""What test_package.py (cc_coll) and test_torch_hooks.py (cc_coll.torch)
check of a module's public API: help() answers (docstrings) and the type
hints are there."""

import inspect


def _public_functions(module):
    """(qualified name, function) of the module's public functions and of the
    public methods and properties (and __init__, __call__) its public
    classes define in the package."""
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj):
            for klass in obj.__mro__:
                if not klass.__module__.startswith("cc_coll"):
                    continue
                for attr, value in vars(klass).items():
                    if attr.startswith("_") and attr not in ("__init__", "__call__"):
                        continue
                    f = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                    if isinstance(f, property):
                        f = f.fget
                    if inspect.isfunction(f):
                        yield "%s.%s" % (name, attr), f


def undocumented(module):
    """The module, and the public classes, functions, methods and
    properties of it (as __all__ names them), that have no docstring."""
    missing = [] if module.__doc__ else [module.__name__]
    for name in module.__all__:
        obj = getattr(module, name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not obj.__doc__:
            missing.append(name)
    missing += [name for name, f in _public_functions(module)
                if not f.__doc__ and not name.endswith(("__init__", "__call__"))]
    return sorted(set(missing))


def unannotated(module):
    """'name: parameters' of the public functions and methods whose
    parameters (self and cls aside) or return value have no type hint."""
    out = []
    for name, f in _public_functions(module):
        sig = inspect.signature(f)
        missing = [p.name for p in sig.parameters.values()
                   if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
        if sig.return_annotation is inspect.Signature.empty:
            missing.append("return")
        if missing:
            out.append("%s: %s" % (name, ", ".join(missing)))
    return sorted(set(out))
