/* test-header.c - the public header compiles alone as strict C99. */
#include <resdiag.h>

int main(void)
{
    resdiag_tensor t = resdiag_f32((const float *)0, 0, 1);
    return resdiag_version_number() == 0 && t.cols == 0;
}
