# SPDX-License-Identifier: BSD-3-Clause
"""The types the package's annotations use (for type checkers and help();
nothing here is checked at run time beyond what each call checks)."""

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._enums import Dtype, Op, Sparsifier

if TYPE_CHECKING:  # pragma: no cover
    from ._arrays import DeviceArray
    from ._methods import Method
    from ._params import Params

#: A buffer of the collectives: a numpy array, or a DeviceArray (CUDA memory).
Buffer = Union[np.ndarray, "DeviceArray"]
#: A sequence of buffers (a group).
Buffers = Sequence[Buffer]
#: An Op, its name ("sum", "avg") or its value.
OpLike = Union[Op, str, int]
#: A Dtype, its name ("f32", "bf16", ...) or its value; None: the array's own.
DtypeLike = Optional[Union[Dtype, str, int]]
#: A Method, its name ("none", "topk", ...) or its id.
MethodLike = Union["Method", str, int]
#: A Sparsifier, its name or its value.
SparsifierLike = Union[Sparsifier, str, int]
#: Per-call parameters: a Params, a dict of its fields, or None.
ParamsLike = Optional[Union["Params", Mapping[str, Any]]]
#: A matrix view: (rows, cols), or rows (cols = count / rows).
ShapeLike = Union[int, Tuple[int, int]]
#: An on/off field: True/False (or 1/0).
Flag = Union[bool, int]

__all__ = ["Buffer", "Buffers", "OpLike", "DtypeLike", "MethodLike", "SparsifierLike", "ParamsLike", "ShapeLike",
           "Flag"]
