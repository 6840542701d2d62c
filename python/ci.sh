#!/usr/bin/env bash
# CI for the Python package, on the host backend, in two fresh virtualenvs:
#
# 1. python3 with `pip install ./python pytest` (which builds libfleche.so
#    with ./bazelw and the extension fleche._fast with the C compiler, and
#    brings NumPy from PyPI): the whole suite.
# 2. Debian's python3 with Debian's CPU build of torch and its NumPy
#    (python3-torch, seen through --system-site-packages) and the same
#    libfleche.so, the package built with FLECHE_TORCH=1 (fleche._torch_view
#    against that torch: its headers are libtorch-dev's and pybind11-dev's;
#    --no-build-isolation, so that the build sees torch): the whole suite
#    again, with torch imported, under --require-torch-cpu: the torch CPU
#    cases (tests/test_torch_cpu.py, and test_fast.py's with and without
#    the reader) must run and pass (a skip fails; conftest.py lists them at
#    the end).
#
# The GPU cases skip in both, with their reasons (-rs). Why Debian's torch:
# PyPI's torch for x86_64 Linux is the CUDA build, whose wheel (539 MB) does
# not import without its NVIDIA libraries (3.0 GB in all); the CPU-only
# wheels live on the PyTorch project's own index, which these machines do not
# reach. python3-torch (1.13) comes with 148 MB of packages. Like ./bazelw,
# the script installs the Debian packages it needs when they are missing.
#
# Run from anywhere: python/ci.sh. Needs python3 with venv and its headers,
# PyPI and Debian's package archive (python3-dev: Python.h for the extension).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/fleche-ci.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cd "$root"

debian_python=/usr/bin/python3
headers="$("$debian_python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if ! "$debian_python" -c "import ensurepip, torch" >/dev/null 2>&1 || [ ! -f "$headers/Python.h" ] ||
   [ ! -f /usr/include/torch/csrc/autograd/python_variable.h ] ||
   [ ! -f /usr/include/pybind11/pybind11.h ]; then
  echo "python/ci.sh: installing python3-torch python3-venv python3-dev libtorch-dev pybind11-dev" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    python3-torch python3-venv python3-dev libtorch-dev pybind11-dev >&2
fi

python3 -m venv "$tmp/numpy"
"$tmp/numpy/bin/pip" install -q --disable-pip-version-check ./python pytest
lib="$("$tmp/numpy/bin/python" -c "import fleche; print(fleche.library_path())")"
"$debian_python" -m venv --system-site-packages "$tmp/torch"
"$tmp/torch/bin/pip" install -q --disable-pip-version-check pytest
FLECHE_TORCH=1 FLECHE_LIBRARY="$lib" "$tmp/torch/bin/pip" install -q --disable-pip-version-check \
  --no-build-isolation ./python

# Run outside python/ so `import fleche` finds the installed package, not the source.
export FL_BACKEND=host
"$tmp/numpy/bin/python" -m pytest python/tests -q -rs -p no:cacheprovider
"$tmp/torch/bin/python" -c 'import numpy, torch; print("torch", torch.__version__, "numpy", numpy.__version__)'
"$tmp/torch/bin/python" -m pytest python/tests -q -rs -p no:cacheprovider --require-torch-cpu
