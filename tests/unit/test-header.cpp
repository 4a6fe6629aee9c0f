// test-header.cpp - the public header compiles and links from C++.
#include <resdiag.h>

int main()
{
    resdiag_tensor t = resdiag_bf16(nullptr, 0, 4);
    resdiag *r = nullptr;
    return RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, t) != RESDIAG_OK ||
           resdiag_version_number() != RESDIAG_VERSION_NUMBER;
}
