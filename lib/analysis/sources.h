/*
 * sources.h - the one table of what the literature says that the
 * consequences quote (sources.c): for each consequence its source, its
 * claim with the source's numbers, the setting they were measured in and
 * the limits. The text, JSON and HTML renderers all print these strings.
 */
#ifndef RESDIAG_ANALYSIS_SOURCES_H
#define RESDIAG_ANALYSIS_SOURCES_H

/* The consequences, in the order the report lists them. */
typedef enum rd_cq_id {
    RD_CQ_POST_NO_WARMUP = 0,  /* post-norm, lr without warm-up */
    RD_CQ_POST_DEEP_WARMUP,    /* post-norm at 12 or more layers, with warm-up */
    RD_CQ_POST_SMALL_INIT,     /* post-norm with a small or zero branch at init */
    RD_CQ_PRE_DEEP,            /* pre-norm at 24 or more layers */
    RD_CQ_PRE_NO_WARMUP,       /* pre-norm, lr without warm-up */
    RD_N_CQ
} rd_cq_id;

typedef struct rd_source {
    const char *id;      /* the JSON id */
    const char *title;   /* what the condition is, in words */
    const char *source;  /* the citation(s) */
    const char *claim;   /* what the source found, with its numbers */
    const char *setting; /* task, data size, depth of those numbers */
    const char *limits;  /* what the numbers do not cover */
} rd_source;

/* The entry of consequence c (0 .. RD_N_CQ-1). */
const rd_source *rd_source_of(rd_cq_id c);

#endif
