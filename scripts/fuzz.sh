#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# in their own build directory (next to the normal one, suffix -fuzz), then runs each one for a
# bounded time on its committed seed corpus (fuzz/corpus/<target>/) with leak detection on. Any
# crash, leak, undefined behaviour, broken invariant, input slower than 25 s or allocation over
# 2 GiB fails the run; the input that did it is kept under <build>/fuzz-artifacts/.
#   PIPEPLAN_FUZZ_SECONDS  seconds per target (default 60)
#   PIPEPLAN_FUZZ_TARGETS  the targets to run, space-separated (default: all, see fuzz/CMakeLists.txt)
#   PIPEPLAN_FUZZ_PARALLEL targets run at once, one core each (default $(nproc))
#   PIPEPLAN_JOBS          build jobs (default $(nproc))
# New inputs the fuzzer finds go to <build>/fuzz-corpus/<target>/ (reused by later runs); to
# grow the committed seeds, merge them: <build>/fuzz/<target>_fuzzer -merge=1 fuzz/corpus/<target> DIR
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$(bash "$repo/scripts/build_dir.sh")-fuzz"
seconds=${PIPEPLAN_FUZZ_SECONDS:-60}
jobs=${PIPEPLAN_JOBS:-$(nproc)}
if [[ ! "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: PIPEPLAN_FUZZ_SECONDS must be a whole number of seconds > 0, got '$seconds'" >&2
  exit 2
fi

bash "$repo/scripts/setup.sh"
if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  cached_source=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build_dir/CMakeCache.txt")
  if [[ "$cached_source" != "$repo" ]]; then
    echo "fuzz: $build_dir was configured for $cached_source, not $repo; remove it" >&2
    exit 1
  fi
else
  # Asserts stay on (no NDEBUG): a failed one is a bug the fuzzer should report. LibTorch,
  # tests and benchmarks are left out: only the planner and the CLI's parsing are fuzzed.
  echo "fuzz: configuring $build_dir (clang, libFuzzer, ASan + UBSan)"
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only" \
    -DPIPEPLAN_FUZZ=ON -DPIPEPLAN_TORCH=OFF -DPIPEPLAN_PYTHON_PACKAGE=OFF -DPIPEPLAN_BUILD_TESTS=OFF -DPIPEPLAN_BUILD_BENCH=OFF \
    -DPIPEPLAN_WERROR=ON >/dev/null
fi
echo "fuzz: building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs" --target pipeplan_fuzzers

if [[ -n "${PIPEPLAN_FUZZ_TARGETS:-}" ]]; then
  read -r -a targets <<<"$PIPEPLAN_FUZZ_TARGETS"
else
  mapfile -t targets < <(find "$repo/fuzz" -maxdepth 1 -name '*_fuzzer.cc' -printf '%f\n' |
    sed 's/_fuzzer\.cc$//' | sort)
fi

for name in "${targets[@]}"; do
  if [[ ! -x "$build_dir/fuzz/${name}_fuzzer" ]]; then
    echo "fuzz: no target '$name' ($build_dir/fuzz/${name}_fuzzer was not built)" >&2
    exit 2
  fi
  if [[ -z "$(ls -A "$repo/fuzz/corpus/$name" 2>/dev/null)" ]]; then
    echo "fuzz: no seeds for '$name' in $repo/fuzz/corpus/$name" >&2
    exit 1
  fi
done

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$build_dir/fuzz-artifacts" "$build_dir/fuzz-logs"

# One target for its time on one core; its summary line goes to fuzz-logs/<name>.summary,
# starting with FAILED when it found something.
run_target() {
  local name=$1
  local fuzzer=$build_dir/fuzz/${name}_fuzzer
  local work=$build_dir/fuzz-corpus/$name
  local log=$build_dir/fuzz-logs/$name.log
  local result=$build_dir/fuzz-logs/$name.summary
  mkdir -p "$work"
  # New inputs go to the first corpus directory, so the committed seeds stay as they are.
  if "$fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -detect_leaks=1 \
      -print_final_stats=1 -artifact_prefix="$build_dir/fuzz-artifacts/$name-" \
      "$work" "$repo/fuzz/corpus/$name" >"$log" 2>&1; then
    local runs coverage
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$log")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)
    echo "$name: ${runs:-? runs}, ${coverage:-cov: ?}, corpus $(ls "$work" | wc -l) new inputs" \
      >"$result"
  else
    local artifact
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1 || true)
    echo "FAILED $name: ${artifact:-see $log}" >"$result"
  fi
}

# The targets are independent and each runs on one core: as many at once as there are cores
# (PIPEPLAN_FUZZ_PARALLEL), each for its full time.
parallel=${PIPEPLAN_FUZZ_PARALLEL:-$(nproc)}
if [[ ! "$parallel" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: PIPEPLAN_FUZZ_PARALLEL must be a whole number > 0, got '$parallel'" >&2
  exit 2
fi
start=$SECONDS
running=0
for name in "${targets[@]}"; do
  rm -f "$build_dir/fuzz-logs/$name.summary"
  echo "fuzz: $name for ${seconds}s ($(ls "$repo/fuzz/corpus/$name" | wc -l) seeds, log" \
    "$build_dir/fuzz-logs/$name.log)"
  run_target "$name" &
  running=$((running + 1))
  if ((running >= parallel)); then
    wait -n || true  # a target's verdict is its summary file
    running=$((running - 1))
  fi
done
wait || true

failed=()
summary=()
for name in "${targets[@]}"; do
  line=$(cat "$build_dir/fuzz-logs/$name.summary" 2>/dev/null || echo "FAILED $name: no result")
  if [[ "$line" == FAILED* ]]; then
    tail -n 40 "$build_dir/fuzz-logs/$name.log" >&2
    echo "fuzz: $name FAILED; reproduce with: $build_dir/fuzz/${name}_fuzzer <input> (${line#FAILED })" >&2
    failed+=("$name")
    line="$name: FAILED (${line#FAILED "$name": })"
  fi
  summary+=("$line")
done

echo "fuzz: summary ($((SECONDS - start)) s of fuzzing, $parallel at a time)"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crash, leak or undefined behaviour in ${#targets[@]} targets"
