#!/usr/bin/env bash
# Packs into DIR what a GPU machine lacks to run pipeplan's GPU acceptance run, so that there
# it is one command: DIR/gpu_check.sh (docs/gpu.md).
#   bin/  pipeplan, pipeplan-torch and the GPU test binary (torch_cuda_tests)
#   lib/  libpipeplan_torch_ops.so and the shared libraries they load that are neither
#         glibc's nor torch's (protobuf, the C++ runtime, ...), found through an $ORIGIN rpath
#   gpu_check.sh, make_stage_modules.py (its TorchScript stages), runtime_side_by_side.py,
#         partition_gloo.py
#   python/ and build_python.sh: the Python package for a Python other than the wheel's (the GPU
#         machines have 3.12): the bindings' sources and headers and the planner's libraries from
#         the wheel's build (scripts/build_wheel.sh, -fPIC); build_python.sh compiles the rest there
# Built by scripts/build.sh (the project's build directory, RelWithDebInfo: -O2) and stripped,
# against the pinned torch wheel (scripts/setup_torch.sh: 2.11.0+cu130 with NCCL 2.28.9), the
# build the GPU machines have: their LibTorch, CUDA runtime and NCCL are loaded there.
# At most 60 MiB. --no-build packs the build as it is (the bundle's own test does).
set -euo pipefail

usage() { echo "usage: scripts/gpu_bundle.sh [--no-build] DIR" >&2; exit 2; }
build=1
dir=""
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_bundle: unknown option '$arg'" >&2; usage ;;
    *) [[ -z "$dir" ]] || usage; dir=$arg ;;
  esac
done
[[ -n "$dir" ]] || usage

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(bash "$repo/scripts/build_dir.sh")
limit_mib=60

if (( build )); then
  bash "$repo/scripts/setup.sh"
  bash "$repo/scripts/setup_torch.sh" >/dev/null
  bash "$repo/scripts/build.sh" -DPIPEPLAN_BUILD_TESTS=ON
fi
if [[ ! -f "$build_dir/torch_ext/libpipeplan_torch_ops.so" ]]; then
  echo "gpu_bundle: no torch extension in $build_dir (run scripts/build.sh with LibTorch)" >&2
  exit 1
fi
torch_prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
torch_lib=$(cd "$torch_prefix/../../lib" && pwd)  # .../site-packages/torch/lib
site=$(cd "$torch_lib/../.." && pwd)

# A fresh directory, filled in a temporary one first: nothing half-written is left as DIR.
rm -rf "$dir.partial"
mkdir -p "$dir.partial"
bundle=$(readlink -f "$dir.partial")
cmake --install "$build_dir" --prefix "$dir.partial" --component gpu_bundle --strip >/dev/null

# The shared libraries the bundled files need, except glibc's (every Linux has its own) and
# those torch's wheels bring (the GPU machine's torch provides them).
is_provided() {
  case "$(basename "$1")" in
    libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|libutil.so.*|ld-linux*|libresolv.so.*) return 0 ;;
  esac
  case "$(readlink -f "$1")" in
    "$site"/*|/usr/local/cuda*|"$bundle"/*) return 0 ;;  # the last: already bundled
  esac
  return 1
}
# The Python package's sources and the planner's -fPIC archives (scripts/device_python/).
pack_python() {
  local wheel_build=${PIPEPLAN_WHEEL_BUILD_DIR:-$build_dir-wheel} py="$dir.partial/python"
  if (( build )); then  # the wheel itself is not wanted, only its build's archives
    local wheelhouse
    wheelhouse=$(mktemp -d)
    bash "$repo/scripts/build_wheel.sh" "$wheelhouse" >/dev/null
    rm -rf "$wheelhouse"
  fi
  if [[ ! -f "$wheel_build/planner/libpipeplan_planner.a" ]]; then
    echo "gpu_bundle: no wheel build in $wheel_build (run scripts/build_wheel.sh)" >&2
    exit 1
  fi
  mkdir -p "$py/lib" "$py/include" "$py/src" "$py/pipeplan"
  find "$wheel_build" -name 'libpipeplan_*.a' -exec cp {} "$py/lib/" \;
  local include
  for include in "$repo"/app/include "$repo"/cli/include "$repo"/planner/include \
                 "$repo"/planner/*/include; do
    cp -r "$include"/. "$py/include/"
  done
  cp "$repo"/python/src/*.cc "$repo"/python/src/*.h "$py/src/"
  cp "$repo"/python/pipeplan/*.py "$repo"/python/pipeplan/py.typed "$repo"/python/pipeplan_*.py \
     "$py/pipeplan/"
  cp "$repo/scripts/device_python/CMakeLists.txt" "$py/CMakeLists.txt"
  cp "$repo/scripts/device_python/build_python.sh" "$dir.partial/build_python.sh"
}
export LD_LIBRARY_PATH="$torch_lib:$site/nvidia/cu13/lib:$site/nvidia/nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for file in "$dir.partial"/bin/* "$dir.partial"/lib/*.so; do
  while read -r path; do
    [[ -n "$path" ]] || continue
    if [[ "$path" == "not" ]]; then
      echo "gpu_bundle: $file has a library that cannot be found:" >&2
      ldd "$file" | grep "not found" >&2
      exit 1
    fi
    is_provided "$path" || cp -L "$path" "$dir.partial/lib/"
  done < <(ldd "$file" | awk '/=>/ { print $3 }')
done
strip --strip-unneeded "$dir.partial"/lib/*.so* 2>/dev/null || true
cp "$repo/scripts/gpu_check.sh" "$dir.partial/gpu_check.sh"
cp "$repo/examples/make_stage_modules.py" "$dir.partial/make_stage_modules.py"
cp "$repo/bench/runtime_side_by_side.py" "$dir.partial/runtime_side_by_side.py"
cp "$repo/bench/partition_gloo.py" "$dir.partial/partition_gloo.py"
pack_python
chmod +x "$dir.partial/gpu_check.sh"

size_kib=$(du -sk "$dir.partial" | cut -f1)
if (( size_kib > limit_mib * 1024 )); then
  echo "gpu_bundle: the bundle is $((size_kib / 1024)) MiB, over its $limit_mib MiB limit" >&2
  du -sk "$dir.partial"/*/* | sort -n | tail -5 >&2
  exit 1
fi
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "gpu_bundle: $dir ($((size_kib / 1024)) MiB of $limit_mib): $(cd "$dir" && echo bin/* lib/*)"
echo "gpu_bundle: on the GPU machine: $dir/gpu_check.sh [RESULTS.md]"
