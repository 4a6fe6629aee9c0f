#!/usr/bin/env bash
# run-h5py.sh SCRIPT [ARGS...] - runs a test that reads run files with h5py
# (Debian: python3-h5py), with the first Python that can import it:
# /usr/bin/python3 first, then python3 on PATH. Exit 77 (meson: skipped)
# when none can.
for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import h5py' >/dev/null 2>&1; then
        exec "$py" "$@"
    fi
done
echo "run-h5py.sh: no Python with h5py (apt-get install python3-h5py): skipped" >&2
exit 77
