# python-needs.sh - sourced by the tests that pip-install the module: exits
# 77 (skipped) unless $py (set by the caller) has torch, pip, wheel and
# setuptools >= 61, what `pip install --no-build-isolation ./python` needs.
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "no torch for $py (apt-get install python3-torch): skipped"; exit 77
fi
if ! "$py" -m pip --version >/dev/null 2>&1 || ! "$py" -c '
import setuptools, wheel, sys
sys.exit(int(setuptools.__version__.split(".")[0]) < 61)' >/dev/null 2>&1; then
    echo "no pip, wheel or setuptools >= 61 for $py (apt-get install python3-pip): skipped"
    exit 77
fi
