#!/usr/bin/env bash
# Installs the build into a temporary directory (meson install --destdir) and builds
# what a framework would build against it, from the installed files only:
#   - every installed header compiles on its own (C headers as C99 and C11, C++ headers
#     as C++20, all with -Wall -Wextra -pedantic -Werror), so each is self-contained and
#     everything it includes is installed too;
#   - a C program (C99 and C11) and a C++ program, with pkg-config's --cflags/--libs,
#     link and run against the installed shared library;
#   - the same C program links statically with pkg-config --static (skipped when the
#     system's own dependencies cannot be linked statically);
#   - the shared library has a soname and exports only the public API;
#   - the tuner plugin header and the example plugin are installed;
#   - the C++ headers, compiled as C++17, say first that they need C++20.
# usage: install_test.sh BUILD_DIR SOURCE_DIR   (CC and CXX name the compilers)
set -uo pipefail
build=$1
src=$2
CC=${CC:-cc}
CXX=${CXX:-c++}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/coll-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

if ! meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" >"$tmp/install.log" 2>&1; then
  echo "FAIL: meson install --destdir failed (is the whole project built?)"; cat "$tmp/install.log"; exit 1
fi

# The .pc file says prefix=<configured prefix>; point it into the destdir, as a package
# relocated there would. Everything else in it must follow from ${prefix}.
pc=$(find "$tmp/root" -name collective.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no collective.pc installed"; find "$tmp/root" -type f | head -50; exit 1; }
mkdir -p "$tmp/pc"
prefix=$(sed -n 's/^prefix=//p' "$pc")
sed "s|^prefix=.*|prefix=$tmp/root$prefix|" "$pc" >"$tmp/pc/collective.pc"
export PKG_CONFIG_PATH="$tmp/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cflags=$(pkg-config --cflags collective) || { echo "FAIL: pkg-config --cflags collective"; exit 1; }
libs=$(pkg-config --libs collective) || { echo "FAIL: pkg-config --libs collective"; exit 1; }
incdir=$(pkg-config --variable=includedir collective)
libdir=$(pkg-config --variable=libdir collective)
case "$cflags $libs" in
  *"$src"*|*"$build"*) bad "pkg-config points into the source or build tree: $cflags $libs" ;;
esac
[ -f "$incdir/collective.h" ] || bad "collective.h is not in the includedir $incdir"
[ -f "$incdir/collective/coll_tuner.h" ] || bad "the tuner plugin header is not installed"
ls "$libdir"/libcoll_tuner_table.so >/dev/null 2>&1 || bad "the example tuner plugin is not installed in $libdir"

