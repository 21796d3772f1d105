#!/usr/bin/env bash
# cmake --install into a fresh prefix, then as a user would:
# - build examples/plugin against the installed package (find_package(collcheck),
#   collcheck::plugin) and verify it with the installed collcheck;
# - run a real MPI program with the installed `collcheck run` (which must find
#   the installed libcollcheck-mpi.so);
# - cpack -G DEB makes a .deb that holds the same files.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d /tmp/collcheck-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/collcheck include/collcheck/plugin.h; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; cat "$work/install.log"; exit 1; }
done
lib=$(find "$prefix" -name libcollcheck-mpi.so | head -1)
cfg=$(find "$prefix" -name collcheckConfig.cmake | head -1)
[ -n "$lib" ] && [ -n "$cfg" ] || { echo "FAIL: libcollcheck-mpi.so or collcheckConfig.cmake not installed"; exit 1; }
echo "installed: $prefix/bin/collcheck, $lib, $cfg"

cmake -S "$src/examples/plugin" -B "$work/plugin" -DCMAKE_PREFIX_PATH="$prefix" -DCOLLCHECK_REQUIRE_PACKAGE=ON \
  > "$work/plugin-configure.log" || { cat "$work/plugin-configure.log"; exit 1; }
grep "naive_allreduce: collcheck" "$work/plugin-configure.log"
grep -q "$prefix" "$work/plugin-configure.log" || { echo "FAIL: the plugin did not use the installed package"; exit 1; }
cmake --build "$work/plugin" > "$work/plugin-build.log" || { cat "$work/plugin-build.log"; exit 1; }
timeout 300 "$prefix/bin/collcheck" verify --impl "plugin:$work/plugin/libnaive_allreduce.so" --cases 40 --seed 7 \
  --progress off > "$work/verify.log" 2>&1 || { echo "FAIL: verify of the installed plugin"; cat "$work/verify.log"; exit 1; }
tail -1 "$work/verify.log"

if command -v mpicc > /dev/null && command -v mpirun > /dev/null; then
  mpicc -g -o "$work/skipped" "$src/examples/mpi/skipped_barrier.c"
  root=(); [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
  set +e
  timeout 120 "$prefix/bin/collcheck" run --deadline 2 --dir "$work/run" -- \
    mpirun --oversubscribe "${root[@]}" -np 2 "$work/skipped" > "$work/run.log" 2>&1
  code=$?
  set -e
  grep -q "missing_rank \[rank 1\]" "$work/run.log" && [ $code -eq 1 ] || {
    echo "FAIL: the installed collcheck run (exit $code)"; cat "$work/run.log"; exit 1; }
  grep "missing_rank" "$work/run.log" | head -1
else
  echo "SKIP: collcheck run part: mpicc or mpirun not installed"
fi

(cd "$build" && cpack -G DEB -B "$work/deb" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(find "$work/deb" -maxdepth 1 -name 'collcheck_*.deb' | head -1)
[ -n "$deb" ] || { echo "FAIL: cpack made no .deb"; cat "$work/cpack.log"; exit 1; }
dpkg-deb -c "$deb" > "$work/deb.list"
for f in bin/collcheck libcollcheck-mpi.so include/collcheck/plugin.h collcheckConfig.cmake; do
  grep -q "$f" "$work/deb.list" || { echo "FAIL: $f not in $deb"; cat "$work/deb.list"; exit 1; }
done
dpkg-deb -f "$deb" Package Version Depends
echo "PASS: install, find_package(collcheck) + collcheck::plugin, collcheck run from the prefix, and $(basename "$deb")"
