#!/usr/bin/env bash
# test-report.sh - `resdiag report` and `check` on real runs: golden text
# reports of fixed tinygpt runs (their numbers recomputed from the run file
# by report-numbers.py; provenance, paths and line numbers masked), the JSON against the keys documented in
# doc/REPORT-JSON.md, step selection, help texts, and the bad-input table
# (one line on stderr and exit 2, or a report of what is there).
# Usage: test-report.sh RESDIAG TINYGPT GOLDEN_DIR MAKE_BAD_RUNS JSON_DOC
# UPDATE_GOLDEN=1 rewrites the golden files instead of comparing.
set -u
tool=$1
tinygpt=$2
golden=$3
makebad=$4
jsondoc=$5
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

# The portable statistics kernels: the same bits on every CPU.
export RESDIAG_FORCE_PORTABLE=1
tg() { "$tinygpt" --d-model 32 --heads 2 --seq 8 --batch 2 --seed 1 --threads 1 \
       --log-every 1000 "$@" >/dev/null 2>"$dir/tg.err" || { cat "$dir/tg.err"; fail "tinygpt $*"; }; }
tg --placement pre --layers 4 --steps 1 --out "$dir/pre.h5"
tg --placement post --layers 4 --steps 1 --out "$dir/post.h5"
tg --placement post --layers 4 --steps 1 --record stream --out "$dir/post-stream.h5"
tg --placement mix:2 --layers 4 --steps 3 --norm rmsnorm --final-norm off --out "$dir/mix.h5"

# The golden files are templates: every number that report-numbers.py
# recomputes from the run file itself (the per-layer table, the fits, the
# growth, the gradient lines, the sketch relation errors and the final
# norm's difference, the rounding-level ones too) is checked there and
# stands as '#'; the rest of the text and the other numbers (those of
# other steps: the last step's line, "Over training") are compared
# literally. Masked besides: what
# differs between checkouts and machines (the path and provenance, the
# source line numbers).
mask() {
    sed -E -e '1s#^resdiag report .*#resdiag report RUN#' \
        -e 's#^  created .* by .*#  created DATE by PROGRAM#' \
        -e 's#written by resdiag [0-9.]+ \(schema#written by resdiag VERSION (schema#' \
        -e 's#[^ ,]*/(model\.c):[0-9]+#\1:LINE#g'
}
here=$(cd "$(dirname "$0")" && pwd)
for name in pre post post-stream mix; do
    expect_exit 0 "report $name" -- "$tool" report "$dir/$name.h5"
    mv "$dir/out" "$dir/$name.report"
    step=$(sed -n 's/.*; analysed step \([0-9]*\) (record.*/\1/p' "$dir/$name.report")
    "$tool" dump --step "$step" "$dir/$name.h5" >"$dir/$name.dump" || fail "dump $name"
    counts=() # schema 2 keeps the integer fields apart
    h5dump -H -d /forward/site_counts "$dir/$name.h5" >/dev/null 2>&1 \
        && counts=(-d /forward/site_counts)
    # which sites are copies of others: their relations count for nothing
    h5dump -H -d /forward/site_alias "$dir/$name.h5" >/dev/null 2>&1 \
        && counts+=(-d /forward/site_alias)
    h5dump -y -w 0 -m %.17g -d /forward/site_sketch -d /forward/site_stats "${counts[@]}" \
        -d /backward/site_stats \
        -d /forward/model_sketch "$dir/$name.h5" >"$dir/$name.h5dump" || fail "h5dump $name"
    if /usr/bin/python3 "$here/report-numbers.py" "$dir/$name.report" "$dir/$name.dump" \
        "$dir/$name.h5dump" >"$dir/$name.template"; then pass
    else fail "report $name: numbers against the run file (above)"; fi
    mask <"$dir/$name.template" >"$dir/$name.txt"
    if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
        cp "$dir/$name.txt" "$golden/report-$name.txt"; pass
    elif diff -u "$golden/report-$name.txt" "$dir/$name.txt" >"$dir/diff"; then
        pass
    else
        fail "report $name differs from tests/tool/golden/report-$name.txt:"; cat "$dir/diff"
    fi
done
# What the goldens must say, independently of their text.
"$tool" report "$dir/pre.h5" >"$dir/out"
expect_text "$dir/out" "Placement: pre-norm (confidence high)" "pre verdict"
expect_text "$dir/out" "declared: pre - agrees with the data" "pre declared"
"$tool" report "$dir/post.h5" >"$dir/out"
expect_text "$dir/out" "Placement: post-norm" "post verdict"
grep -q "Placement: pre" "$dir/out" && fail "post-norm run called pre-norm" || pass
"$tool" report "$dir/post-stream.h5" >"$dir/out"
expect_text "$dir/out" "LESS EVIDENCE: only the stream was observed" "stream-only says so"
expect_text "$dir/out" "post-norm family" "stream-only post verdict"
"$tool" report "$dir/mix.h5" >"$dir/out"
expect_text "$dir/out" "post-norm in layers 0..1, pre-norm in layers 2..3" "mix layers"
expect_text "$dir/out" "without a final norm" "pre-norm without a final norm warned"
expect_text "$dir/out" "Over training" "several steps summarised"