warn=(-Wall -Wextra -pedantic -Werror)
# Each header alone, as the first and only include of a file, in parallel.
checks=()
for h in "$incdir"/collective.h "$incdir"/collective/*.h; do
  rel=${h#"$incdir"/}
  for std in c99 c11; do
    f="$tmp/h_${rel//\//_}_$std.c"
    printf '#include <%s>\nint coll_header_check;\n' "$rel" >"$f"
    checks+=("$CC -std=$std ${warn[*]} $cflags -fsyntax-only $f")
  done
done
for h in "$incdir"/collective/*.hpp; do  # collective.hpp: consumer.cpp includes it first
  rel=${h#"$incdir"/}
  [ "$rel" = collective/collective.hpp ] && continue
  f="$tmp/h_${rel//\//_}.cpp"
  printf '#include <%s>\nint coll_header_check;\n' "$rel" >"$f"
  checks+=("$CXX -std=c++20 ${warn[*]} $cflags -fsyntax-only $f")
done
pids=()
for i in "${!checks[@]}"; do
  ${checks[$i]} >"$tmp/check$i.log" 2>&1 &
  pids+=($!)
done

# The C++ headers need C++20; an older standard gets one line that says so first, not
# pages of errors about std::span and concepts.
$CXX -std=c++17 -Wfatal-errors $cflags -fsyntax-only "$src/tests/install/consumer.cpp" >"$tmp/cxx17.log" 2>&1 &
cxx17=$!

# The C consumer as C99 and C11, and the C++ one, against the installed shared library.
for std in c99 c11; do
  if $CC -std=$std "${warn[@]}" $cflags "$src/tests/install/consumer.c" -o "$tmp/c_$std" $libs \
      >"$tmp/c_$std.log" 2>&1; then
    LD_LIBRARY_PATH="$libdir" "$tmp/c_$std" || bad "the $std consumer failed"
    # grep reads all of ldd's output (no -q): stopping early could end ldd with SIGPIPE,
    # which pipefail reports as a failure of the pipeline.
    LD_LIBRARY_PATH="$libdir" ldd "$tmp/c_$std" | grep "$libdir/libcollective.so" >/dev/null ||
      bad "the $std consumer did not load libcollective from $libdir"
  else
    bad "the C consumer does not build as $std"; cat "$tmp/c_$std.log"
  fi
done
if $CXX -std=c++20 "${warn[@]}" $cflags "$src/tests/install/consumer.cpp" -o "$tmp/cxx" $libs \
    >"$tmp/cxx.log" 2>&1; then
  LD_LIBRARY_PATH="$libdir" "$tmp/cxx" || bad "the C++ consumer failed"
else
  bad "the C++ consumer does not build"; cat "$tmp/cxx.log"
fi

# Static: Libs.private and Requires.private must carry everything libcollective.a needs.
# A library the system lacks altogether is left out (hwloc.pc asks for -ludev where
# libudev-dev is not installed): that gap is the system's, not libcollective's.
printf 'int main(void) { return 0; }\n' >"$tmp/empty.c"
static=()
deps=()
for w in $(pkg-config --static --libs collective || echo FAILED); do
  case $w in
    FAILED) bad "pkg-config --static --libs collective" ;;
    -lcollective) static+=("$libdir/libcollective.a") ;;
    -l*) if $CC "$tmp/empty.c" -o "$tmp/empty" "$w" >/dev/null 2>&1; then static+=("$w"); deps+=("$w")
         else echo "note: $w is not on this system: left out of the static link"; fi ;;
    *) static+=("$w"); deps+=("$w") ;;
  esac
done
if ! $CC "$tmp/empty.c" -o "$tmp/empty" "${deps[@]}" >/dev/null 2>&1; then
  echo "note: static link not checked: this system cannot link ${deps[*]}"
elif $CC -std=c11 $cflags "$src/tests/install/consumer.c" -o "$tmp/c_static" "${static[@]}" >"$tmp/static.log" 2>&1; then
  "$tmp/c_static" || bad "the statically linked C consumer failed"
else
  bad "a C program does not link statically with pkg-config --static --libs collective"
  grep -m 5 'undefined reference\|cannot find' "$tmp/static.log"
fi

# The shared library: a soname, and no symbols beyond the C API (coll*) and the C++ API
# (collective::...).
so=$(readlink -f "$libdir/libcollective.so")
readelf -d "$so" | grep 'SONAME.*libcollective\.so\.' >/dev/null || bad "$so has no soname"
leaked=$(nm -D --defined-only "$so" | awk '{print $3}' | c++filt |
  grep -Ev '^coll[A-Z][A-Za-z]*$|^(typeinfo for |typeinfo name for |vtable for )?collective::' |
  cut -c 1-160 | head -n 5)
[ -z "$leaked" ] || bad "the shared library exports internal symbols, e.g.:"$'\n'"$leaked"

# The Python package: where /usr/bin/python3 looks for packages of this prefix, recording
# the installed library's path, and importable from there (torch permitting).
if [ -x /usr/bin/python3 ]; then
  pkg=$(find "$tmp/root" -path '*/collective/torch/__init__.py' | head -n 1)
  if [ -z "$pkg" ]; then
    bad "the Python package collective is not installed"
  else
    site=${pkg%/collective/torch/__init__.py}
    grep -q "\"$prefix/" "$site/collective/_install_paths.py" ||
      bad "collective/_install_paths.py does not name the installed library under $prefix"
    if [ "$prefix" = /usr/local ] &&
        ! /usr/bin/python3 -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "${site#"$tmp/root"}"; then
      bad "the Python package went to ${site#"$tmp/root"}, where /usr/bin/python3 does not look"
    fi
    if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
      COLL_LIBRARY="$libdir/libcollective.so" PYTHONPATH="$site" \
        "$build/src/launcher/collectiverun" -np 1 /usr/bin/python3 -c 'import collective.torch as hvd; hvd.init(); assert hvd.size() == 1; hvd.shutdown()' \
        >"$tmp/py.log" 2>&1 || { bad "the installed Python package does not work"; cat "$tmp/py.log"; }
    else
      echo "note: torch is not importable here: the Python package's import not checked"
    fi
  fi
fi

for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then bad "${checks[$i]##* }: header does not compile on its own"; cat "$tmp/check$i.log"; fi
done
if wait $cxx17; then
  bad "the C++ consumer compiled as C++17: the headers no longer need C++20 (update this test and doc/usage.md)"
elif ! grep -m 1 'error' "$tmp/cxx17.log" | grep 'needs C++20' >/dev/null; then
  bad "as C++17 the C++ headers fail without first saying that they need C++20:"; head -n 5 "$tmp/cxx17.log"
fi
[ $fail -eq 0 ] && echo "install test: OK"
exit $fail
