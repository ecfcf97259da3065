"""Build hook: the compiled fast path, one extension module per tier, each
beside the Python it speeds up and with its contract in that package's
``compiled.py``:

- ``pt2chakra.chakra._fast`` (``chakra/_fast.c``): the formats' readers and
  writers (the .et frame scan and lean node decode, the converter's node
  encoder and passes, the host ET's ops and IOInfo);
- ``pt2chakra.simulation._fast`` (``simulation/_fast.c``): the simulator's
  kernels (dependency arrays, CPU threads, the plain replay, the critical
  path, the summaries).

The helpers both share are static inline in ``chakra/_fast.h``.

Everything else is configured in pyproject.toml. The extensions are optional:
where no C compiler is available the build goes on without them, and every
user takes the pure-Python path (same results, slower).
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SHARED_HEADER = "src/pt2chakra/chakra/_fast.h"
# Every warning is an error where the compiler is gcc or clang (the "unix"
# compiler type): the C is kept warning-free. Another compiler (MSVC) gets
# its defaults. A build that fails leaves the pure-Python path, except where
# PT2CHAKRA_REQUIRE_COMPILED is set (CI): there the install fails with it.
STRICT_FLAGS = {"unix": ["-Wall", "-Werror"]}
REQUIRE_COMPILED_ENV = "PT2CHAKRA_REQUIRE_COMPILED"
# The C units by tier: (module, source). tests/packaging/test_layers.py reads
# this table to check that each source lives in its module's package.
C_UNITS = (
    ("pt2chakra.chakra._fast", "src/pt2chakra/chakra/_fast.c"),
    ("pt2chakra.simulation._fast", "src/pt2chakra/simulation/_fast.c"),
)


class StrictBuildExt(build_ext):
    """build_ext with the compiler's strict flags added once it is known,
    and every extension required where PT2CHAKRA_REQUIRE_COMPILED says so."""

    def build_extensions(self) -> None:
        flags = STRICT_FLAGS.get(self.compiler.compiler_type, [])
        required = os.environ.get(REQUIRE_COMPILED_ENV, "") not in ("", "0")
        for ext in self.extensions:
            ext.extra_compile_args = [*flags, *ext.extra_compile_args]
            ext.optional = ext.optional and not required
        super().build_extensions()


setup(
    ext_modules=[
        Extension(name, sources=[source], depends=[SHARED_HEADER], optional=True)
        for name, source in C_UNITS
    ],
    cmdclass={"build_ext": StrictBuildExt},
)
