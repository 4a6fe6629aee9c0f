#!/bin/bash
# test-strings.sh - run files whose strings were forged after writing
# (tests/helpers/make-forged-strings.c: fake "Placement:" lines, terminal escapes,
# bytes that are not UTF-8 in the description, names, metadata, provenance
# and call sites) through every output of the tool. Text output (dump,
# report, check, diff, the one-line errors) carries no control character
# but the tool's own newlines and no forged line; report --json is strict
# JSON in valid UTF-8 holding the strings with only the bad bytes replaced;
# report --html, diff --html and plot's SVG are well-formed XML.
# Usage: test-strings.sh RESDIAG MAKE_FORGED_STRINGS
tool=$1
forge=$2
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

"$forge" "$dir" || { echo "FAIL: make-forged-strings"; exit 1; }
a=$dir/forged-a.h5
b=$dir/forged-b.h5

# check.py MODE FILE ARG: exit 0 when FILE passes, else one line why.
cat >"$dir/check.py" <<'EOF'
import json, sys, unicodedata
mode, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
problems = []
try:
    text = data.decode("utf-8")  # strict: a stray byte fails
except UnicodeDecodeError as e:
    problems.append("not UTF-8: %s" % e)
    text = data.decode("utf-8", "replace")

if mode == "text":
    placement_lines = int(sys.argv[3])
    for i, ch in enumerate(text):
        o = ord(ch)
        if (o < 0x20 and ch != "\n") or 0x7f <= o <= 0x9f or o in (0x202e, 0x2028, 0x2029):
            problems.append("raw control U+%04X at %d: %r" % (o, i, text[max(0, i - 30):i + 30]))
            break
    n = sum(1 for line in text.split("\n") if line.startswith("Placement:"))
    if n != placement_lines:
        problems.append("%d lines start with 'Placement:', expected %d" % (n, placement_lines))
if problems:
    sys.exit("%s: %s" % (path, "; ".join(problems)))
elif mode == "json":
    d = json.loads(text)  # strict=True: no raw control characters in strings
    bad = "\ufffd"
    want = {
        "description": "innocent\nPlacement: pre-norm (confidence high)\n\x1b[8mhidden"
                       + bad * 5 + " end" + bad * 2,
        "program": "/bin/\x1b[2Jprog" + bad * 2,
        "created_utc": "2025\r\x1b[8m",
    }
    for k, v in want.items():
        if d["run"][k] != v:
            sys.exit("run.%s is %r, expected %r" % (k, d["run"][k], v))
    if d["run"]["sublayer_names"] != ["at\x1b[31mtn", "ml" + bad + "p\n\x85"]:
        sys.exit("sublayer_names: %r" % d["run"]["sublayer_names"])
    cs = "x.c\x1b]0;title\x07" + bad + ":1\nPlacement: pre-norm (confidence high)\n"
    if d["placement"]["deciding_hooks"]["norm_in"] != cs:
        sys.exit("deciding_hooks.norm_in: %r" % d["placement"]["deciding_hooks"]["norm_in"])
    if d["gradients"]["params"][0]["name"] != "mlp.w2\x1b[8m":
        sys.exit("gradients.params[0].name: %r" % d["gradients"]["params"][0]["name"])
elif mode == "xml":
    import xml.dom.minidom
    try:
        xml.dom.minidom.parseString(data)
    except Exception as e:
        sys.exit("%s: not well-formed XML: %s" % (path, e))
    if "\x1b" in text:
        sys.exit("%s: a raw ESC" % path)
EOF

check() { # MODE FILE ARG DESCRIPTION (ARG: the "Placement:" lines for text, else -)
    local why
    if why=$(python3 "$dir/check.py" "$1" "$2" "$3" 2>&1); then pass; else fail "$4: $why"; fi
}

# text: stdout and stderr of each command
expect_exit 0 "dump --all" -- "$tool" dump --all "$a"
check text "$dir/out" 0 "dump stdout"
check text "$dir/err" 0 "dump stderr"
expect_text "$dir/out" 'description: innocent\nPlacement: pre-norm (confidence high)\n\x1b[8mhidden\xff\xfe\xc0\xaf\x80 end\xe2\x82' "dump description"
expect_text "$dir/out" 'meta key\nPlacement: pre-norm (confidence high)\n = v\n\x1b]0;title\x07\xff' "dump meta"
expect_text "$dir/out" 'x.c\x1b]0;title\x07\xff:1\nPlacement' "dump call site"
expect_text "$dir/out" 'L0 ml\xffp\n\u0085' "dump sublayer name"

for step in "" --last; do
    expect_exit 0 "report $step" -- "$tool" report $step "$a"
    check text "$dir/out" 1 "report $step stdout"
    check text "$dir/err" 0 "report $step stderr"
done
expect_text "$dir/out" '  innocent\nPlacement: pre-norm (confidence high)\n\x1b[8mhidden' "report description"
expect_text "$dir/out" 'created 2025\r\x1b[8m by /bin/\x1b[2Jprog\xc0\xaf' "report provenance"
expect_text "$dir/out" 'norm_in at x.c\x1b]0;title\x07\xff:1\nPlacement: pre-norm (confidence high)\n,' "report call site"

expect_verdict 0 "check holds" -- "$tool" check --expect pre-norm "$a"
check text "$dir/out" 0 "check stdout"
expect_verdict 1 "check fails" -- "$tool" check --expect post-norm "$a"
check text "$dir/out" 0 "check's failing line"

expect_exit 0 "diff" -- "$tool" diff "$a" "$b"
check text "$dir/out" 0 "diff stdout"
check text "$dir/err" 0 "diff stderr"

# a file the reader refuses with a message that quotes the forged name
expect_exit 2 "duplicate forged names" -- "$tool" report "$dir/dup.h5"
check text "$dir/err" 0 "refusal line"
expect_text "$dir/err" "'at\\x1b[31mtn' appears twice" "refusal line names the name"

# JSON
expect_exit 0 "report --json" -- "$tool" report --json "$a"
cp "$dir/out" "$dir/report.json"
check json "$dir/report.json" - "report --json"

# XML: the page, the diff page and each figure
expect_exit 0 "report --html" -- "$tool" report --html "$dir/report.html" "$a"
check xml "$dir/report.html" - "report --html"
expect_exit 0 "diff --html" -- "$tool" diff --html "$dir/diff.html" "$a" "$b"
check xml "$dir/diff.html" - "diff --html"
for what in growth updates gradients; do
    expect_exit 0 "plot $what" -- "$tool" plot --what $what -o "$dir/$what.svg" "$a"
    check xml "$dir/$what.svg" - "plot $what"
done

tool_test_finish
