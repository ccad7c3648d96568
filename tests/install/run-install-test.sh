#!/usr/bin/env bash
# The install test (ctest Install.ConsumerProjects, label install; tests/install/CMakeLists.txt):
# installs a build tree into a fresh prefix, checks what was installed, then configures,
# builds and runs the consumer projects next to this script against that prefix only:
#   core-consumer    find_package(mona COMPONENTS core), links mona::core; must not link
#                    LibTorch; computes a monotonic alignment checked against hand values
#   audio-consumer   find_package(mona COMPONENTS audio), links mona::audio (no LibTorch;
#                    mona::io comes with it): PCM in, resampled, log-mel frames checked
#   stream-consumer  find_package(mona COMPONENTS nn stream) (builds with LibTorch only):
#                    streaming decoding equals Recognizer::recognize. In a torch-free
#                    build, its configure step must fail saying that nn is not installed.
#
#   run-install-test.sh --build DIR --work DIR --version X.Y.Z --torch ON|OFF
#                       [--config NAME] [--generator NAME] [--cxx COMPILER] [--flags FLAGS]
#
# --flags go to the consumers' compile and link lines (the sanitizer flags of a
# MONA_SANITIZE build, which mona's static libraries need at link time). Every step is
# printed; the first that fails ends the script, naming the step. The work folder is
# removed on success and kept on failure.
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build= work= version= torch= config=Release generator= cxx= flags=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2 ;;
    --work) work=$2 ;;
    --version) version=$2 ;;
    --torch) torch=$2 ;;
    --config) config=$2 ;;
    --generator) generator=$2 ;;
    --cxx) cxx=$2 ;;
    --flags) flags=$2 ;;
    *) echo "run-install-test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
for v in build work version torch; do
  [[ -n "${!v}" ]] || { echo "run-install-test.sh: --$v is required" >&2; exit 2; }
done

step_name="setup"
step() {
  step_name="$*"
  echo
  echo "==> [${SECONDS}s] $*"
}
fail() {
  echo >&2
  echo "install test FAILED at step \"$step_name\": $*; files kept in $work" >&2
  exit 1
}
# (Once: not again in the subshell of a failing pipeline.)
trap 'rc=$?; if [[ $BASH_SUBSHELL -eq 0 ]]; then
        echo >&2; echo "install test FAILED at step \"$step_name\" (exit $rc); files kept in $work" >&2
      fi' ERR
run() {
  echo "+ $*"
  "$@"
}

step "fresh work folder $work"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
prefix=$work/prefix

step "install $build into $prefix"
run cmake --install "$build" --prefix "$prefix" --config "$config" | sed 's/^/   /'

step "check the installed files"
libs=(core io data audio)
programs=(mona-prepare-cmudict)
absent_libs=(nn stream train)
if [[ "$torch" == ON ]]; then
  libs+=(nn stream train)
  programs+=(mona mona-cb-toy mona-make-spoken-commands)
  absent_libs=()
fi
config_file=$(find "$prefix" -path '*/cmake/mona/monaConfig.cmake' | head -n 1)
[[ -n "$config_file" ]] || fail "no cmake/mona/monaConfig.cmake under $prefix"
cmake_dir=$(dirname "$config_file")
libdir=$(dirname "$(dirname "$cmake_dir")")
echo "package configuration in $cmake_dir"
[[ -f "$cmake_dir/monaConfigVersion.cmake" ]] || fail "no monaConfigVersion.cmake in $cmake_dir"
for lib in "${libs[@]}"; do
  [[ -f "$cmake_dir/mona-$lib-targets.cmake" ]] || fail "no mona-$lib-targets.cmake in $cmake_dir"
  compgen -G "$libdir/libmona_$lib.*" >/dev/null || fail "no libmona_$lib.* in $libdir"
  compgen -G "$prefix/include/mona/$lib/*.h" >/dev/null || fail "no headers in $prefix/include/mona/$lib"
  echo "  $lib: $(cd "$libdir" && echo libmona_$lib.*), $(ls "$prefix/include/mona/$lib" | wc -l) headers"
done
for lib in "${absent_libs[@]}"; do
  [[ ! -e "$prefix/include/mona/$lib" ]] || fail "torch-free build installed include/mona/$lib"
  ! compgen -G "$libdir/libmona_$lib.*" >/dev/null || fail "torch-free build installed libmona_$lib"
  ! compgen -G "$cmake_dir/mona-$lib-targets*" >/dev/null || fail "torch-free build installed mona-$lib-targets"
done
for p in "${programs[@]}"; do
  [[ -x "$prefix/bin/$p" ]] || fail "no program bin/$p"
done
echo "  programs: ${programs[*]}"

consumer_args=(-DCMAKE_BUILD_TYPE="$config" -DCMAKE_PREFIX_PATH="$prefix"
               -DMONA_EXPECTED_PREFIX="$prefix" -DMONA_EXPECTED_VERSION="$version")
[[ -z "$generator" ]] || consumer_args+=(-G "$generator")
[[ -z "$cxx" ]] || consumer_args+=(-DCMAKE_CXX_COMPILER="$cxx")
[[ -z "$flags" ]] || consumer_args+=(-DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags")

step "configure core-consumer (find_package(mona COMPONENTS core))"
run cmake -S "$here/core-consumer" -B "$work/core-consumer" "${consumer_args[@]}"
step "build core-consumer"
run cmake --build "$work/core-consumer"
core_program=$work/core-consumer/core_consumer
step "check that core-consumer links no LibTorch"
echo "+ ldd $core_program"
ldd "$core_program" | sed 's/^/   /'
if ldd "$core_program" | grep -E 'lib(torch|c10)[^ ]*\.so' >/dev/null; then
  fail "core_consumer links LibTorch"
fi
step "run core-consumer"
run "$core_program"

step "configure audio-consumer (find_package(mona COMPONENTS audio))"
run cmake -S "$here/audio-consumer" -B "$work/audio-consumer" "${consumer_args[@]}"
step "build audio-consumer"
run cmake --build "$work/audio-consumer"
audio_program=$work/audio-consumer/audio_consumer
step "check that audio-consumer links no LibTorch"
if ldd "$audio_program" | grep -E 'lib(torch|c10)[^ ]*\.so' >/dev/null; then
  fail "audio_consumer links LibTorch"
fi
step "run audio-consumer"
run "$audio_program"

if [[ "$torch" == ON ]]; then
  step "configure stream-consumer (find_package(mona COMPONENTS nn stream))"
  run cmake -S "$here/stream-consumer" -B "$work/stream-consumer" "${consumer_args[@]}"
  step "build stream-consumer"
  run cmake --build "$work/stream-consumer"
  step "run stream-consumer"
  run "$work/stream-consumer/stream_consumer"
else
  step "configure stream-consumer against the torch-free install: must fail naming nn"
  echo "+ cmake -S $here/stream-consumer -B $work/stream-consumer ..."
  if cmake -S "$here/stream-consumer" -B "$work/stream-consumer" "${consumer_args[@]}" \
       >"$work/stream-consumer.log" 2>&1; then
    cat "$work/stream-consumer.log"
    fail "find_package(mona COMPONENTS nn stream) succeeded on a torch-free install"
  fi
  sed 's/^/   /' "$work/stream-consumer.log"
  # CMake wraps the message: compare with the lines joined.
  tr -s ' \n' '  ' <"$work/stream-consumer.log" | grep -q "nn (not installed)" ||
    fail "the configure error does not say that component nn is not installed"
fi

step "done: every step passed in ${SECONDS}s"
rm -rf "$work"
