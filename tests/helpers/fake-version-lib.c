/* fake-version-lib.c - a shared object that answers the two version calls
 * of libresdiag with another release (FAKE_VERSION_NUMBER/_STRING, set by
 * meson.build) and has nothing else: what the Python module must refuse by
 * name and version, before looking up any other symbol
 * (tests/install/test-python-install.sh). */

__attribute__((visibility("default"))) unsigned resdiag_version_number(void)
{
    return FAKE_VERSION_NUMBER;
}

__attribute__((visibility("default"))) const char *resdiag_version_string(void)
{
    return FAKE_VERSION_STRING;
}
