"""Build hook: the compiled fast path of the simulator's .et reader.

Everything else is configured in pyproject.toml. The extension is optional:
where no C compiler is available the build goes on without it, and the
readers use their pure-Python path (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pt2chakra.chakra._fast",
            sources=["src/pt2chakra/chakra/_fast.c"],
            optional=True,
        )
    ]
)
