/*
 * evidence.c - the measures the placement verdict is built from: the
 * relative residual of a relation between sketches, the deepnorm alpha
 * fit, the normalization signature of a tensor and the rounding floor a
 * true relation can reach (doc/ARCHITECTURE.md, "Evidence for the
 * placement verdict").
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "analysis/phases.h"

/* The rounding floor of a relation (rd_rounding_floor): ROUND_C times the
 * unit roundoff u of the coarsest dtype among its tensors, plus the double
 * rounding of the sketch's sums. A true relation's residual is the rounding
 * of the one elementwise add (or copy) that made the tensor: independent
 * errors of at most u/2 relative per element, whose sketch is ~u/sqrt(12)
 * of the largest term and does not grow with the width (the sums are in
 * double); measured 3e-8..1e-7 in f32 (0.5-1.7 u), ~2e-3 in bf16. ROUND_C
 * = 2 leaves a factor 1.2..4 over that for the sketch's K-bucket spread.
 * A schema-2 file adds the float32 rounding of the stored sketches. */
#define ROUND_C 2.0

/* Normalization signature: coefficient of variation (std / mean over
 * tokens) of the per-token L2 norm. A norm output with gain 1 has equal
 * token norms: measured 1e-8 in f32; bf16 rounding adds ~2^-9/sqrt(3 d)
 * (< 2e-4 for d >= 32). Inputs that are tiny next to the norm's epsilon
 * (gpt2-init embeddings) spread it to ~1e-3, which is why the threshold is
 * not tighter: NORM_CV below it is "normalized". Gaussian-like tokens that
 * are not normalized spread by ~1/sqrt(2 d) (0.125 at d = 32, 0.026 at
 * d = 768): above 0.3/sqrt(2 d) (capped at 1e-2) is "not normalized". In
 * between the signature does not decide by itself (depth.c compares it
 * with the run's own normalized layers). */
#define NORM_CV RD_NORM_CV
#define UNNORM_CV_CAP 1e-2

double rd_vnorm(const double *v, int k)
{
    double s = 0;
    for (int i = 0; i < k; i++)
        s += v[i] * v[i];
    return sqrt(s);
}

double rd_rel_combo(const double *const *v, const double *c, int n, int k)
{
    double scale = 0, r2 = 0;
    for (int j = 0; j < n; j++) {
        double m = fabs(c[j]) * rd_vnorm(v[j], k);
        if (!(m == m))
            return NAN;
        if (m > scale)
            scale = m;
    }
    for (int i = 0; i < k; i++) {
        double s = 0;
        for (int j = 0; j < n; j++)
            s += c[j] * v[j][i];
        r2 += s * s;
    }
    if (!(scale > 1e-300))
        return NAN; /* all terms zero: no evidence either way */
    return sqrt(r2) / scale;
}

double rd_fit_alpha(const double *ni, const double *x, const double *f, int k, double *err)
{
    double xx = 0, xr = 0;
    for (int i = 0; i < k; i++) {
        xx += x[i] * x[i];
        xr += x[i] * (ni[i] - f[i]);
    }
    if (!(xx > 0)) {
        *err = NAN;
        return NAN;
    }
    double alpha = xr / xx;
    const double *v[3] = { ni, x, f };
    const double c[3] = { 1, -alpha, -1 };
    *err = rd_rel_combo(v, c, 3, k);
    return alpha;
}

static double unit_roundoff(const double *st);

int rd_signature(const double *f, double cv_unnorm)
{
    double rows = f[RESDIAG_FIELD_ROWS], m = f[RESDIAG_FIELD_TOK_NORM_MEAN];
    double sd = f[RESDIAG_FIELD_TOK_NORM_STD];
    if (!(rows >= 2) || !(m > 0) || !isfinite(sd))
        return RD_SIG_UNKNOWN;
    double cv = sd / m;
    /* A norm output stored in bf16 spreads by its rounding, and more when
     * the norm itself ran in bf16 (measured 2.8e-3 for torch's LayerNorm
     * at d = 128): the threshold is the tensor's unit roundoff there. */
    if (cv < fmax(NORM_CV, unit_roundoff(f)))
        return RD_SIG_NORMALIZED;
    if (cv > cv_unnorm)
        return RD_SIG_NOT;
    return RD_SIG_UNCLEAR;
}

/* Unit roundoff of the dtype a tensor was recorded in. resdiag does not
 * store the dtype, but the largest |value| is one of the tensor's elements,
 * stored exactly in double, and its bits show the format: an f32 value with
 * the low 16 mantissa bits zero is a bf16 value (a real f32 tensor's
 * maximum is that by chance with probability 2^-16), with the low 13 zero
 * and an f16 exponent an f16 value; not an f32 value at all, f64. A tensor
 * of zeros (no evidence either way) counts as f32. Errs coarse: an f32
 * tensor whose maximum happens to be short (1.0) gets the bf16 floor. */
static double unit_roundoff(const double *st)
{
    double m = st[RESDIAG_FIELD_ABSMAX];
    if (!(m > 0) || !isfinite(m))
        return 0x1p-24;
    float f = (float)m;
    if ((double)f != m)
        return 0x1p-53;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0xffffu) == 0)
        return 0x1p-8;
    int e = (int)(bits >> 23 & 0xffu) - 127;
    if ((bits & 0x1fffu) == 0 && e >= -14 && e <= 15)
        return 0x1p-11;
    return 0x1p-24;
}

double rd_rounding_floor(const double *const *stats, int n, int schema_version, int terms)
{
    double u = 0, elems = 0;
    for (int j = 0; j < n; j++) {
        double uj = unit_roundoff(stats[j]);
        double ej = stats[j][RESDIAG_FIELD_ROWS] * stats[j][RESDIAG_FIELD_COLS];
        if (uj > u)
            u = uj;
        if (ej > elems)
            elems = ej;
    }
    /* Schema 2 stores the block sites' sketches as float32: each term of
     * the relation is rounded by at most 2^-24 of its norm, and the
     * residual is relative to the largest term's norm (rd_rel_combo), so
     * storage adds at most terms * 2^-24 to what the tensors' rounding
     * leaves (doc/FORMAT.md, "Schema 2"). */
    double stored = schema_version >= 2 ? terms * 0x1p-24 : 0;
    return ROUND_C * (u + 0x1p-53 * sqrt(elems > 0 ? elems : 1)) + stored;
}

double rd_unnorm_cv(int cols)
{
    double t = 0.3 / sqrt(2.0 * (cols > 0 ? cols : 1));
    return t < UNNORM_CV_CAP ? t : UNNORM_CV_CAP;
}

double rd_cv_of(const double *f)
{
    return f[RESDIAG_FIELD_TOK_NORM_STD] / f[RESDIAG_FIELD_TOK_NORM_MEAN];
}
