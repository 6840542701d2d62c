#!/bin/sh
# tsan_env.sh: the --run_under wrapper of --config=tsan (.bazelrc): runs the
# command with TSAN_OPTIONS naming tools/tsan.supp, found in the runfiles of
# the test (bazel test) or of this wrapper (bazel run). Options already in
# TSAN_OPTIONS are kept after it.
for dir in "${TEST_SRCDIR:-}" "$0.runfiles"; do
  if [ -n "$dir" ] && [ -f "$dir/fleche/tools/tsan.supp" ]; then
    export TSAN_OPTIONS="suppressions=$dir/fleche/tools/tsan.supp ${TSAN_OPTIONS:-}"
    exec "$@"
  fi
done
echo "tsan_env.sh: tools/tsan.supp is not in the runfiles" >&2
exit 2
