#!/usr/bin/env bash
# test-cli.sh - the command line of resdiag and tinygpt (getopt_long): every
# option in the usage line of every command, in each spelling ("--opt V",
# "--opt=V", after the file, a unique abbreviation), gives the same output
# as the first spelling; that output is the option's (--step 3 analyses
# step 3); flags work before and after the file. Bad usage exits 2 with one
# line on stderr that says what was wrong. tinygpt --layers=2 and
# --layers 2 train the same model.
# Usage: test-cli.sh RESDIAG TINYGPT
set -u
tool=$1
tinygpt=$2
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

tiny=(--d-model 16 --heads 2 --seq 8 --vocab 16 --batch 2 --log-every 1000 --threads 1
      --steps 5)
a=$dir/a.h5
b=$dir/b.h5
timeout 60 "$tinygpt" "${tiny[@]}" --layers 2 --out "$a" >/dev/null || fail "tinygpt run a"
timeout 60 "$tinygpt" "${tiny[@]}" --layers 2 --placement post --out "$b" >/dev/null ||
    fail "tinygpt run b"

# The options a command's usage lines name (its synopsis).
usage_options() {
    "$tool" "$1" --help | sed '/^$/q' | grep -oE -- '(^|[][ |])-(-[a-z][a-z-]*|[a-z])' |
        sed 's/^[][ |]//' | sort -u
}

# Runs "resdiag ARGS..." into $dir/run.N.{out,err,rc}; prints nothing.
n=0
run() {
    n=$((n + 1))
    "$tool" "$@" >"$dir/run.$n.out" 2>"$dir/run.$n.err"
    echo $? >"$dir/run.$n.rc"
}
# same_as_first DESCRIPTION FIRST LAST: runs FIRST..LAST agree (rc, stdout,
# and the file each wrote to $dir/o.N when there is one).
same_as_first() {
    local what=$1 i
    for ((i = $2 + 1; i <= $3; i++)); do
        if ! cmp -s "$dir/run.$2.rc" "$dir/run.$i.rc" ||
           ! cmp -s "$dir/run.$2.out" "$dir/run.$i.out"; then
            fail "$what: spelling $((i - $2 + 1)) differs from the first" \
                 "(exit $(cat "$dir/run.$i.rc"), expected $(cat "$dir/run.$2.rc"))"
            cat "$dir/run.$i.err"
        elif [ -e "$dir/o.$2" ] && ! cmp -s "$dir/o.$2" "$dir/o.$i"; then
            fail "$what: spelling $((i - $2 + 1)) wrote a different file"
        else
            pass
        fi
    done
}

# ---------------------------------------------------------- the table
# COMMAND | OPTION | VALUE | OTHER ARGS | FILES | EXIT | TEXT the first output holds
# (VALUE OUT: a file $dir/o.N per run; - : a flag without a value)
table=$(cat <<EOF
report|--step|3||a|0|analysed step 3 (record 4)
report|--max-growth|1.0001||a|0|grows
report|--html|OUT||a|0|
report|--last|-||a|0|analysed step 4
report|--json|-||a|0|"placement"
report|--no-consequences|-||a|0|
check|--expect|post-norm||b|0|holds: post
check|--max-growth|1000|--expect pre|a|0|
check|--step|3|--expect pre|a|0|
check|--last|-|--expect pre|a|0|
check|--final-norm|-|--expect pre|a|0|
diff|--step|3||a b|0|
diff|--html|OUT||a b|0|
diff|--last|-||a b|0|
diff|--no-consequences|-||a b|0|
plot|--what|updates|-o -|a|0|<svg
plot|-o|OUT|--what growth|a|0|
plot|--step|3|--what growth -o -|a|0|<svg
plot|--last|-|--what growth -o -|a|0|<svg
dump|--step|3||a|0|step 3 (record 4 of 5)
dump|--all|-||a|0|step 4 (record 5 of 5)
report|--rank|0||a|0|analysed step 0 (record 1)
check|--rank|0|--expect pre|a|0|
diff|--rank|0||a b|0|
plot|--rank|0|--what growth -o -|a|0|<svg
dump|--rank|0||a|0|step 0 (record 1 of 5)
EOF
)

