/* test-header.c - the public header compiles alone as strict C99, and
 * without RESDIAG_ADVANCED_API declares the stable core only. */
#include <resdiag.h>

#if defined(RESDIAG_MAX_TEAM) || defined(RESDIAG_SIGNALS_RETURN) || \
    defined(RESDIAG_PARTIAL_DOUBLES) || defined(RESDIAG_RANK_ALL)
#error "the advanced tier is declared without RESDIAG_ADVANCED_API"
#endif

int main(void)
{
    resdiag_tensor t = resdiag_f32((const float *)0, 0, 1);
    return resdiag_version_number() == 0 && t.cols == 0;
}
