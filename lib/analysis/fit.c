/*
 * fit.c - least-squares line fits with 95% intervals and R^2.
 *
 * The depth laws are fitted over at most a few thousand layers, so the
 * straightforward two-pass formulas in double (centred sums) are accurate
 * enough; they are checked against closed forms in tests/unit/test-analysis.c.
 */
#include "analysis/fit.h"

#include <math.h>
#include <stdlib.h>

double rd_t975(int df)
{
    static const double t[31] = {
        NAN,    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201,  2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080,  2.074,  2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    };
    if (df < 1)
        return NAN;
    if (df <= 30)
        return t[df];
    /* Cornish-Fisher: z + (z^3 + z)/(4 df) + (5z^5 + 16z^3 + 3z)/(96 df^2) */
    const double z = 1.959963984540054;
    double z3 = z * z * z, z5 = z3 * z * z, v = df;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

int rd_fit_line(const double *x, const double *y, int n, rd_fit *out)
{
    rd_fit f = { 0, 0, NAN, NAN, NAN, NAN, NAN, NAN };
    double mx = 0, my = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            mx += x[i];
            my += y[i];
            m++;
        }
    f.n = m;
    if (m < 2) {
        *out = f;
        return 0;
    }
    mx /= m;
    my /= m;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            lo = y[i] < lo ? y[i] : lo;
            hi = y[i] > hi ? y[i] : hi;
        }
    f.y_spread = my != 0 ? (hi - lo) / fabs(my) : (hi > lo ? INFINITY : 0);
    double sxx = 0, sxy = 0, syy = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            double dx = x[i] - mx, dy = y[i] - my;
            sxx += dx * dx;
            sxy += dx * dy;
            syy += dy * dy;
        }
    if (!(sxx > 0)) {
        *out = f;
        return 0;
    }
    f.b = sxy / sxx;
    f.a = my - f.b * mx;
    double ssres = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            double e = y[i] - (f.a + f.b * x[i]);
            ssres += e * e;
        }
    f.r2 = syy > 0 ? 1 - ssres / syy : NAN;
    if (m >= 3) {
        double se = sqrt(ssres / (m - 2) / sxx);
        double h = rd_t975(m - 2) * se;
        f.b_lo = f.b - h;
        f.b_hi = f.b + h;
        f.ok = 1;
    }
    *out = f;
    return f.ok;
}

int rd_fit_loglog(const double *x, const double *y, int n, rd_fit *out)
{
    double *lx = malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof *lx);
    if (!lx) {
        rd_fit f = { 0, 0, NAN, NAN, NAN, NAN, NAN, NAN };
        *out = f;
        return 0;
    }
    double *ly = lx + (n > 0 ? n : 1);
    for (int i = 0; i < n; i++) {
        lx[i] = x[i] > 0 ? log(x[i]) : NAN;
        ly[i] = y[i] > 0 ? log(y[i]) : NAN;
    }
    int ok = rd_fit_line(lx, ly, n, out);
    free(lx);
    return ok;
}
