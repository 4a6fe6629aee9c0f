#!/usr/bin/env bash
# test-consumer.sh - another project uses resdiag the three usual ways, each
# with a small consumer written here (one step of one layer into a run file,
# read back by the tool):
#   subproject   consumer/subprojects/resdiag (a copy of this tree) found by
#                dependency('resdiag'); none of resdiag's tests, examples or
#                benchmark configured, so Check is not needed;
#   installed    `meson install --destdir` of BUILD, found through its
#                resdiag.pc with no other .pc visible (as on a machine
#                without libhdf5-dev): HDF5 only in Libs.private; the
#                static link and the staged install exactly as doc/USING.md
#                gives them (its blocks, read from the page);
#   uninstalled  build/meson-uninstalled/resdiag-uninstalled.pc gives the
#                include directory, and a consumer compiles with it.
# Offline: no wrap is downloaded.
# Usage: test-consumer.sh SOURCE_ROOT BUILD_ROOT
set -u
src=$1
build=$2
tool=$build/resdiag
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

# ------------------------------------------------------------ the consumer
mkdir -p "$dir/consumer"
cat >"$dir/consumer/meson.build" <<'EOF'
project('consumer', 'c')
dep = dependency('resdiag')
executable('consumer', 'consumer.c', dependencies : dep)
EOF
cat >"$dir/consumer/consumer.c" <<'EOF'
#include <stdio.h>
#include <resdiag.h>

int main(int argc, char **argv)
{
    static float x[4 * 8];
    for (int i = 0; i < 4 * 8; i++) x[i] = (float)(i % 5) - 2.0f;
    const char *subs[] = { "mlp" };
    resdiag_model model;
    resdiag_model_init(&model);
    model.n_layers = 1;
    model.d_model = 8;
    model.n_sublayers = 1;
    model.sublayer_names = subs;
    resdiag *rd = NULL;
    resdiag_status st = resdiag_open(&rd, argv[argc - 1], &model, NULL);
    if (st == RESDIAG_OK) st = resdiag_step_begin(rd, 7);
    if (st == RESDIAG_OK) st = RESDIAG_FWD(rd, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, 4, 8));
    if (st == RESDIAG_OK) st = resdiag_step_end(rd);
    if (st == RESDIAG_OK) st = resdiag_close(rd);
    else resdiag_destroy(rd);
    if (st != RESDIAG_OK) {
        fprintf(stderr, "consumer: %s\n", resdiag_strerror(st));
        return 1;
    }
    return 0;
}
EOF

# doc_block NAME: the sh block of doc/USING.md that follows its comment
# "... runs this block as it is: NAME"; empty (and a failure) when none.
doc_block() {
    local text
    text=$(awk -v m="runs this block as it is: $1 -->" '
        index($0, m) { f = 1; next }
        f && /^```sh/ { g = 1; next }
        g && /^```/ { exit }
        g { print }' "$src/doc/USING.md")
    [ -n "$text" ] || fail "doc/USING.md: no block marked '$1'"
    printf '%s\n' "$text"
}

# check_run NAME FILE: the run the consumer wrote, read back by the tool.
check_run() {
    expect_exit 0 "$1: resdiag dump" -- "$tool" dump "$2"
    expect_text "$dir/out" "recorded: 1 steps, step 7 .. 7" "$1: dump"
    expect_text "$dir/out" "fwd L0 mlp" "$1: dump"
}

# ------------------------------------------------------------- subproject
# A copy of this tree's tracked files as they are now, without build dirs.
mkdir -p "$dir/consumer/subprojects/resdiag"
if git -C "$src" rev-parse --show-toplevel >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
        tar --null -T - -cf -) | tar -xf - -C "$dir/consumer/subprojects/resdiag"
else
    (cd "$src" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$dir/consumer/subprojects/resdiag"
fi
expect_exit 0 "subproject: meson setup" -- \
    meson setup --wrap-mode=nodownload "$dir/sub-build" "$dir/consumer"
if [ ! -f "$dir/sub-build/build.ninja" ]; then
    tail -n 5 "$dir/out"
else
    meson introspect --tests "$dir/sub-build" >"$dir/tests.json"
    n_tests=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$dir/tests.json")
    [ "$n_tests" -eq 0 ] && pass || fail "subproject: $n_tests tests registered in the consumer"
    meson introspect --targets "$dir/sub-build" >"$dir/targets.json"
    # The library (its kernels, objects, shared and static) and the tool.
    targets=$(python3 -c 'import json, sys; print(" ".join(sorted(
        t["name"] for t in json.load(open(sys.argv[1])) if t["subproject"] == "resdiag")))' \
        "$dir/targets.json")
    want="resdiag resdiag resdiag resdiag_avx2 resdiag_avx512 resdiag_internal resdiag_stats"
    want_portable="resdiag resdiag resdiag resdiag_internal resdiag_stats"
    [ "$targets" = "$want" ] || [ "$targets" = "$want_portable" ] && pass ||
        fail "subproject: targets '$targets', expected '$want'"
    expect_exit 0 "subproject: build" -- ninja -C "$dir/sub-build" -j2
    expect_exit 0 "subproject: consumer runs" -- "$dir/sub-build/consumer" "$dir/sub.h5"
    check_run subproject "$dir/sub.h5"
fi

