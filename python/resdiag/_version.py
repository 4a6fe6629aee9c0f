"""The version of this module; meson.build's project version, which the
library it loads must match in major and minor (tests/install/test-python-install.sh
checks the two are the same)."""
__version__ = "0.1.0"
