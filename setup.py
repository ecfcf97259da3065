"""Build hook: the compiled fast path (``chakra/_fast.c``: the .et frame
scan and lean node decode, the converter's node encoder, the host ET's IOInfo,
the simulator's dependency arrays; its contract: ``chakra/compiled.py``).

Everything else is configured in pyproject.toml. The extension is optional:
where no C compiler is available the build goes on without it, and every user
takes its pure-Python path (same results, slower).
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