# The per-layer table says which norm each column is, and the numbers are
# those norms: the gradient columns the Frobenius norm `dump` prints
# (||x||_F), the embedding's row too (dL/dx_0 at embed_out's backward).
"$tool" report "$dir/pre.h5" >"$dir/out"
expect_text "$dir/out" "||x_k||, rms: mean over tokens of the per-token L2 norm, RMS" "table header: ||x_k||"
expect_text "$dir/out" "gradient columns (parameter, ||dL/dx||): Frobenius norm of the whole tensor" \
    "table header: the gradient columns"
"$tool" dump "$dir/pre.h5" >"$dir/dump"
row_grad() { awk -v k="$1" '$1 == k && ($2 == "embed" || $2 == k - 1) { print $NF; exit }' "$dir/out"; }
dump_frob() { awk -v w="$1" -v s="$2" '$0 ~ "^  grad " w " " && $(NF-12) == s { printf "%.4g", $(NF-10); exit }' "$dir/dump"; }
for k in 0 1 4; do
    if [ "$k" = 0 ]; then want=$(dump_frob "model" embed_out); else want=$(dump_frob "L$((k - 1)) mlp" stream_out); fi
    got=$(row_grad "$k")
    if [ -n "$want" ] && [ "$got" = "$want" ]; then pass
    else fail "per-layer row k=$k: ||dL/dx|| '$got', dump's Frobenius norm '$want'"; fi
done
js=$("$tool" report --json "$dir/pre.h5" | sed -n 's/.*"stream_embed": \([^,]*\),.*/\1/p')
[ -n "$js" ] && [ "$(printf '%.4g' "$js")" = "$(dump_frob model embed_out)" ] && pass ||
    fail "JSON gradients.stream_embed '$js', dump's Frobenius norm '$(dump_frob model embed_out)'"

# The report's own terms: each one the body uses has a line in the Legend
# block at its end that starts with the term; the table's gradient column
# says it is a gradient norm instead of a bare parameter name.
for name in pre post post-stream; do
    "$tool" report "$dir/$name.h5" >"$dir/out"
    /usr/bin/python3 - "$dir/out" <<'PY' && pass || fail "report $name: a private term unexplained"
import re, sys
text = open(sys.argv[1]).read()
body, sep, legend = text.partition("\nLegend:\n")
assert sep, "no Legend block"
keys = [l.strip() for l in legend.splitlines() if l.strip()]
# (what the body prints, the term a Legend line must start with)
terms = [(r"sketch relations", "sketch relations"), (r"; sketch \d+", "sketch N"),
         (r"pre-type", "pre-type"), (r"post-type", "post-type"),
         (r"\(first of these\)", "(first of these)"), (r"deciding hooks", "deciding hooks"),
         (r"\(record \d+\)", "record N"), (r"(?m)^ +k +layer .* rms ", "rms"),
         (r"\br_attn\b", "r_attn"), (r"by construction", "by construction"),
         (r"rounding floor", "rounding floor"), (r"growth", "stream growth"),
         (r"call order", "call order"), (r"\|\|grad ", "||grad P||")]
used = [key for pattern, key in terms if re.search(pattern, body)]
assert "rms" in used and "record N" in used, used  # the table and the steps line are always there
missing = [key for key in used if not any(k.startswith(key) for k in keys)]
assert not missing, "used but not in the Legend: %s" % missing
assert len(keys) == len(set(keys)), keys
head = [l for l in body.splitlines() if re.match(r" +k +layer ", l)][0]
assert not re.search(r" (mlp|attn)\.\w+ ", head + " "), head  # a bare parameter name
PY
done

# Step selection.
expect_exit 0 "report --last" -- "$tool" report --last "$dir/mix.h5"
expect_text "$dir/out" "analysed step 2 (record 3)" "--last"
expect_exit 0 "report --step 1" -- "$tool" report --step 1 "$dir/mix.h5"
expect_text "$dir/out" "analysed step 1 (record 2)" "--step"
# Which step is judged and why; the last step beside it, when it is another.
"$tool" report "$dir/mix.h5" >"$dir/out"
expect_text "$dir/out" "judged at step 0, the first recorded: at initialization the branch updates are smallest" "the judged step and why"
expect_text "$dir/out" "  at the last recorded step 2: mixed: post-norm in layers 0..1, pre-norm in layers 2..3 (confidence high); stream growth " "the last step's verdict beside it"
"$tool" report --step 1 "$dir/mix.h5" >"$dir/out"
expect_text "$dir/out" "judged at step 1, as chosen" "--step: judged as chosen"
expect_text "$dir/out" "at the last recorded step 2:" "--step: the last step beside it"
for args in "--last $dir/mix.h5" "$dir/pre.h5"; do
    "$tool" report $args >"$dir/out"
    grep -q "at the last recorded step" "$dir/out" && fail "report $args: a last-step line for the judged step itself" || pass
