#!/usr/bin/env bash
# test-ranks.sh - jobs of several ranks (tests/helpers/make-rank-runs.c)
# through the tool: the merged report's ranks part (text and JSON: ranks
# found, missing, ended early, rejected (another job, a damaged chunk),
# whose NaN came first), --rank N for every command, bad --rank values and
# hostile rank attributes (exit 2, one line, in bounded time).
# Usage: test-ranks.sh RESDIAG MAKE_RANK_RUNS REPORT-JSON.md
set -u
tool=$1
make_ranks=$2
jsondoc=$3
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

R=$dir/runs
mkdir "$R"
if ! timeout 60 "$make_ranks" "$R"; then
    echo "FAIL: make-rank-runs"; exit 1
fi

# A rank whose NaN came first is named, in the words of the report.
expect_exit 0 "nan.h5 report" -- "$tool" report "$R/nan.h5"
cp "$dir/out" "$dir/nan.txt"
expect_text "$dir/nan.txt" "Ranks: 2 of 2 expected rank files found (world size 2, data split), 2 merged" "nan.h5"
expect_text "$dir/nan.txt" "rank 1: NaN at step 3, layer 2, mlp, first (branch_out, forward)" "nan.h5"
expect_text "$dir/nan.txt" "rank 0: NaN at step 4, layer 0, mlp (branch_out, forward)" "nan.h5"
# the job's first non-finite value is the earliest over ranks
expect_text "$dir/nan.txt" "Non-finite values: first at step 3, layer 2 mlp branch_out" "nan.h5"
if grep -q "rank 0: NaN.*first" "$dir/nan.txt"; then fail "nan.h5: rank 0 called first"; else pass; fi

expect_exit 0 "nan.h5 report --json" -- "$tool" report --json "$R/nan.h5"
if python3 - "$dir/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["ranks"]
assert r["world_size"] == 2 and r["found"] == 2 and r["expected"] == 2, r
assert r["merged"] == [0, 1] and r["missing"] == [] and r["rejected"] == [], r
assert r["first_nonfinite_rank"] == 1, r
assert any("rank 1: NaN at step 3, layer 2, mlp, first" in d for d in r["disagreements"]), r
assert [p["first_nonfinite_step"] for p in r["per_rank"]] == [4, 3], r
PY
then pass; else fail "nan.h5: the JSON ranks"; fi

# The HTML page has the same ranks part.
expect_exit 0 "nan.h5 report --html" -- "$tool" report --html "$dir/nan.html" "$R/nan.h5"
expect_text "$dir/nan.html" '<section class="card bad" id="ranks">' "nan.h5 html"
expect_text "$dir/nan.html" "rank 1: NaN at step 3, layer 2, mlp, first (branch_out, forward)" "nan.h5 html"
if python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$dir/nan.html"; then pass
else fail "nan.h5 html: not well-formed"; fi

# A rank that ended early, one without a file.
expect_exit 0 "early.h5 report" -- "$tool" report "$R/early.h5"
expect_text "$dir/out" "Ranks: 2 of 3 expected rank files found" "early.h5"
expect_text "$dir/out" "missing (no file): 2" "early.h5"
expect_text "$dir/out" "ended early: rank 1 at step 2 (the others at step 4)" "early.h5"
expect_exit 0 "early.h5 report --json" -- "$tool" report --json "$R/early.h5"
if python3 - "$dir/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["ranks"]
assert r["missing"] == [2] and r["n_missing"] == 1, r
assert r["ended_early"] == [{"rank": 1, "last_step": 2}] and r["last_step"] == 4, r
PY
then pass; else fail "early.h5: the JSON ranks"; fi

# A rank file of another job: rejected, with why.
expect_exit 0 "rejected.h5 report" -- "$tool" report "$R/rejected.h5"
expect_text "$dir/out" 'rejected: rank 1: job id "job-2", rank 0'"'"'s is "job-1"' "rejected.h5"
expect_text "$dir/out" "2 of 2 expected rank files found (world size 2, data split), 1 merged" "rejected.h5"

# A rank whose file has a damaged deflated chunk (at step 1, after a whole
# step 0): rejected with the reader's reason (dataset, step, what is wrong),
# and the others merged: every number as in the job without that file.
expect_exit 0 "damaged.h5 report" -- "$tool" report "$R/damaged.h5"
expect_text "$dir/out" "3 of 3 expected rank files found (world size 3, data split), 2 merged" "damaged.h5"
expect_text "$dir/out" "rejected: rank 1: run file $R/damaged.rank00001.h5: dataset /forward/site_stats, step 1: its chunk" "damaged.h5"
"$tool" report --json "$R/damaged.h5" >"$dir/damaged.json" 2>"$dir/err"
"$tool" report --json "$R/damaged-ref.h5" >"$dir/damaged-ref.json" 2>>"$dir/err"
if [ -s "$dir/err" ]; then fail "damaged.h5 --json: stderr: $(head -3 "$dir/err")"; else pass; fi
if python3 - "$dir/damaged.json" "$dir/damaged-ref.json" <<'PY'
import json, sys
got, ref = (json.load(open(f)) for f in sys.argv[1:])
r = got.pop("ranks")
ref.pop("ranks")
for j in (got, ref):  # the files were written apart: only when differs
    j["run"].pop("created_utc")