covered=$dir/covered
: >"$covered"
while IFS='|' read -r cmd opt val other files want text; do
    echo "$cmd $opt" >>"$covered"
    read -ra other_args <<<"$other"
    paths=()
    for f in $files; do paths+=("$dir/$f.h5"); done
    first=$((n + 1))
    if [ "$val" = - ]; then # a flag: before and after the files
        run "$cmd" "$opt" "${other_args[@]}" "${paths[@]}"
        run "$cmd" "${other_args[@]}" "${paths[@]}" "$opt"
    else
        v() { [ "$val" = OUT ] && echo "$dir/o.$((n + 1))" || echo "$val"; }
        run "$cmd" "$opt" "$(v)" "${other_args[@]}" "${paths[@]}"
        if [ "${opt:0:2}" = -- ]; then
            run "$cmd" "$opt=$(v)" "${other_args[@]}" "${paths[@]}"
            run "$cmd" "${other_args[@]}" "${paths[@]}" "$opt" "$(v)"
            run "$cmd" "${opt:0:${#opt}-1}=$(v)" "${other_args[@]}" "${paths[@]}" # --ste=3
        else
            run "$cmd" "$opt$(v)" "${other_args[@]}" "${paths[@]}"           # -oFILE
            run "$cmd" "${other_args[@]}" "${paths[@]}" "$opt" "$(v)"
            run "$cmd" --output="$(v)" "${other_args[@]}" "${paths[@]}"
        fi
    fi
    if [ "$(cat "$dir/run.$first.rc")" != "$want" ]; then
        fail "$cmd $opt: exit $(cat "$dir/run.$first.rc"), expected $want"
        cat "$dir/run.$first.err"
    else
        pass
    fi
    if [ -n "$text" ]; then
        expect_text "$dir/run.$first.out" "$text" "$cmd $opt $val"
    fi
    if [ "$val" = OUT ] && ! grep -q . "$dir/o.$first"; then
        fail "$cmd $opt: wrote nothing to its file"
    fi
    same_as_first "$cmd $opt" "$first" "$n"
done <<<"$table"

# The option changes the output: --step 3 is not the default step 0.
run report "$a"
if cmp -s "$dir/run.$n.out" "$dir/run.1.out"; then
    fail "report --step 3 gives the default report"
else
    pass
fi

# Every option of every command's usage line has a row above.
for cmd in report check diff plot dump; do
    for opt in $(usage_options "$cmd"); do
        if grep -qx -- "$cmd $opt" "$covered"; then pass; else fail "no row for $cmd $opt"; fi
    done
done
# and -h / --help print the usage and exit 0, help and version too
for cmd in report check diff plot dump help version; do
    for h in -h --help --he; do
        expect_exit 0 "$cmd $h" -- "$tool" "$cmd" "$h"
        expect_text "$dir/out" "usage: resdiag $cmd" "$cmd $h"
    done
    # every help says the exit codes, and its option descriptions and their
    # continued lines start in one column
    "$tool" "$cmd" --help >"$dir/help"
    grep -q '^Exit 0' "$dir/help" && pass || fail "$cmd --help: no exit codes"
    awk '
        /^$/ { col = 0; next }
        /^  -/ {
            s = substr($0, 3)
            if (!match(s, /  +[^ ]/)) next
            c = 2 + RSTART + RLENGTH - 1
            if (col && c != col) print "line " NR ": description at column " c ", not " col
            col = c; next
        }
        col && /^   / {
            match($0, /[^ ]/)
            if (RSTART != col) print "line " NR ": continued at column " RSTART ", not " col
            next
        }
        { col = 0 }' "$dir/help" >"$dir/align"
    [ -s "$dir/align" ] && { fail "$cmd --help misaligned:"; cat "$dir/align"; } || pass
done
expect_exit 0 "help help" -- "$tool" help help
expect_text "$dir/out" "usage: resdiag help" "help help"
# report --html - writes the page, and only the page, to stdout
(cd "$dir" && "$tool" report --html - "$a" >"$dir/page" 2>"$dir/err")
[ $? -eq 0 ] && pass || { fail "report --html -: exit not 0"; cat "$dir/err"; }
[ "$(head -c 15 "$dir/page")" = "<!DOCTYPE html>" ] && grep -q '</html>' "$dir/page" && pass ||
    fail "report --html -: stdout is not the page"
[ -s "$dir/err" ] && fail "report --html -: wrote to stderr" || pass
[ -e "$dir/-" ] && fail "report --html -: wrote a file named '-'" || pass
# "--" ends the options
expect_exit 0 "report -- FILE" -- "$tool" report --step=3 -- "$a"
expect_text "$dir/out" "analysed step 3" "report -- FILE"