done
# The last-step line says what `report --last` says there, in text and JSON.
"$tool" report --last "$dir/mix.h5" >"$dir/last.txt"
"$tool" report "$dir/mix.h5" >"$dir/out"
/usr/bin/python3 - "$dir/out" "$dir/last.txt" <<'PY' && pass || fail "the last-step line against report --last"
import re, sys
line = [l for l in open(sys.argv[1]) if l.startswith("  at the last recorded step ")][0]
placement = [l for l in open(sys.argv[2]) if l.startswith("Placement: ")][0]
assert line.split(": ", 1)[1].split("; stream growth")[0] == placement[len("Placement: "):].strip(), (line, placement)
growth = [l for l in open(sys.argv[2]) if "growth over depth" in l][0].split(": ")[1].strip()
assert "; stream growth %s;" % growth in line, (line, growth)
PY
"$tool" report --json "$dir/mix.h5" >"$dir/a.json"
"$tool" report --json --last "$dir/mix.h5" >"$dir/b.json"
/usr/bin/python3 - "$dir/a.json" "$dir/b.json" <<'PY' && pass || fail "JSON last_step against report --last --json"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
z = a["last_step"]
assert b["last_step"] is None
assert z["step"] == b["steps"]["analysed"] and z["index"] == b["steps"]["analysed_index"] and z["error"] is None
assert (z["verdict"], z["confidence"], z["mix_layers"]) == (b["placement"]["verdict"], b["placement"]["confidence"], b["placement"]["mix_layers"]), z
assert abs(z["growth"] - b["stream"]["growth"]) < 1e-6 * b["stream"]["growth"], (z, b["stream"]["growth"])
assert len(z["mean_r"]) == 2
PY
"$tool" report --json "$dir/pre.h5" | /usr/bin/python3 -c 'import json, sys; assert json.load(sys.stdin)["last_step"] is None' && pass || fail "one step: last_step null"
expect_exit 2 "report --step 7 (not recorded)" -- "$tool" report --step 7 "$dir/mix.h5"
expect_exit 2 "--step with --last" -- "$tool" report --step 1 --last "$dir/mix.h5"
expect_verdict 0 "check --last" -- "$tool" check --last --expect mixed "$dir/mix.h5"

# JSON: valid, and exactly the documented keys.
for name in pre post-stream mix; do
    expect_exit 0 "report --json $name" -- "$tool" report --json "$dir/$name.h5"
    if /usr/bin/python3 - "$dir/out" "$jsondoc" <<'PY'
import json, re, sys
report = json.load(open(sys.argv[1]))
doc = open(sys.argv[2]).read()
# a key in capitals stands for any name: metrics.NAME
documented = set(re.findall(r"^\| `([A-Za-z0-9_.\[\]]+)` \|", doc, re.M))
seen = set()
def walk(v, path):
    if isinstance(v, dict):
        for k, x in v.items():
            p = path + "." + k if path else k
            if path == "metrics":  # the trainer's own metric names
                p = "metrics.NAME"
            seen.add(p)
            walk(x, p)
    elif isinstance(v, list):
        for x in v:
            walk(x, path + "[]")
walk(report, "")
undocumented = sorted(seen - documented)
# every documented key that can appear in this report must (objects that
# are null here - gradients, nonfinite - are skipped)
def present(p):
    node = [report]
    if p.split(".")[0] in ("ranks", "rank_file") and p.split(".")[0] not in report:
        return True  # only for a job of several ranks (tool/test-ranks.sh)
    if p == "metrics.NAME":  # any name, or none: {} for a run without metrics
        return isinstance(report.get("metrics"), dict)
    for part in p.replace("[]", "").split("."):
        nxt = []
        for n in node:
            if isinstance(n, list):
                n = n[0] if n else None
            if isinstance(n, dict) and part in n:
                nxt.append(n[part])
            elif n is None or (isinstance(n, dict) and part not in n and n == {}):
                return True
            elif n is None:
                return True
            else:
                return False
        node = nxt
    return True
missing = sorted(p for p in documented if not present(p))
if undocumented or missing:
    print("undocumented:", undocumented, "missing:", missing)
    sys.exit(1)
assert report["report_version"] == 1
PY
    then pass; else fail "JSON of $name against doc/REPORT-JSON.md"; fi
