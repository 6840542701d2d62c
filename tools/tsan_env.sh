#!/bin/sh
# tsan_env.sh: the --run_under wrapper of --config=tsan (.bazelrc): runs the
# command with TSAN_OPTIONS naming tools/tsan.supp, found in the runfiles of
# the test (bazel test) or of this wrapper (bazel run). Options already in
# TSAN_OPTIONS are kept after it.
#
# history_size=7, the most TSan takes: each suppression names only the
# intended racy access of its race, so when that access came first TSan must
# restore its stack from the thread's history. With the default history the
# stress run now and then reports a row seqlock race with only the writer's
# stack, the reader's lost.
for dir in "${TEST_SRCDIR:-}" "$0.runfiles"; do
  if [ -n "$dir" ] && [ -f "$dir/fleche/tools/tsan.supp" ]; then
    export TSAN_OPTIONS="suppressions=$dir/fleche/tools/tsan.supp history_size=7 ${TSAN_OPTIONS:-}"
    exec "$@"
  fi
done
echo "tsan_env.sh: tools/tsan.supp is not in the runfiles" >&2
exit 2
