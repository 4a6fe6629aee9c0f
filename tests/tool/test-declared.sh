#!/bin/bash
# test-declared.sh - the declared placement as a CI gate and the run kind
# in the wording: `resdiag check --expect declared` holds (0), fails (1)
# and cannot tell when nothing is declared (2); a contradicted declaration
# is a WARNING line at the top of the text report, a key in JSON and a
# warning-coloured card in HTML, while `report` still exits 0; evaluation
# and inference runs are never worded as training.
# Usage: test-declared.sh RESDIAG TINYGPT MAKE-INFERENCE-RUNS
set -u
tool=$1
tinygpt=$2
makeinf=$3
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

small=(--layers 3 --d-model 32 --heads 2 --seq 16 --batch 2 --steps 1 --log-every 1)
"$tinygpt" "${small[@]}" --placement post --out "$dir/post.h5" >/dev/null || fail "tinygpt post"
"$tinygpt" "${small[@]}" --placement post --declare pre --out "$dir/post-as-pre.h5" \
    >/dev/null || fail "tinygpt post --declare pre"
"$tinygpt" "${small[@]}" --placement post --declare undeclared --out "$dir/post-undeclared.h5" \
    >/dev/null || fail "tinygpt post --declare undeclared"

# the gate
expect_verdict 0 "check --expect declared, post declared post" -- \
    "$tool" check --expect declared "$dir/post.h5"
expect_text "$dir/out" "holds: post, as declared" "holding check's line"
expect_verdict 1 "check --expect declared, post declared pre" -- \
    "$tool" check --expect declared "$dir/post-as-pre.h5"
expect_text "$dir/out" "not pre (as declared): observed post" "failing check's line"
expect_verdict 2 "check --expect declared, nothing declared" -- \
    "$tool" check --expect declared "$dir/post-undeclared.h5"
expect_text "$dir/out" "the run declares none" "undeclared check's line"
expect_verdict 1 "check --expect pre on the post run" -- \
    "$tool" check --expect pre "$dir/post.h5"
expect_exit 2 "check --expect with a bad name" -- \
    "$tool" check --expect declarde "$dir/post.h5"
expect_text "$dir/err" "none, reordered, per-sublayer or declared" "the usage line names declared"

# text: report exits 0, the WARNING is the first line after the title
expect_exit 0 "report of post declared pre" -- "$tool" report "$dir/post-as-pre.h5"
if sed -n 2p "$dir/out" | grep -qF "WARNING: the data contradict the declared placement: the trainer declares pre, the data say post-norm"; then
    pass
else
    fail "the WARNING is not the report's second line:"; head -3 "$dir/out"
fi
expect_exit 0 "report of post declared post" -- "$tool" report "$dir/post.h5"
if grep -q "WARNING" "$dir/out"; then fail "WARNING in an agreeing run's report"; else pass; fi
expect_exit 0 "report of post declaring nothing" -- "$tool" report "$dir/post-undeclared.h5"
if grep -q "WARNING" "$dir/out"; then fail "WARNING in an undeclared run's report"; else pass; fi

# JSON: the key, true only for the contradiction
for run in post-as-pre:true post:false post-undeclared:false; do
    name=${run%%:*} want=${run##*:}
    "$tool" report --json "$dir/$name.h5" >"$dir/$name.json" || fail "report --json $name"
    if python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["declared_contradicted"] is (sys.argv[2] == "true"), r["declared_contradicted"]
assert r["run"]["run_kind"] == "training", r["run"]["run_kind"]' "$dir/$name.json" "$want"; then
        pass
    else
        fail "declared_contradicted of $name is not $want"
    fi
done

# HTML: the verdict card in the warning colour, the WARNING in it
expect_exit 0 "report --html of post declared pre" -- \
    "$tool" report --html "$dir/c.html" "$dir/post-as-pre.h5"
expect_text "$dir/c.html" '<section class="card contradicted" id="verdict">' "contradicted card"
expect_text "$dir/c.html" 'WARNING: the data contradict the declared placement' "HTML warning"
if python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$dir/c.html"; then
    pass
else
    fail "the contradicted page is not well-formed XML"
fi
expect_exit 0 "report --html of post declared post" -- \
    "$tool" report --html "$dir/a.html" "$dir/post.h5"
if grep -qE "class=\"card contradicted\"|WARNING" "$dir/a.html"; then fail "contradicted card for an agreeing run"; else pass; fi

# run kinds: no "initialization", no "training" in what evaluation and
# inference runs are told (JSON keys aside)
"$makeinf" "$dir" || fail "make-inference-runs"
for kind in inference evaluation; do
    expect_exit 0 "report of the $kind run" -- "$tool" report "$dir/$kind.h5"
    expect_text "$dir/out" "norm layernorm; $kind run;" "$kind run line"
    expect_text "$dir/out" "the first recorded" "$kind first step"
    expect_text "$dir/out" "Over the recorded steps (step 0 ->" "$kind over the steps"
    if grep -qiE "initiali|training" "$dir/out"; then
        fail "$kind report speaks of training:"; grep -iE "initiali|training" "$dir/out"
    else
        pass
    fi
    if grep -q "^Gradients" "$dir/out"; then fail "$kind report has a gradients section"; else pass; fi
    expect_exit 0 "report --html of the $kind run" -- \
        "$tool" report --html "$dir/$kind.html" "$dir/$kind.h5"
    if grep -qiE "initiali|training" "$dir/$kind.html"; then
        fail "$kind page speaks of training:"; grep -oiE ".{60}(initiali|training).{20}" "$dir/$kind.html"
    else
        pass
    fi
    expect_text "$dir/$kind.html" "Over the recorded steps" "$kind page over the steps"
    "$tool" report --json "$dir/$kind.h5" >"$dir/$kind.json" || fail "report --json $kind"
    if python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["run"]["run_kind"] == sys.argv[2], r["run"]["run_kind"]
assert r["gradients"] is None
assert r["steps"]["recorded"] == (6 if sys.argv[2] == "inference" else 3), r["steps"]' \
        "$dir/$kind.json" "$kind"; then
        pass
    else
        fail "JSON of the $kind run"
    fi
done
# the decoder's steps: seq * T + pos, every one recorded, the forwards
# between sequences left out
"$tool" dump --all "$dir/inference.h5" >"$dir/dump" || fail "dump inference"
expect_text "$dir/dump" "recorded: 6 steps, step 0 .. 5" "decoder steps"

tool_test_finish
