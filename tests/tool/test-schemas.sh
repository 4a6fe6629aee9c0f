#!/usr/bin/env bash
# test-schemas.sh - one trainer run recorded as schema 1 and as schema 2
# (float32 statistics, deflate level 1, as the default schema 3 stores them;
# both of 5 block sites) gives the same analysis:
# for tinygpt pre, post and sandwich (4 layers, 3 steps, --threads 1, so
# both runs compute the same numbers):
#  - `report` text: the same lines with every number masked (verdicts,
#    placement lines, what is observed), and the verdict line itself equal;
#  - `report --json`: strings and integers equal, every float within the
#    bound float32 storage allows (compare-reports.py derives each);
#  - `check --expect E`: the same exit code for every expectation;
#  - `diff S1 S2`: "none above 5%", and each per-layer pair equal or one
#    unit apart in the last of the 4 digits printed;
#  - `dump`, `dump --all` and `report --html` work on schema 2, and dump
#    says the schema of each.
# Usage: test-schemas.sh RESDIAG TINYGPT COMPARE_REPORTS.py
set -u
tool=$1
tinygpt=$2
compare=$3
. "$(dirname "$0")/../helpers/tool-test-lib.sh"
py=$(command -v python3) || { echo "python3 not found: skipped"; exit 77; }

mask() { sed -E -e 's/[-+]?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?/#/g' -e '/^(File|Run file|Written by)/d' "$1"; }

for p in pre post sandwich; do
    for s in 1 2; do
        timeout 60 "$tinygpt" --layers 4 --d-model 32 --heads 2 --seq 16 --batch 2 --vocab 32 \
            --steps 3 --threads 1 --log-every 100 --placement "$p" --file-schema "$s" \
            --out "$dir/$p-$s.h5" >/dev/null 2>"$dir/train.err" \
            || { fail "$p schema $s: tinygpt"; cat "$dir/train.err"; }
        expect_exit 0 "$p schema $s: report" -- "$tool" report "$dir/$p-$s.h5"
        cp "$dir/out" "$dir/$p-$s.txt"
        expect_exit 0 "$p schema $s: report --json" -- "$tool" report --json "$dir/$p-$s.h5"
        cp "$dir/out" "$dir/$p-$s.json"
        expect_exit 0 "$p schema $s: dump" -- "$tool" dump "$dir/$p-$s.h5"
        expect_text "$dir/out" "schema $s," "$p schema $s: dump says the schema"
        expect_exit 0 "$p schema $s: dump --all" -- "$tool" dump --all "$dir/$p-$s.h5"
        expect_exit 0 "$p schema $s: report --html" -- "$tool" report --html "$dir/$p-$s.html" \
            "$dir/$p-$s.h5"
        grep -q "<svg" "$dir/$p-$s.html" && pass || fail "$p schema $s: HTML without a figure"
    done
    h5dump -a schema_version "$dir/$p-2.h5" 2>/dev/null | grep -q "(0): 2" && pass \
        || fail "$p: --file-schema 2 did not write schema_version 2"
    h5dump -a schema_version "$dir/$p-1.h5" 2>/dev/null | grep -q "(0): 1" && pass \
        || fail "$p: --file-schema 1 did not write schema_version 1"

    # the text: the same words, the same verdict line
    if diff <(mask "$dir/$p-1.txt") <(mask "$dir/$p-2.txt") >"$dir/text.diff"; then pass; else
        fail "$p: the reports differ beyond their numbers:"; head -20 "$dir/text.diff"
    fi
    v1=$(grep -m1 -i "verdict" "$dir/$p-1.txt")
    v2=$(grep -m1 -i "verdict" "$dir/$p-2.txt")
    [ -n "$v1" ] && [ "$v1" = "$v2" ] && pass || fail "$p: verdict '$v1' against '$v2'"

    # the numbers
    echo "$p: schema 1 against schema 2, report --json:"
    "$py" "$compare" "$dir/$p-1.json" "$dir/$p-2.json" && pass || fail "$p: report --json numbers"

    for e in pre-norm post-norm sandwich declared; do
        "$tool" check --expect "$e" "$dir/$p-1.h5" >/dev/null 2>&1
        c1=$?
        "$tool" check --expect "$e" "$dir/$p-2.h5" >/dev/null 2>&1
        c2=$?
        [ "$c1" = "$c2" ] && pass || fail "$p: check --expect $e: exit $c1 (schema 1), $c2 (schema 2)"
    done

    expect_exit 0 "$p: diff schema 1 schema 2" -- "$tool" diff "$dir/$p-1.h5" "$dir/$p-2.h5"
    expect_text "$dir/out" "none above 5%" "$p: diff"
    # per layer: "k A B A B ...": each A, B pair equal or one unit apart at 4 digits
    awk -v what="$p" '
        /^Per layer/ { on = 1; next }
        on && $1 ~ /^[0-9]+$/ {
            for (i = 2; i + 1 <= NF; i += 2) {
                a = $i + 0; b = $(i + 1) + 0
                m = (a < 0 ? -a : a); if (m == 0) m = 1e-300
                unit = 10 ^ (int(log(m) / log(10) + (m >= 1 ? 1 : 0)) - 4)
                d = a - b; if (d < 0) d = -d
                if (d > 1.0001 * unit) { printf "FAIL: %s: diff layer %s: %s against %s\n", what, $1, $i, $(i + 1); bad++ }
                n++
            }
        }
        END { exit (bad || n == 0) }' "$dir/out" && pass || fail "$p: diff per layer"
done
tool_test_finish