# ------------------------------------------------------- bad usage
# ARGS | what the one line says ($a, $b: the runs)
bad=$(cat <<'EOF'
report --step|--step needs a step number >= 0
report --step=x $a|--step needs a step number >= 0
report --step=-1 $a|--step needs a step number >= 0
report $a --step|--step needs a step number >= 0
report --bogus $a|unknown option '--bogus'
report --bogus=1 $a|unknown option '--bogus=1'
report -x $a|unknown option '-x'
report --h $a|ambiguous option '--h'
report --last=1 $a|--last takes no value
report --step=3 --last $a|--step and --last exclude each other
report --json --html=x $a|--json and --html exclude each other
report --html= $a|--html needs an output file name
report $a --html|--html needs an output file name
report --max-growth=0 $a|--max-growth needs a number > 0
report $a $a|one run file at a time
report|no run file given
report --step=99 $a|step 99 was not recorded
check --expect=foo $a|--expect needs pre-norm, post-norm
check --expect|--expect needs pre-norm, post-norm
check $a|--expect PLACEMENT is required
check --expect pre --json $a|unknown option '--json'
diff $a|needs two run files
diff $a $b $a|two run files, not more
diff --step=x $a $b|--step needs a step number >= 0
diff --max-growth=2 $a $b|unknown option '--max-growth=2'
plot --what=nope -o - $a|--what needs growth, updates, gradients or loss
plot --what growth $a|needs --what, -o FILE and a run file
plot --what growth $a -o|-o needs an output file name
plot --output= --what growth $a|-o needs an output file name
plot -x --what growth -o - $a|unknown option '-x'
dump --all=1 $a|--all takes no value
dump --step=-2 $a|--step needs a step number >= 0
dump $a $b|one run file at a time
report --rank=-1 $a|--rank needs a rank number >= 0
report --rank=x $a|--rank needs a rank number >= 0
check --expect pre --rank $a|--rank needs a rank number >= 0
dump --rank=1 $a|rank 1 of run
dump --all --step 3 $a|--step and --all exclude each other
dump --step=3 $a --all|--step and --all exclude each other
help report x|help: unexpected argument 'x'
help nope|no command 'nope'
version x|version: unexpected argument 'x'
version --bogus|version: unknown option '--bogus'
EOF
)
while IFS='|' read -r args text; do
    args=${args//\$a/$a}
    args=${args//\$b/$b}
    read -ra argv <<<"$args"
    expect_exit 2 "resdiag $args" -- "$tool" "${argv[@]}"
    expect_text "$dir/err" "$text" "resdiag $args"
done <<<"$bad"

# ---------------------------------------------------------- tinygpt
layers_in() { "$tool" dump "$1" 2>/dev/null | sed -n 's/^ *model: \([0-9]*\) layers.*/\1/p'; }
for spelling in "--layers=3" "--layers 3" "--lay=3"; do
    read -ra sp <<<"$spelling"
    f=$dir/t$((++n)).h5
    expect_exit 0 "tinygpt $spelling" -- timeout 60 "$tinygpt" "${tiny[@]}" "${sp[@]}" \
        --steps=2 --out="$f"
    [ "$(layers_in "$f")" = 3 ] && pass || fail "tinygpt $spelling: not 3 layers"
done
# ARGS | what the first line on stderr says (exit 2)
tgbad=$(cat <<'EOF'
--layers=0|--layers: expected an integer in [1, 1024], got '0'
--layers|--layers needs a value
--bogus=1|unknown option '--bogus=1'
--overwrite=1|--overwrite takes no value
--s 3|unknown option '--s'
stray|unexpected argument 'stray'
--placement=mix:0|--placement mix:K
--file-schema=4|--file-schema: expected an integer in [0, 3], got '4'
--compression 10|--compression: expected an integer in [0, 9], got '10'
EOF
)
while IFS='|' read -r args text; do
    read -ra argv <<<"$args"
    timeout 60 "$tinygpt" "${argv[@]}" >"$dir/out" 2>"$dir/err"
    rc=$?
    [ "$rc" -eq 2 ] && pass || fail "tinygpt $args: exit $rc, expected 2"
    if head -n 1 "$dir/err" | grep -qF -- "tinygpt: $text"; then pass; else
        fail "tinygpt $args: first line is not '$text'"; cat "$dir/err"
    fi
    grep -q . "$dir/out" && fail "tinygpt $args: wrote to stdout" || pass
done <<<"$tgbad"

tool_test_finish
