#!/usr/bin/env bash
# CI for the Python package: a fresh virtualenv, `pip install ./python pytest`
# (which builds libfleche.so with ./bazelw), then the pytest suites on the
# host backend. Run from anywhere: python/ci.sh. Needs python3 with venv and
# network access to PyPI (numpy, pytest, setuptools).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$(mktemp -d "${TMPDIR:-/tmp}/fleche-venv.XXXXXX")"
trap 'rm -rf "$venv"' EXIT
cd "$root"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check ./python pytest
# Run outside python/ so `import fleche` finds the installed package, not the source.
export FL_BACKEND=host
"$venv/bin/python" -m pytest python/tests -q -p no:cacheprovider
