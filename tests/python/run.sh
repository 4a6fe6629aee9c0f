#!/usr/bin/env bash
# run.sh SCRIPT [ARGS...] - runs a test of the PyTorch binding with the first
# Python that can import torch: Debian's /usr/bin/python3 (python3-torch)
# first, then python3 on PATH. Exit 77 (meson: skipped) when none can.
for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch' >/dev/null 2>&1; then
        exec "$py" "$@"
    fi
done
echo "run.sh: no Python with torch (apt-get install python3-torch): skipped" >&2
exit 77