# --------------------------------------------------------------- installed
stage=$dir/stage
expect_exit 0 "installed: meson install --destdir" -- \
    meson install -C "$build" --no-rebuild --destdir "$stage"
pc=$(find "$stage" -name resdiag.pc | head -n 1)
if [ -z "$pc" ]; then
    fail "installed: no resdiag.pc under the staged install"
else
    pcdir=$(dirname "$pc")
    libdir=$stage$(PKG_CONFIG_LIBDIR=$pcdir pkg-config --variable=libdir resdiag)
    prefix=$(PKG_CONFIG_LIBDIR=$pcdir pkg-config --variable=prefix resdiag)
    # Only the staged .pc is visible: hdf5.pc is not, as without libhdf5-dev.
    export PKG_CONFIG_LIBDIR=$pcdir
    pkgc=(pkg-config --define-variable=prefix="$stage$prefix")
    expect_exit 0 "installed: pkg-config --cflags --libs" -- "${pkgc[@]}" --cflags --libs resdiag
    expect_text "$dir/out" "-I$stage/" "installed: cflags"
    expect_exit 0 "installed: --print-requires" -- "${pkgc[@]}" --print-requires resdiag
    grep -q hdf5 "$dir/out" && fail "installed: hdf5 is a public requirement" || pass
    expect_exit 0 "installed: --print-requires-private" -- "${pkgc[@]}" --print-requires-private resdiag
    grep -q hdf5 "$dir/out" && fail "installed: hdf5 is a private requirement (needs hdf5.pc)" || pass

    # doc/USING.md's own commands, run as the page gives them (in a clean
    # environment, the consumer as trainer.c): the static link, for resdiag
    # installed under the prefix $stage$prefix (the staged resdiag.pc with
    # that prefix, as `meson setup --prefix` would write it), and the
    # staged-install block with STAGE=$stage.
    mkdir -p "$dir/pc-installed" "$dir/doc-static" "$dir/doc-staged"
    sed "s|^prefix=.*|prefix=$stage$prefix|" "$pc" >"$dir/pc-installed/resdiag.pc"
    cp "$dir/consumer/consumer.c" "$dir/doc-static/trainer.c"
    cp "$dir/consumer/consumer.c" "$dir/doc-staged/trainer.c"
    clean=(env -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR -u PKG_CONFIG_SYSROOT_DIR -u LD_LIBRARY_PATH)
    block=$(doc_block static)
    expect_exit 0 "USING.md static link: $block" -- "${clean[@]}" -C "$dir/doc-static" \
        PKG_CONFIG_LIBDIR="$dir/pc-installed" bash -euc "$block"
    expect_exit 0 "static: the program runs" -- "$dir/doc-static/trainer" "$dir/static.h5"
    check_run static "$dir/static.h5"
    # -static: no shared library at all, libresdiag.so least of all
    readelf -d "$dir/doc-static/trainer" | grep -q NEEDED &&
        fail "static: the program needs shared libraries" || pass
    block=$(doc_block staged)
    expect_exit 0 "USING.md staged install: $block" -- "${clean[@]}" -C "$dir/doc-staged" \
        STAGE="$stage" bash -euc "$block"
    check_run staged "$dir/doc-staged/run.h5"
    check_run staged-static "$dir/doc-staged/run-static.h5"
    readelf -d "$dir/doc-staged/trainer-static" | grep -q NEEDED &&
        fail "staged static: the program needs shared libraries" || pass

    rm -rf "$dir/consumer/subprojects"
    # meson has no --define-variable: the .pc of the install at $stage$prefix
    export PKG_CONFIG_LIBDIR=$dir/pc-installed
    expect_exit 0 "installed: meson setup" -- \
        meson setup --wrap-mode=nodownload "$dir/inst-build" "$dir/consumer"
    expect_exit 0 "installed: build" -- ninja -C "$dir/inst-build" -j2
    unset PKG_CONFIG_LIBDIR
    expect_exit 0 "installed: consumer runs" -- \
        env LD_LIBRARY_PATH="$libdir" "$dir/inst-build/consumer" "$dir/inst.h5"
    check_run installed "$dir/inst.h5"
    # It ran the staged library, not one installed elsewhere.
    LD_LIBRARY_PATH=$libdir ldd "$dir/inst-build/consumer" >"$dir/ldd"
    expect_text "$dir/ldd" "$libdir/libresdiag.so" "installed: the staged library"
fi

# ------------------------------------------------------------- uninstalled
export PKG_CONFIG_PATH=$build/meson-uninstalled
expect_exit 0 "uninstalled: pkg-config --cflags" -- pkg-config --cflags resdiag
read -r -a cflags <"$dir/out"
expect_text "$dir/out" "-I$src/include" "uninstalled: cflags"
expect_exit 0 "uninstalled: pkg-config --libs" -- pkg-config --libs resdiag
read -r -a libs <"$dir/out"
unset PKG_CONFIG_PATH
expect_exit 0 "uninstalled: compile" -- \
    cc -o "$dir/consumer-uninst" "$dir/consumer/consumer.c" "${cflags[@]}" "${libs[@]}"
expect_exit 0 "uninstalled: consumer runs" -- \
    env LD_LIBRARY_PATH="$build" "$dir/consumer-uninst" "$dir/uninst.h5"
check_run uninstalled "$dir/uninst.h5"

tool_test_finish
