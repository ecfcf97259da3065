#!/usr/bin/env bash
# The compiled fast path under AddressSanitizer and UBSan: every tier's C
# module (setup.py's C_UNITS) built again with the sanitizers into a scratch
# copy of the package (the source tree and its own build stay as they are),
# then the parity tests named in the contract tables (chakra/compiled.py,
# simulation/compiled.py) run against that copy. An out-of-bounds read or
# write, a use after free, or undefined behaviour in the C fails the run.
#
#   scripts/check_c_sanitized.sh [PYTEST_ARGS...]   (PYTHON: the interpreter,
#                                                   default .venv/bin/python)
#
# Python itself is not instrumented: the ASan runtime is preloaded
# (LD_PRELOAD, as it must be first), PYTHONMALLOC=malloc sends the C's
# PyMem_* buffers through the allocator ASan watches, and leaks are not
# reported (the interpreter keeps objects until exit). The runtimes come
# with gcc (Debian: libasan8, libubsan1, which gcc depends on).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
CC=${CC:-cc}
SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=undefined"

fail() { echo "check_c_sanitized: $*" >&2; exit 2; }

libasan=$("$CC" -print-file-name=libasan.so)
[ -f "$libasan" ] || fail "no AddressSanitizer runtime for $CC (install gcc's libasan)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/pt2chakra-asan.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# The package's Python files, without the regular build's extensions.
cp -r src/pt2chakra "$scratch/pt2chakra"
find "$scratch/pt2chakra" \( -name '*.so' -o -name '__pycache__' \) -prune -exec rm -rf {} +

# Every module required (the build fails rather than leaving the Python path).
CFLAGS="$SANITIZE -fno-omit-frame-pointer -O1 -g" LDFLAGS="$SANITIZE" \
    PT2CHAKRA_REQUIRE_COMPILED=1 \
    "$PYTHON" setup.py -q build_ext --build-lib "$scratch" --build-temp "$scratch/build" \
    > "$scratch/build.log" 2>&1 || { cat "$scratch/build.log" >&2; fail "the sanitized build failed"; }

for module in "$scratch"/pt2chakra/*/_fast*.so; do  # CFLAGS honoured, not an ordinary build
    # ldd's whole output first: piped into grep -q, ldd could be cut off by
    # SIGPIPE once grep has its match, and pipefail would call that a failure
    linked=$(ldd "$module")
    grep -q libasan <<< "$linked" || fail "$module is not built with AddressSanitizer"
done

export LD_PRELOAD=$libasan
export ASAN_OPTIONS=detect_leaks=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export PYTHONMALLOC=malloc
export PYTHONPATH=$scratch:tests
unset PT2CHAKRA_PURE_PYTHON

# The parity tests of both tables, from the sanitized copy (checked: a
# module found elsewhere would test the regular build instead).
"$PYTHON" - "$scratch" > "$scratch/parity.txt" <<'EOF'
import sys

from helpers import compiled_tiers

scratch = sys.argv[1]
for tier in compiled_tiers():
    module = tier.fast_path()
    if module is None or not module.__file__.startswith(scratch):
        raise SystemExit(f"check_c_sanitized: {tier.COMPILED_MODULE} is not the sanitized build")
    for entry in tier.CONTRACT:
        print(entry.parity_test)
EOF
mapfile -t parity < "$scratch/parity.txt"
[ "${#parity[@]}" -gt 0 ] || fail "no parity tests found in the contract tables"
# --capture=sys: a sanitizer's report, written to file descriptor 2 as the
# process ends, reaches the terminal instead of pytest's capture file.
"$PYTHON" -m pytest -q -p no:cacheprovider --capture=sys "${parity[@]}" "$@"
