#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# in their own build directory (next to the normal one, suffix -fuzz), then runs each one for a
# bounded time on its committed seed corpus (fuzz/corpus/<target>/) with leak detection on. Any
# crash, leak, undefined behaviour, broken invariant, input slower than 25 s or allocation over
# 2 GiB fails the run; the input that did it is kept under <build>/fuzz-artifacts/.
#   PIPEPLAN_FUZZ_SECONDS  seconds per target (default 60)
#   PIPEPLAN_FUZZ_TARGETS  the targets to run, space-separated (default: all, see fuzz/CMakeLists.txt)
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
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g" \
    -DPIPEPLAN_FUZZ=ON -DPIPEPLAN_TORCH=OFF -DPIPEPLAN_BUILD_TESTS=OFF -DPIPEPLAN_BUILD_BENCH=OFF \
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

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$build_dir/fuzz-artifacts" "$build_dir/fuzz-logs"
failed=()
summary=()
start=$SECONDS
for name in "${targets[@]}"; do
  fuzzer=$build_dir/fuzz/${name}_fuzzer
  seeds=$repo/fuzz/corpus/$name
  if [[ ! -x "$fuzzer" ]]; then
    echo "fuzz: no target '$name' ($fuzzer was not built)" >&2
    exit 2
  fi
  if [[ -z "$(ls -A "$seeds" 2>/dev/null)" ]]; then
    echo "fuzz: no seeds for '$name' in $seeds" >&2
    exit 1
  fi
  work=$build_dir/fuzz-corpus/$name
  log=$build_dir/fuzz-logs/$name.log
  mkdir -p "$work"
  echo "fuzz: $name for ${seconds}s ($(ls "$seeds" | wc -l) seeds, log $log)"
  # New inputs go to the first corpus directory, so the committed seeds stay as they are.
  if "$fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -detect_leaks=1 \
      -print_final_stats=1 -artifact_prefix="$build_dir/fuzz-artifacts/$name-" \
      "$work" "$seeds" >"$log" 2>&1; then
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$log")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    summary+=("$name: ${runs:-? runs}, ${coverage:-cov: ?}, corpus $(ls "$work" | wc -l) new inputs")
  else
    tail -n 40 "$log" >&2
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz: $name FAILED; reproduce with: $fuzzer ${artifact:-<input>}" >&2
    summary+=("$name: FAILED (${artifact:-see $log})")
    failed+=("$name")
  fi
done

echo "fuzz: summary ($((SECONDS - start)) s of fuzzing)"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crash, leak or undefined behaviour in ${#targets[@]} targets"
