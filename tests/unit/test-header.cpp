// test-header.cpp - the public header, both tiers, compiles and links from C++.
#define RESDIAG_ADVANCED_API
#include <resdiag.h>

int main()
{
    resdiag_tensor t = resdiag_bf16(nullptr, 0, 4);
    resdiag *r = nullptr;
    return RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, t) != RESDIAG_OK ||
           resdiag_observe_team_at(r, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, t, 0, 1,
                                   __FILE__, __LINE__) != RESDIAG_OK ||
           resdiag_version_number() != RESDIAG_VERSION_NUMBER;
}
