#!/usr/bin/env bash
# package_test (ctest, label integration, normal builds): the installed
# package works for a user.  Installs this build into a temporary prefix
# (cmake --install), then
#   - checks the files a user looks for: the CMake package, qslab.pc, the man pages;
#   - configures and builds tests/package/consumer with
#     -DCMAKE_PREFIX_PATH=<prefix> (find_package(qslab)): one program on
#     qslab::qslab (libqslab.so), one on qslab::qslab_static, and, when the
#     build has the drop-in, programs on qslab::malloc and qslab::malloc_static;
#     runs each;
#   - compiles consumer/main.c with cc and `pkg-config --cflags --libs qslab`
#     (PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig) and runs it.
# A few seconds.  Nothing outside the temporary directory is written.
#
# Usage: package_test.sh BUILD_DIR CONSUMER_DIR LIBDIR CMAKE CC GENERATOR
set -euo pipefail

build=$1 consumer=$2 libdir=$3 cmake=$4 cc=$5 generator=$6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qslab-package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
# Run a command quietly; on failure show its output.
quiet() {
    if ! "$@" >"$tmp/log" 2>&1; then
        cat "$tmp/log" >&2
        fail "$* (exit status above)"
    fi
}

quiet "$cmake" --install "$build" --prefix "$prefix"
echo "installed $build into $prefix"
for f in "$libdir/cmake/qslab/qslabConfig.cmake" "$libdir/cmake/qslab/qslabConfigVersion.cmake" \
         "$libdir/cmake/qslab/qslabTargets.cmake" "$libdir/pkgconfig/qslab.pc" \
         include/qslab.h include/qslab/kmem.h "$libdir/libqslab.a" "$libdir/libqslab.so" \
         share/man/man1/qslabinfo.1 share/man/man3/qslab.3 bin/qslabinfo bin/qslab-plot; do
    [ -e "$prefix/$f" ] || fail "make install did not install $f"
done
# qslabtop and its page, when the build has it (ncurses found)
if [ -x "$build/tools/qslabtop" ]; then
    for f in share/man/man1/qslabtop.1 bin/qslabtop; do
        [ -e "$prefix/$f" ] || fail "make install did not install $f"
    done
fi

# --- CMake: find_package(qslab) -------------------------------------------
quiet "$cmake" -S "$consumer" -B "$tmp/consumer" -G "$generator" \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release
quiet "$cmake" --build "$tmp/consumer" -j 2
progs=(consumer_shared consumer_static)
if [ -e "$prefix/$libdir/libqslab-malloc.so" ]; then
    progs+=(consumer_malloc consumer_malloc_static)
fi
for p in "${progs[@]}"; do
    [ -x "$tmp/consumer/$p" ] || fail "the consumer project did not build $p"
    out=$("$tmp/consumer/$p") || fail "$p (find_package build) exited with status $?"
    echo "cmake $p: $out"
done
# The shared one runs on the installed libqslab.so, the static one on no libqslab.so.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
needed "$tmp/consumer/consumer_shared" | grep -qx 'libqslab.so.0' ||
    fail "consumer_shared (qslab::qslab) does not link libqslab.so.0"
if needed "$tmp/consumer/consumer_static" | grep -q '^libqslab'; then
    fail "consumer_static (qslab::qslab_static) links a shared qslab"
fi
if [ ${#progs[@]} -gt 2 ]; then
    needed "$tmp/consumer/consumer_malloc" | grep -qx 'libqslab-malloc.so.0' ||
        fail "consumer_malloc (qslab::malloc) does not link libqslab-malloc.so.0"
fi

# --- pkg-config ------------------------------------------------------------
command -v pkg-config >/dev/null 2>&1 ||
    fail "pkg-config not found: install Debian's pkgconf (make deps, scripts/install-deps)"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs qslab) || fail "pkg-config --cflags --libs qslab"
echo "pkg-config --cflags --libs qslab: $flags"
case " $flags " in
*" -I$prefix/include "*) ;;
*) fail "qslab.pc's Cflags do not name $prefix/include" ;;
esac
# shellcheck disable=SC2086  # flags are words
quiet "$cc" -o "$tmp/pc_consumer" "$consumer/main.c" $flags -Wl,-rpath,"$prefix/$libdir"
out=$("$tmp/pc_consumer") || fail "the pkg-config build exited with status $?"
echo "pkg-config consumer: $out"
echo "package_test: ok"
