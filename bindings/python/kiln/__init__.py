"""kiln: lazy arrays with numpy-like ops, kiln.compile with fused kernels, and language models.

Everything is defined in the extension module kiln._kiln (C++, nanobind); this package
re-exports it and adds kiln.compile's decorator form. docs/python.md is the guide.
"""

import sys as _sys

from . import _kiln
from ._kiln import *  # noqa: F401,F403  (the arrays, ops, dtypes, devices and settings)
from ._kiln import CompiledFunction, Error, distributed, llm, random

# `import kiln.random`, `import kiln.llm` and `import kiln.distributed` find the extension's submodules.
_sys.modules[__name__ + ".random"] = random
_sys.modules[__name__ + ".distributed"] = distributed
_sys.modules[__name__ + ".llm"] = llm

__version__ = "0.1.0"


def compile(fn=None, *, shapeless=False, name=None):
    """Compiles fn: traced on its first call for each signature, then replayed.

    Usable as ``kiln.compile(fn)``, ``@kiln.compile`` or ``@kiln.compile(shapeless=True)``.
    Arguments may be arrays, constants (None, bool, int, float, str) and tuples, lists and
    dicts of them, positional or by keyword. As with MLX's ``mx.compile``, the arrays are the
    inputs and everything else is part of the cache key: a new constant value traces again.
    shapeless traces once per rank and dtype instead of per shape. A compiled function called
    while another is being traced is inlined into it. Calls release the GIL while kiln works.
    """
    if fn is None:
        return lambda f: compile(f, shapeless=shapeless, name=name)
    if name is None:
        name = getattr(fn, "__name__", "function")
    return CompiledFunction(fn, shapeless, name)