done
"$tool" report --json "$dir/pre.h5" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["placement"]["verdict"] == "pre", r["placement"]
assert r["placement"]["declared_agrees"] is True
assert r["gradients"]["params"][0]["name"] == "mlp.w2"
assert len(r["stream"]["norm"]) == 5 and r["nonfinite"] is None
' && pass || fail "JSON values of the pre run"

# diff: a controlled comparison, the placement first.
expect_exit 0 "diff pre post" -- "$tool" diff "$dir/pre.h5" "$dir/post.h5"
expect_text "$dir/out" "placement: A pre-norm, B post-norm" "diff names the placements"
expect_text "$dir/out" "Per layer (A | B)" "diff table"
expect_exit 0 "diff --last" -- "$tool" diff --last "$dir/mix.h5" "$dir/mix.h5"
expect_text "$dir/out" "none above 5%" "a run against itself differs in nothing"
expect_exit 2 "diff of one file" -- "$tool" diff "$dir/pre.h5"
expect_exit 2 "diff with a missing file" -- "$tool" diff "$dir/pre.h5" "$dir/nope.h5"
expect_exit 2 "diff with a bad option" -- "$tool" diff --bogus "$dir/pre.h5" "$dir/post.h5"

# Help agrees with --help.
for c in report check diff; do
    "$tool" help $c >"$dir/h1"; "$tool" $c --help >"$dir/h2"
    cmp -s "$dir/h1" "$dir/h2" && pass || fail "help $c differs from $c --help"
    expect_text "$dir/h1" "usage: resdiag $c" "help $c"
done
"$tool" help >"$dir/h1"
expect_text "$dir/h1" "report" "overview lists report"
expect_text "$dir/h1" "check" "overview lists check"

# Bad input: one line, exit 2 - for report and for check.
"$makebad" "$dir" || fail "make-bad-runs"
printf 'not hdf5 at all\n' >"$dir/text.h5"
for c in "report" "check --expect pre-norm"; do
    # shellcheck disable=SC2086
    expect_exit 2 "$c: missing file" -- "$tool" $c "$dir/nope.h5"
    expect_exit 2 "$c: text file" -- "$tool" $c "$dir/text.h5"
    expect_exit 2 "$c: directory" -- "$tool" $c "$dir"
    expect_exit 2 "$c: HDF5 that is not a run" -- "$tool" $c "$dir/notrun.h5"
    expect_exit 2 "$c: newer schema" -- "$tool" $c "$dir/newer.h5"
    expect_text "$dir/err" "newer" "newer schema says so"
    expect_exit 2 "$c: empty run" -- "$tool" $c "$dir/empty.h5"
    expect_text "$dir/err" "no recorded steps" "empty run says so"
    head -c 3000 "$dir/pre.h5" >"$dir/cut.h5"
    expect_exit 2 "$c: truncated file" -- "$tool" $c "$dir/cut.h5"
done
# Partial runs: a report of what is there.
expect_exit 0 "report of a killed writer's run" -- "$tool" report "$dir/killed.h5"
expect_text "$dir/out" "Steps: 3 recorded" "killed run: its flushed steps"
expect_exit 0 "report of a NaN run" -- "$tool" report "$dir/nan.h5"
expect_text "$dir/out" "Non-finite values: first at step 0, layer 0 mlp stream_in, forward" "NaN located"
expect_text "$dir/out" "Placement: cannot tell" "NaN run: no verdict"
expect_verdict 2 "check of a NaN run" -- "$tool" check --expect pre-norm "$dir/nan.h5"
# Bad usage.
expect_exit 2 "check without --expect" -- "$tool" check "$dir/pre.h5"
expect_exit 2 "check --expect bogus" -- "$tool" check --expect bogus "$dir/pre.h5"
expect_exit 2 "report --bogus" -- "$tool" report --bogus "$dir/pre.h5"
expect_exit 2 "report without a file" -- "$tool" report
expect_exit 2 "report of two files" -- "$tool" report "$dir/pre.h5" "$dir/post.h5"
expect_exit 2 "--max-growth 0" -- "$tool" check --expect pre-norm --max-growth 0 "$dir/pre.h5"
# check's requirements
expect_verdict 0 "check pre --final-norm" -- "$tool" check --expect pre-norm --final-norm "$dir/pre.h5"
expect_verdict 1 "check mix --final-norm (off)" -- "$tool" check --expect mixed --final-norm "$dir/mix.h5"
expect_verdict 2 "check stream --final-norm" -- "$tool" check --expect post-norm --final-norm "$dir/post-stream.h5"
expect_verdict 1 "check pre --max-growth 0.5" -- "$tool" check --expect pre-norm --max-growth 0.5 "$dir/pre.h5"
expect_verdict 1 "check post --expect pre-norm" -- "$tool" check --expect pre-norm "$dir/post.h5"
expect_text "$dir/out" "not pre: observed post" "why line"

tool_test_finish