assert r["merged"] == [0, 2] and r["missing"] == [] and r["ended_early"] == [], r
assert [w["rank"] for w in r["rejected"]] == [1], r
assert "dataset /forward/site_stats, step 1: its chunk" in r["rejected"][0]["why"], r
assert got == ref, [k for k in got if got[k] != ref.get(k)]
PY
then pass; else fail "damaged.h5: not the job without rank 1"; fi
# A damaged chunk in rank 0's own file: the job cannot be read, one line.
expect_exit 2 "damaged0.h5 report" -- "$tool" report "$R/damaged0.h5"
expect_text "$dir/err" "damaged0.h5: dataset /forward/site_stats, step 1: its chunk" "damaged0.h5"

# Pipeline stages and tensor shards: a report, nothing on stderr (the
# stages are not judged alone), the shards' per-token quantities named.
for j in pipeline tensor; do
    expect_exit 0 "$j.h5 report" -- "$tool" report "$R/$j.h5"
    if [ -s "$dir/err" ]; then fail "$j.h5 report: stderr: $(head -3 "$dir/err")"; else pass; fi
    expect_text "$dir/out" "2 of 2 expected rank files found (world size 2, $j split), 2 merged" "$j.h5"
    expect_text "$dir/out" "where the ranks disagree: nowhere" "$j.h5"
done
expect_text "$dir/out" "per shard (tensor split, not merged: NaN): tok_norm_mean" "tensor.h5"

# The keys of "ranks" over these jobs are exactly those doc/REPORT-JSON.md lists.
for j in nan early rejected; do "$tool" report --json "$R/$j.h5" >"$dir/$j.json"; done
if python3 - "$jsondoc" "$dir"/nan.json "$dir"/early.json "$dir"/rejected.json <<'PY'
import json, re, sys
doc = open(sys.argv[1]).read()
documented = {k for k in re.findall(r"^\| `([A-Za-z0-9_.\[\]]+)` \|", doc, re.M)
              if k.split(".")[0] == "ranks"}
seen = set()
def walk(v, path):
    if isinstance(v, dict):
        for k, x in v.items():
            p = path + "." + k if path else k
            seen.add(p)
            walk(x, p)
    elif isinstance(v, list):
        for x in v:
            walk(x, path + "[]")
for f in sys.argv[2:]:
    walk({"ranks": json.load(open(f))["ranks"]}, "")
if seen != documented:
    print("undocumented:", sorted(seen - documented), "not seen:", sorted(documented - seen))
    sys.exit(1)
PY
then pass; else fail "the ranks keys against doc/REPORT-JSON.md"; fi

# --rank N: that rank's file alone, for every command.
expect_exit 0 "report --rank 1" -- "$tool" report --rank 1 "$R/nan.h5"
if grep -q "^Ranks: this file is rank 1 of 2 (data split), read alone" "$dir/out" &&
    ! grep -q "merged" "$dir/out"; then pass; else fail "report --rank 1 merged the ranks"; fi
expect_text "$dir/out" "Non-finite values: first at step 3, layer 2 mlp branch_out" "report --rank 1"
expect_exit 0 "report --rank 0" -- "$tool" report --rank=0 "$R/nan.h5"
expect_text "$dir/out" "Non-finite values: first at step 4, layer 0 mlp" "report --rank 0"
expect_exit 0 "dump --rank 1" -- "$tool" dump --rank 1 "$R/nan.h5"
expect_text "$dir/out" "nan.rank00001.h5" "dump --rank 1"
expect_exit 0 "plot --rank 1" -- "$tool" plot --rank 1 --what growth -o "$dir/fig.svg" "$R/nan.h5"
expect_exit 0 "diff --rank 1" -- "$tool" diff --rank 1 "$R/nan.h5" "$R/nan.h5"
"$tool" check --rank 1 --expect pre-norm "$R/nan.h5" >"$dir/out" 2>"$dir/err"
if [ $? -le 2 ] && grep -q '^resdiag check: ' "$dir/out" && [ ! -s "$dir/err" ]; then pass
else fail "check --rank 1"; cat "$dir/err"; fi

# Bad --rank values: one line, exit 2.
expect_exit 2 "--rank -1" -- "$tool" report --rank -1 "$R/nan.h5"
expect_text "$dir/err" "--rank needs a rank number >= 0" "--rank -1"
expect_exit 2 "--rank x" -- "$tool" report --rank x "$R/nan.h5"
expect_exit 2 "--rank 1.5" -- "$tool" dump --rank 1.5 "$R/nan.h5"
expect_exit 2 "--rank 7" -- "$tool" report --rank 7 "$R/nan.h5"
expect_text "$dir/err" "rank 7 of run" "--rank 7"
expect_exit 2 "--rank 2 missing" -- "$tool" check --expect pre-norm --rank 2 "$R/early.h5"
expect_exit 2 "--rank 99999999999" -- "$tool" report --rank 99999999999 "$R/nan.h5"

# Rank attributes a stranger set: exit 2, one line naming them, quickly.
for f in world-1e9.h5:world_size rank-string.h5:rank rank-negative.h5:rank; do
    name=${f%%:*} want=${f#*:}
    for c in "report" "dump" "check --expect pre-norm"; do
        # shellcheck disable=SC2086
        expect_exit 2 "$name $c" -- timeout 10 "$tool" $c "$R/$name"
        expect_text "$dir/err" "attribute '$want'" "$name $c"
    done
done
tool_test_finish
