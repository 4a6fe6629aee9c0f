/*
 * resdiag.h - residual-stream diagnostics for Transformer trainers.
 *
 * This is the only public header of libresdiag. What is not declared here
 * is not API.
 *
 * A trainer opens a run, brackets each training step with
 * resdiag_step_begin()/resdiag_step_end() (evaluation loops and decoders:
 * doc/INSTRUMENTING.md), and calls the hook macros
 * (RESDIAG_FWD, RESDIAG_BWD, RESDIAG_PARAM_GRAD) at the sites of each block's
 * norm -> sublayer -> residual add. The library computes compact statistics
 * of each tensor in one read, in the caller's thread, and appends them to an
 * HDF5 run file in batches. The reader API below opens such a file again.
 *
 * Dimension names used in comments:
 *   rows = tokens (B*T), cols = the tensor's width (d_model for the stream),
 *   L = n_layers, S = n_sublayers, K = sketch size.
 *
 * Thread-safety: see "Threads" below each function group. In short: open,
 * step_begin, step_end, flush, close and destroy must not run concurrently
 * with anything else on the same handle; hooks on *different layers* may run
 * concurrently from several threads between step_begin and step_end.
 *
 * The library never exits, never aborts, and never writes to stdout. Errors
 * are returned as resdiag_status and described through the log handler.
 *
 * Names of the calls that end things, the same for every object:
 *   X_destroy  frees an object (resdiag_destroy, resdiag_reader_destroy,
 *              resdiag_analysis_destroy), first closing what it holds open;
 *   X_close    only for a run being written: finishes the file and keeps
 *              the handle, so its result and resdiag_errmsg can be read;
 *   resdiag_free  frees the strings the library returns (reports, pages,
 *              figures).
 *
 * THE TIERS (doc/ARCHITECTURE.md, "API tiers"):
 *
 *   Stable core, 54 functions: what a trainer and a reader of run files
 *     need. Versions, status and logging; tensors, sites and fields; the
 *     model and options; runs (open, step_begin/step_end, observe_at,
 *     observe_alias, param_grad_at, step_metric, flush, close); the reader
 *     (open, info, steps, site, param, update, metric); the analysis, its
 *     check and renderings (text, JSON, HTML, SVG); names. A function here
 *     keeps its name, signature and meaning for the life of the soname
 *     (libresdiag.so.0): structs grow only at their end (struct_size),
 *     enums only by appended values.
 *
 *   Advanced, 43 functions, declared only after
 *         #define RESDIAG_ADVANCED_API
 *         #include <resdiag.h>
 *     copies of another site's statistics (same_as), team calls,
 *     statistics computed elsewhere (partials, the sketch layout), signal
 *     handlers, aborted steps, pausing, the ranks of a job, the reader's
 *     details and its generic datasets, more of the analysis, comparisons
 *     and the dump. Free to change in any release before 1.0: the
 *     CHANGELOG lists every change. New entry points start here. Their
 *     symbols are exported all the same (a binding that loads them by
 *     name, as the Python one does, needs no header).
 *
 *   Deprecated, 2 functions, at the end: old names kept so that old code
 *     builds; the compiler warns at each use.
 */
#ifndef RESDIAG_H
#define RESDIAG_H

#include <stddef.h>
#include <stdint.h>

#include "resdiag-version.h" /* RESDIAG_VERSION_MAJOR/MINOR/MICRO/NUMBER/STRING */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(RESDIAG_BUILDING_LIBRARY)
#define RESDIAG_API __declspec(dllexport)
#elif defined(__GNUC__) && __GNUC__ >= 4
#define RESDIAG_API __attribute__((visibility("default")))
#else
#define RESDIAG_API
#endif

/* Marks the old names: the compiler warns where one is used. */
#if defined(__GNUC__) || defined(__clang__)
#define RESDIAG_DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(_MSC_VER)
#define RESDIAG_DEPRECATED(msg) __declspec(deprecated(msg))
#else
#define RESDIAG_DEPRECATED(msg)
#endif

/* ======================================================================== */
/* THE STABLE CORE (54 functions)                                           */
/* ======================================================================== */

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

/* RESDIAG_VERSION_NUMBER of the library actually linked; compare it with the
 * macro to catch a header/library mismatch. */
RESDIAG_API unsigned resdiag_version_number(void);
/* "MAJOR.MINOR.MICRO" of the library actually linked. Static storage. */
RESDIAG_API const char *resdiag_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes. Values are pinned: never renumbered, only appended.         */
/* ------------------------------------------------------------------------ */

typedef enum resdiag_status {
    RESDIAG_OK = 0,
    RESDIAG_E_NULL = 1,        /* a required pointer argument was NULL */
    RESDIAG_E_INVALID = 2,     /* an argument has a value that is not allowed */
    RESDIAG_E_RANGE = 3,       /* layer, sublayer, site or parameter out of range */
    RESDIAG_E_SHAPE = 4,       /* tensor shape does not match the model */
    RESDIAG_E_STATE = 5,       /* call out of order (step_end without step_begin, a call
                                  after close, ...); a hook outside a step is not one */
    RESDIAG_E_NOMEM = 6,       /* memory allocation failed */
    RESDIAG_E_IO = 7,          /* the file could not be created, written or read */
    RESDIAG_E_NOSPACE = 8,     /* disk full or file size limit reached */
    RESDIAG_E_FORMAT = 9,      /* not a resdiag run file, or a damaged one */
    RESDIAG_E_VERSION = 10,    /* run file written by a newer, unknown schema */
    RESDIAG_E_NOT_FOUND = 11,  /* no such dataset, step or name in the run file */
    RESDIAG_E_DTYPE = 12,      /* unknown tensor dtype */
    RESDIAG_E_INTERRUPTED = 13,/* a SIGINT/SIGTERM closed the run (resdiag_install_signal_handlers) */
    RESDIAG_E_EXISTS = 14,     /* the path holds something open may not replace (see resdiag_open) */
    RESDIAG_E_LOCKED = 15,     /* another writer (process or handle) is recording at this path */
    RESDIAG_E_BUSY = 16,       /* the same site is being observed by another thread right now */
    RESDIAG_ALARM = 17         /* no error: resdiag_step_end wrote the step, and an alarm
                                  declared in resdiag_options fired in it (only a run that
                                  declares alarms ever sees it; doc/INSTRUMENTING.md) */
} resdiag_status;

/* A short English description of a status. Never NULL; static storage. */
RESDIAG_API const char *resdiag_strerror(resdiag_status status);

/* ------------------------------------------------------------------------ */
/* Logging. The library prints nothing by itself; every message goes to a   */
/* log handler. Misuse by the caller is logged with a "client bug:" prefix.  */
/* ------------------------------------------------------------------------ */

typedef enum resdiag_log_priority {
    RESDIAG_LOG_DEBUG = 10,
    RESDIAG_LOG_INFO = 20,
    RESDIAG_LOG_ERROR = 30
} resdiag_log_priority;

/* msg is a complete, formatted line without a trailing newline, text-escaped
 * (strings it quotes cannot add lines or control characters; it is valid
 * UTF-8); it is only valid during the call. Handlers may be called from any thread that calls a
 * hook, and must be thread-safe if hooks are. (A formatted string rather than
 * a va_list so that bindings such as ctypes can implement a handler.) */
typedef void (*resdiag_log_fn)(resdiag_log_priority priority, const char *msg,
                               void *user_data);

/* Sets the process-wide handler used by the reader and by runs whose options
 * name no handler. fn = NULL restores the default, which writes
 * "resdiag: <msg>\n" to stderr. Not thread-safe: call it before any other
 * resdiag function. */
RESDIAG_API void resdiag_set_log_handler(resdiag_log_fn fn, void *user_data);
/* Messages below this priority are not passed to any handler.
 * Default RESDIAG_LOG_ERROR. Not thread-safe, like the above. */
RESDIAG_API void resdiag_set_log_priority(resdiag_log_priority priority);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum resdiag_dtype {
    RESDIAG_DTYPE_F32 = 0,
    RESDIAG_DTYPE_F64 = 1,
    RESDIAG_DTYPE_F16 = 2,  /* IEEE binary16 */
    RESDIAG_DTYPE_BF16 = 3  /* bfloat16: the upper 16 bits of an f32 */
} resdiag_dtype;

/* A view of a 2-D tensor (rows, cols), row-major with a row stride.
 * The library reads it during the hook call only and keeps no pointer.
 * data needs no alignment (a view into a packed buffer may start at any
 * byte); aligned data is read fastest. */
typedef struct resdiag_tensor {
    const void *data;     /* (rows, row_stride) elements of dtype; may be NULL only if rows == 0 */
    resdiag_dtype dtype;
    int64_t rows;         /* tokens, >= 0 */
    int64_t cols;         /* width, >= 1 */
    int64_t row_stride;   /* elements between row starts; 0 means cols; else >= cols */
} resdiag_tensor;

static inline resdiag_tensor resdiag_tensor_make(const void *data, resdiag_dtype dtype,
                                                 int64_t rows, int64_t cols,
                                                 int64_t row_stride)
{
    resdiag_tensor t;
    t.data = data;
    t.dtype = dtype;
    t.rows = rows;
    t.cols = cols;
    t.row_stride = row_stride;
    return t;
}
/* Contiguous (rows, cols) views of the four dtypes. */
static inline resdiag_tensor resdiag_f32(const float *data, int64_t rows, int64_t cols)
{ return resdiag_tensor_make(data, RESDIAG_DTYPE_F32, rows, cols, 0); }
static inline resdiag_tensor resdiag_f64(const double *data, int64_t rows, int64_t cols)
{ return resdiag_tensor_make(data, RESDIAG_DTYPE_F64, rows, cols, 0); }
static inline resdiag_tensor resdiag_f16(const uint16_t *data, int64_t rows, int64_t cols)
{ return resdiag_tensor_make(data, RESDIAG_DTYPE_F16, rows, cols, 0); }
static inline resdiag_tensor resdiag_bf16(const uint16_t *data, int64_t rows, int64_t cols)
{ return resdiag_tensor_make(data, RESDIAG_DTYPE_BF16, rows, cols, 0); }

/* ------------------------------------------------------------------------ */
/* Sites, directions and the statistics recorded at each                     */
/* ------------------------------------------------------------------------ */

/* Where in a block a tensor was observed (see doc/INSTRUMENTING.md, "The hook sites").
 * Block sites take a layer and sublayer; model sites ignore both. */
typedef enum resdiag_site {
    RESDIAG_STREAM_IN = 0,   /* residual stream entering the sublayer */
    RESDIAG_NORM_IN = 1,     /* what the sublayer's norm reads */
    RESDIAG_NORM_OUT = 2,    /* what the norm returns */
    RESDIAG_BRANCH_OUT = 3,  /* sublayer output before the residual add (dx) */
    RESDIAG_STREAM_OUT = 4,  /* residual stream leaving the sublayer */
    /* Sites of schema 3 (files of 0.3 and before hold the five above): */
    RESDIAG_BRANCH_IN = 5,   /* what the branch's first operation reads: the stream
                                itself (post-norm, reordered) or a norm's output
                                (pre-norm, sandwich) */
    RESDIAG_OUT_NORM_IN = 6, /* what a norm on the branch's output reads: the
                                branch's raw output (sandwich's second norm,
                                the reordered norm x + Norm(F(x))) */
    RESDIAG_OUT_NORM_OUT = 7,/* that norm's output (what is added, when nothing
                                follows it: then it is branch_out) */
    RESDIAG_N_BLOCK_SITES = 8,

    RESDIAG_EMBED_OUT = 16,      /* embedding output = stream into layer 0 */
    RESDIAG_FINAL_NORM_IN = 17,  /* what the final norm reads */
    RESDIAG_FINAL_NORM_OUT = 18, /* what the final norm returns = what the head reads */
    RESDIAG_LOGITS = 19          /* output head (cols = vocabulary) */
} resdiag_site;
/* The report's "final norm" comes from these sites' data: FINAL_NORM_OUT
 * that differs from FINAL_NORM_IN (or, without it, from the last layer's
 * STREAM_OUT) is a norm's output; the very same tensor is not (an identity
 * in the norm's place). A model without a final norm may observe what its
 * head reads at FINAL_NORM_OUT: the report then says "absent". Neither site
 * observed: "not observed" (the logits alone do not tell). */
#define RESDIAG_N_MODEL_SITES 4

typedef enum resdiag_direction {
    RESDIAG_FORWARD = 0,   /* the activation itself */
    RESDIAG_BACKWARD = 1   /* dLoss/d(activation) at that site: the total derivative,
                              summed over every path that reads the activation */
} resdiag_direction;

/* Statistics recorded for each observed tensor, in this order (the last axis
 * of every *_stats dataset). NaN and Inf elements are left out (they count
 * as 0, and a token's mean, RMS and std still divide by cols); the NaN and
 * Inf counts say how many there were. Per-token values and ABSMAX_COL are
 * NaN when rows == 0, ABSMAX_COL also when no element is finite.
 * Precision: f64 input, and any input on the portable path
 * (RESDIAG_FORCE_PORTABLE=1), is summed in double. The vector paths (AVX2,
 * AVX-512; RESDIAG_DISABLE_AVX512=1 leaves AVX-512 out) sum each f32, f16
 * or bf16 row in float lanes over blocks of at most 512 (AVX2) or 1024
 * (AVX-512) columns, at most 16 terms per lane per block, and in double across blocks and tokens: each row sum is within
 * G = 24 * 2^-24 (about 1.4e-6) of the sum of its |terms|, so per-token norm
 * and RMS are within G/2 of themselves, the per-token mean within G * RMS,
 * the per-token std within 6 G. Rows where float lanes could not keep that
 * (mean^2 > 3 var, |x| > ~1.8e19, sum x^2 < 2^-70, NaN or Inf) are summed
 * in double. ABSMAX, its column and the counts are exact on every path.
 * Sums are scaled where f64 input would overflow or underflow, so no
 * other field is NaN, and one is +Inf only where its value is beyond the
 * double range: FROB and the per-token norms (sqrt(cols) times the RMS) of
 * f64 values near DBL_MAX. The sketch is not scaled: Inf or NaN where its
 * sums overflow. */
typedef enum resdiag_field {
    RESDIAG_FIELD_ROWS = 0,           /* tokens observed */
    RESDIAG_FIELD_COLS = 1,           /* width */
    RESDIAG_FIELD_FROB = 2,           /* Frobenius norm of the tensor */
    RESDIAG_FIELD_TOK_NORM_MEAN = 3,  /* per-token L2 norm: mean over tokens */
    RESDIAG_FIELD_TOK_NORM_STD = 4,   /*   ... its standard deviation over tokens */
    RESDIAG_FIELD_TOK_NORM_MIN = 5,
    RESDIAG_FIELD_TOK_NORM_MAX = 6,
    RESDIAG_FIELD_TOK_MEAN_MEAN = 7,  /* per-token mean of the values: mean over tokens */
    RESDIAG_FIELD_TOK_MEAN_STD = 8,   /*   ... its standard deviation over tokens */
    RESDIAG_FIELD_TOK_RMS_MEAN = 9,   /* per-token RMS = norm/sqrt(cols): mean over tokens */
    RESDIAG_FIELD_TOK_RMS_STD = 10,   /*   ... its standard deviation over tokens */
    RESDIAG_FIELD_TOK_STD_MEAN = 11,  /* per-token standard deviation (about the token's mean): mean */
    RESDIAG_FIELD_TOK_STD_STD = 12,   /*   ... its standard deviation over tokens */
    RESDIAG_FIELD_ABSMAX = 13,        /* largest |value| */
    RESDIAG_FIELD_ABSMAX_COL = 14,    /* its column (first one on ties) */
    RESDIAG_FIELD_NAN_COUNT = 15,
    RESDIAG_FIELD_INF_COUNT = 16,
    RESDIAG_FIELD_CALL_SEQ = 17,      /* order of this hook call within the step, from 0 */
    RESDIAG_N_FIELDS = 18
} resdiag_field;

/* Per (layer, sublayer), computed when STREAM_IN and BRANCH_OUT were both
 * observed in a forward step. */
typedef enum resdiag_update_field {
    RESDIAG_UPDATE_RATIO_FROB = 0,     /* ||dx||_F / ||x||_F */
    RESDIAG_UPDATE_RATIO_TOK_MEAN = 1, /* mean over tokens of ||dx_i|| / ||x_i|| */
    RESDIAG_N_UPDATE_FIELDS = 2
} resdiag_update_field;

/* ------------------------------------------------------------------------ */
/* Model description and options. Both carry struct_size for ABI growth:    */
/* always fill them with the *_init function first.                          */
/* ------------------------------------------------------------------------ */

typedef enum resdiag_block_kind {
    RESDIAG_BLOCK_SEQUENTIAL = 0,  /* sublayers run one after another (GPT-2) */
    RESDIAG_BLOCK_PARALLEL = 1     /* all sublayers read the same stream (GPT-J, PaLM) */
} resdiag_block_kind;

typedef enum resdiag_placement {
    RESDIAG_PLACEMENT_UNDECLARED = 0,
    RESDIAG_PLACEMENT_PRE = 1,       /* x + F(Norm(x)) */
    RESDIAG_PLACEMENT_POST = 2,      /* Norm(x + F(x)) */
    RESDIAG_PLACEMENT_SANDWICH = 3,  /* x + Norm(F(Norm(x))) (Peri-LN) */
    RESDIAG_PLACEMENT_DEEPNORM = 4,  /* Norm(alpha*x + F(x)) */
    RESDIAG_PLACEMENT_MIXED = 5,     /* post-norm in the first layers, pre after (Mix-LN) */
    RESDIAG_PLACEMENT_PARALLEL = 6,  /* x + Attn(Norm(x)) + MLP(Norm(x)) */
    RESDIAG_PLACEMENT_NONE = 7,      /* no norm in the blocks */
    /* 8..11 are verdicts only (resdiag_verdict); the values stay equal. */
    RESDIAG_PLACEMENT_REORDERED = 12, /* x + Norm(F(x)): a norm on the branch's output
                                         only (OLMo 2, Swin v2 res-post-norm) */
    RESDIAG_PLACEMENT_PER_SUBLAYER = 13 /* each sublayer its own placement, the same
                                           in every layer (attn: none, mlp: post) */
} resdiag_placement;

typedef enum resdiag_norm_kind {
    RESDIAG_NORM_UNDECLARED = 0,
    RESDIAG_NORM_LAYERNORM = 1,
    RESDIAG_NORM_RMSNORM = 2
} resdiag_norm_kind;

/* What the recorded steps are, so that the report words them right. A step
 * is whatever the trainer brackets with step_begin/step_end: an optimizer
 * step, an evaluation batch, a decoded sequence (doc/INSTRUMENTING.md).
 * Pinned: never renumbered, only appended. */
typedef enum resdiag_run_kind {
    RESDIAG_RUN_TRAINING = 0,    /* default; files written before run_kind read as this */
    RESDIAG_RUN_EVALUATION = 1,  /* forward (and loss) only, no parameter updates */
    RESDIAG_RUN_INFERENCE = 2    /* decoding or serving: forward only */
} resdiag_run_kind;

#define RESDIAG_MAX_SUBLAYERS 16
#define RESDIAG_MAX_PARAMS 32
#define RESDIAG_MAX_NAME 64      /* bytes of a sublayer/parameter name, with the NUL */
#define RESDIAG_MAX_SKETCH 64
#define RESDIAG_MAX_METRICS 32
#define RESDIAG_MAX_ABORT_REASON 128 /* bytes of a stored resdiag_step_abort reason,
                                        with the NUL */
#define RESDIAG_MAX_HOOK_THREADS 16 /* resdiag_options.hook_threads */

/* How a job of several processes (ranks) divides the model's work, so
 * that the reader merges their files right (doc/RANKS.md). Pinned: never
 * renumbered, only appended. */
typedef enum resdiag_split {
    RESDIAG_SPLIT_NONE = 0,      /* one process (world_size 1) */
    RESDIAG_SPLIT_DATA = 1,      /* data parallel: each rank its own sequences; the
                                    default with world_size > 1 */
    RESDIAG_SPLIT_SEQUENCE = 2,  /* sequence/context parallel: each rank some tokens
                                    of the same sequences */
    RESDIAG_SPLIT_TENSOR = 3,    /* tensor parallel: each rank a shard of the columns
                                    (shard_col_offset, shard_cols) */
    RESDIAG_SPLIT_PIPELINE = 4   /* pipeline stages: each rank a range of layers
                                    (layer_first, layer_count) */
} resdiag_split;

#define RESDIAG_RANK_DETECT (-1) /* resdiag_model.rank: from the launcher's environment */

/* Every string here goes into the run file, which holds only UTF-8
 * (doc/FORMAT.md): resdiag_open refuses with RESDIAG_E_INVALID, naming the
 * string, a name, meta key, meta value or description that is not valid
 * UTF-8 or holds a control character (U+0000..U+001F, U+007F,
 * U+0080..U+009F); the free text (description, meta values) may hold
 * newlines and tabs. */
typedef struct resdiag_model {
    size_t struct_size;                  /* sizeof(resdiag_model): set by resdiag_model_init */
    int n_layers;                        /* blocks, >= 1 */
    int d_model;                         /* stream width, >= 1 */
    int n_sublayers;                     /* sublayers per block, 1..RESDIAG_MAX_SUBLAYERS */
    const char *const *sublayer_names;   /* (n_sublayers) e.g. {"attn", "mlp"}; unique, non-empty */
    resdiag_block_kind block;            /* default SEQUENTIAL */
    resdiag_placement declared_placement;/* what the trainer believes; default UNDECLARED */
    int declared_mix_layers;             /* with PLACEMENT_MIXED: post-norm layers 0..K-1 */
    resdiag_norm_kind norm_kind;         /* default UNDECLARED */
    int shard_cols;                      /* 0, or a second width accepted for stream sites
                                            (a tensor-parallel shard of d_model) */
    int n_layer_params;                  /* named per-layer parameters whose gradients are recorded */
    const char *const *layer_param_names;/* (n_layer_params) e.g. {"attn.wo", "mlp.w2"} */
    int n_model_params;                  /* named model-level parameters */
    const char *const *model_param_names;/* (n_model_params) e.g. {"head.w"} */
    int n_meta;                          /* free key/value metadata, stored as root attributes */
    const char *const *meta;             /* (2*n_meta) key, value, key, value, ... */
    const char *description;             /* free text, may be NULL */
    resdiag_run_kind run_kind;           /* default RESDIAG_RUN_TRAINING */
    /* Roles: which of the named parameters the analysis reads, so that any
     * trainer's names work. NULL (the default) declares none. */
    const char *head_param;              /* one of model_param_names: the output head
                                            (its gradient is the head gradient) */
    const char *residual_param;          /* one of layer_param_names: the matrix that writes a
                                            sublayer's output into the stream (W2, Wo) */
    /* The trainer's own per-step numbers (its loss, its learning rate),
     * given with resdiag_step_metric and stored beside the statistics:
     * 0..RESDIAG_MAX_METRICS names, checked like the parameter names. */
    int n_metrics;                       /* default 0: none */
    const char *const *metric_names;     /* (n_metrics) e.g. {"loss", "lr"} */
    /* Jobs of several processes (doc/RANKS.md). Each rank opens the run with
     * the same path and the same model (n_layers the whole model's); the
     * file it writes is named after its rank: rank 0 writes path itself,
     * rank r > 0 writes the name resdiag_rank_path gives. */
    int rank;                            /* RESDIAG_RANK_DETECT (default): from the
                                            environment (torchrun RANK, Open MPI
                                            OMPI_COMM_WORLD_RANK, PMI_RANK, Slurm
                                            SLURM_PROCID, in that order; none: 0);
                                            else 0..world_size-1 */
    int world_size;                      /* 0 (default): with the rank, from the same
                                            launcher (none: 1); else >= 1 */
    resdiag_split split;                 /* default NONE, which means DATA when
                                            world_size > 1 */
    int shard_col_offset;                /* SPLIT_TENSOR: first column of this rank's
                                            shard (of width shard_cols) in d_model */
    int layer_first;                     /* SPLIT_PIPELINE: the layers this rank holds, */
    int layer_count;                     /*   layer_first .. +layer_count-1; 0 = all */
} resdiag_model;

/* Zeroes *model and sets struct_size and the defaults. model may not be NULL. */
RESDIAG_API void resdiag_model_init(resdiag_model *model);

struct resdiag_alarm; /* an alarm (resdiag_options.alarm_fn): the advanced tier */

typedef struct resdiag_options {
    size_t struct_size;     /* sizeof(resdiag_options): set by resdiag_options_init */
    /* Which steps are recorded. A step number s (given to step_begin) is
     * recorded iff record_first <= s <= record_last and
     * (s - record_first) % record_every == 0; with record_init_only, only the
     * first step ever begun is recorded. */
    int64_t record_every;   /* default 1 */
    int64_t record_first;   /* default 0 */
    int64_t record_last;    /* default INT64_MAX */
    int record_init_only;   /* default 0 */
    int sketch_size;        /* K: linear projections per tensor, 0..RESDIAG_MAX_SKETCH; default 16 */
    uint64_t sketch_seed;   /* default 0x5eed */
    /* Recorded steps are buffered and appended to the file (and flushed) when
     * flush_steps of them are waiting, or at step_end when flush_seconds have
     * passed since the last flush (0 = no time limit). The first recorded step
     * is always flushed at once. A killed trainer keeps every flushed step:
     * it loses the steps that ended less than flush_seconds before its last
     * step_end (at most flush_steps - 1), plus the step in progress. The
     * clock is read only at step_end (no timer thread): from the kill, at
     * most flush_seconds plus the time since the last step_end is lost. */
    int flush_steps;        /* default 16 */
    double flush_seconds;   /* default 1 */
    resdiag_log_fn log_fn;  /* NULL: the process-wide handler */
    void *log_user_data;
    /* Threads a hook may use for one large tensor (1 MiB or more): 1 = the
     * caller's thread only; N >= 2 = resdiag_open starts a pool of N - 1
     * worker threads for the run (every signal blocked in them; joined by
     * resdiag_destroy; no thread is started per tensor), and a hook splits
     * the rows of a large tensor into P = min(N, rows) fixed parts (part k
     * starts at row k * rows / P) that it and the free workers compute at
     * once, merged in row order. Parts whose worker is busy with another
     * layer's tensor are computed by the hook itself rather than wait. The
     * parts and the order of combining depend on N only, so results are
     * deterministic, the same bits for the same N whoever computed which
     * part (and equal to one thread's within rounding). 0 = as many as the
     * process may run on (its CPU affinity at resdiag_open, at most
     * RESDIAG_MAX_HOOK_THREADS; logged at RESDIAG_LOG_INFO): the bits then
     * depend on that count. If a thread cannot start, open still succeeds,
     * logs a warning (RESDIAG_LOG_INFO) and the hooks compute the parts of
     * the missing workers themselves, with the same results. A child forked
     * from the trainer has no copy of the workers: its hooks compute alone,
     * with the same results. doc/USING.md. */
    int hook_threads;       /* 0..RESDIAG_MAX_HOOK_THREADS; default 1 */
    /* What resdiag_open may do with an existing file at the path: 0 refuses
     * it (RESDIAG_E_EXISTS); 1 replaces it only if it is a resdiag run file
     * that no one is writing. Anything else is never replaced. 0 or 1. */
    int overwrite;          /* default 0 */
    /* Several calls for one site (or parameter) in one step merge (see
     * resdiag_observe_at). 1 makes a second call a client bug instead:
     * RESDIAG_E_STATE, logged, and the step keeps the first call's values
     * (for trainers that mean to call each hook once per step). 0 or 1. */
    int one_call_per_site;  /* default 0 */
    /* Which ranks of a job record (doc/RANKS.md): rank r records when
     * r % record_rank_every == 0, so 1 is every rank and a value >=
     * world_size rank 0 only. A rank that does not record gets a handle
     * whose hooks are no-ops (resdiag_open returns OK and creates no
     * file), so every rank runs the same code. >= 1. */
    int record_rank_every;  /* default 1 */
    /* How the file stores what it records (doc/FORMAT.md, "Schema 2" and
     * "Schema 3"): 3 = schema 3: schema 2 with the block sites branch_in,
     * out_norm_in and out_norm_out; 2 = schema 2: each field at the
     * precision it needs (the statistics, spreads and sketches as float32,
     * counts, columns and call orders as integers), the first five block
     * sites only, for readers of resdiag 0.2 and 0.3; 1 = schema 1: every
     * value a float64 and no filters, five block sites, for readers of
     * resdiag 0.1.x. A run of schema 1 or 2 refuses hooks at the sites it
     * has no room for (RESDIAG_E_INVALID). 0 = the newest this library
     * writes (3). The reader reads all three. */
    int file_schema;        /* 0, 1, 2 or 3; default 0 */
    /* Schema 2 only: 0 stores the tables' chunks as they are; 1..9 passes
     * each chunk through HDF5's built-in shuffle and deflate filters at that
     * deflate level (no plugin: h5py, h5dump and any HDF5 read them). A
     * killed trainer keeps every flushed step at any level. The cost is CPU
     * time in the thread that flushes (doc/FORMAT.md). Ignored (no
     * filters) for schema 1. 0..9. */
    int compression;        /* default 1 */
    /* Alarms (doc/INSTRUMENTING.md, "Alarms"): conditions checked at
     * resdiag_step_end from what a recorded step holds (no work in the
     * hooks). Each kind fires once per run, at the first recorded step where
     * it holds: step_end then writes and flushes the step at once, calls
     * alarm_fn, and returns RESDIAG_ALARM (an error of the write comes
     * first). The library never stops the trainer. A bound of 0 or NaN is
     * off; a negative bound is refused at resdiag_open (RESDIAG_E_INVALID).
     * The details of an alarm: resdiag_alarm_get (advanced tier). */
    int alarm_nonfinite;       /* 1: a NaN or Inf in any recorded site or parameter
                                  gradient; 0 or 1, default 0 */
    double alarm_update_ratio; /* a sublayer's r = ||branch_out||_F / ||stream_in||_F
                                  (RESDIAG_UPDATE_RATIO_FROB) above this; default 0 */
    double alarm_growth;       /* the stream's growth above this: the mean per-token norm
                                  of the stream leaving the highest layer recorded in the
                                  step over that leaving the lowest (the report's
                                  ||x_L|| / ||x_1||); default 0 */
    double alarm_grad_norm;    /* a parameter gradient's Frobenius norm (resdiag_param_grad_at)
                                  above this; default 0 */
    /* Called once per alarm, in the thread of step_end, after the step is
     * in the file; NULL: none. The alarm is valid during the call. */
    void (*alarm_fn)(const struct resdiag_alarm *alarm, void *user);
    void *alarm_user_data;
} resdiag_options;

/* Fills *options with the defaults above. options may not be NULL. */
RESDIAG_API void resdiag_options_init(resdiag_options *options);

/* ------------------------------------------------------------------------ */
/* Runs                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct resdiag resdiag; /* opaque */

/* Creates a new run file at path and a handle that writes to it. model is
 * copied; options may be NULL for the defaults. What is at path decides
 * (doc/FORMAT.md, "Creating a run file"):
 *   - nothing: the file is created;
 *   - a resdiag run file: refused (RESDIAG_E_EXISTS) unless
 *     options->overwrite is 1, which replaces it;
 *   - anything else is refused (RESDIAG_E_EXISTS) even with overwrite and
 *     left as it was: another file (a checkpoint, another program's HDF5
 *     file), a symbolic link (to whatever, a run file too: give the
 *     target's path), a directory, a device, a FIFO, a socket. Only
 *     regular files are ever opened, and never through a symlink as the
 *     last component of path;
 *   - a run that a handle, in this process or another, is still writing:
 *     RESDIAG_E_LOCKED, in both modes. A handle keeps an advisory lock on
 *     its file (fcntl F_OFD_SETLK) until resdiag_close or resdiag_destroy;
 *     the lock dies with the process, so a killed trainer leaves none (a
 *     child forked without exec holds it until it exits). Readers are
 *     never blocked by it.
 * If creating fails once the file exists, a file that this call created
 * (and that is still at path) is removed; nothing else is: a run file being
 * replaced stays as far as it got. On success *out is the handle; on
 * failure *out is NULL (every hook then is a no-op, so a trainer may go on
 * without diagnostics) and the reason, naming path, is logged. The file is
 * readable by other processes (HDF5 SWMR) while it is written. Threads:
 * not concurrently with anything on the same path. */
RESDIAG_API resdiag_status resdiag_open(resdiag **out, const char *path,
                                        const resdiag_model *model,
                                        const resdiag_options *options);

/* Begins step `step`: the trainer's own number, >= 0 and strictly
 * increasing over the whole run, since it indexes the file. A loop whose
 * own counter restarts (a decoder's position, an evaluation batch per
 * epoch) numbers the steps with a counter that keeps increasing across
 * sequences or epochs, e.g. step = seq * T + pos, or step = epoch *
 * batches_per_epoch + batch (a step number that does not increase is
 * RESDIAG_E_INVALID). Whether it is recorded follows the options. A handle
 * that is NULL or disabled returns RESDIAG_OK and records nothing. */
RESDIAG_API resdiag_status resdiag_step_begin(resdiag *r, int64_t step);
/* Ends the step begun last; buffers its record and writes the buffer when
 * the flush rule says so. */
RESDIAG_API resdiag_status resdiag_step_end(resdiag *r);
/* Gives the value of the declared metric `name` (resdiag_model.metric_names)
 * for the step begun last: call it between resdiag_step_begin and
 * resdiag_step_end, e.g. with the loss of the forward pass. A recorded step
 * stores the value given last for each metric, and NaN for a metric not
 * given; any value is stored as given (a NaN or infinite loss is itself
 * worth keeping; a NaN given is kept apart from "not given", see
 * resdiag_metric_given). In a step that is not recorded, or outside a step, the
 * call records nothing and returns OK (as a hook does: outside a step one
 * DEBUG line the first time). A name that is NULL or not declared is a
 * client bug: RESDIAG_E_NULL / RESDIAG_E_INVALID, logged (rate-limited), in
 * every step. No I/O: the value goes into the step's record. Threads: from
 * the thread that begins and ends the step. NULL or disabled handle: OK. */
RESDIAG_API resdiag_status resdiag_step_metric(resdiag *r, const char *name, double value);
/* 1 if the current step is being recorded, else 0 (also for NULL), so a
 * trainer can skip work that only feeds hooks. */
RESDIAG_API int resdiag_step_is_recorded(const resdiag *r);

/* Observes a tensor at a site. Use the macros below, which pass the call
 * site. For block sites 0 <= layer < n_layers and 0 <= sublayer <
 * n_sublayers; for model sites layer and sublayer are ignored. cols must be
 * d_model (or shard_cols) at block sites and at EMBED_OUT / FINAL_NORM_*;
 * any width at LOGITS.
 * Calls for the same site in one step merge: a decoder that computes one
 * token per forward call, or a trainer that runs several micro-batches per
 * optimizer step, calls each hook once per token or micro-batch, and the
 * step records the statistics of all those rows as if they had come in one
 * tensor (counts and sums add, extremes merge, means and standard
 * deviations are those over all the tokens, the sketch is that of the
 * rows one after the other), and the number of calls (doc/FORMAT.md,
 * *_calls). The calls of a site must have the same width (else
 * RESDIAG_E_SHAPE, the call is not recorded). The update ratio pairs the
 * k-th STREAM_IN call of a sublayer with its k-th BRANCH_OUT call, which
 * must have the same rows and come before the next call of either (as a
 * forward pass makes them; else RATIO_TOK_MEAN is NaN for the step); its
 * fields are over all the paired rows. The
 * relations between sites (stream_out = stream_in + branch_out, ...) hold
 * for the merged statistics when every site is called once per
 * micro-batch or token, with the same rows in the same order. The call
 * site and CALL_SEQ kept are those of the step's first call.
 * options.one_call_per_site = 1 refuses a second call instead
 * (RESDIAG_E_STATE). A parameter gradient is a tensor like any other:
 * two calls merge as two tensors' elements, not as their sum, so call
 * resdiag_param_grad_at once per step with the accumulated gradient.
 * file must be a string that lives as long as the run (as
 * __FILE__ does); bytes of it that are not UTF-8, and control characters,
 * are recorded as '?' (a hook never fails over its call site). Returns OK without work for a NULL handle, a disabled run,
 * a step that is not recorded, or outside a step: a hook between
 * step_end and the next step_begin (a validation or sampling forward
 * between training steps) records nothing and logs nothing (one DEBUG line
 * the first time) and leaves the next step as it would have been. Every
 * client-bug message of a hook names file:line.
 * Threads: concurrent calls for different layers are safe. Two calls at once
 * for the same site, or for STREAM_IN and BRANCH_OUT of one sublayer (they
 * share the update ratio), are a client bug: the one that finds the other
 * running returns RESDIAG_E_BUSY without recording, and the site keeps the
 * other's complete result. */
RESDIAG_API resdiag_status resdiag_observe_at(resdiag *r, resdiag_direction dir,
                                              int layer, int sublayer,
                                              resdiag_site site, resdiag_tensor t,
                                              const char *file, int line);

/* Declares that, in this step, the tensor recorded at block site `site`
 * of (dir, layer, sublayer) is the very tensor recorded at `same_as` of the
 * same sublayer: one tensor that the recorder takes for both sites (a
 * binding with no hook where a sublayer begins takes the norm's input for
 * stream_in, so stream_in and norm_in are one tensor by construction). A
 * relation between the two then holds however the model is built, so the
 * analysis prints it as "by construction" and counts it toward no verdict
 * and no confidence. Do not declare what the model itself does: a norm
 * that reads the tensor its own hook and the stream's hook both see (x
 * passed to the norm, and observed as stream_in where the sublayer begins)
 * is evidence that the norm reads the stream. Recorded per step (call it
 * in every recorded step that records the pair; the order of this call and
 * the two observations does not matter), in /forward/site_alias or
 * /backward/site_alias (doc/FORMAT.md); a later call for the same site in
 * the step replaces the earlier one. Both sites must be block sites,
 * different, in range. A no-op where hooks are (NULL handle, disabled run,
 * step not recorded). Threads: as resdiag_observe_at for `site` (two calls
 * at once for one site: RESDIAG_E_BUSY). */
RESDIAG_API resdiag_status resdiag_observe_alias(resdiag *r, resdiag_direction dir, int layer,
                                                 int sublayer, resdiag_site site,
                                                 resdiag_site same_as);

/* Observes the gradient of a named parameter: a per-layer one (0 <= layer <
 * n_layers, name in layer_param_names) or, with layer = RESDIAG_MODEL_LEVEL,
 * a model-level one (name in model_param_names). Any shape. Several calls
 * for one parameter in a step merge as in resdiag_observe_at (the elements
 * of both, not their sum: give the accumulated gradient once per step).
 * Threads as resdiag_observe_at: the same parameter from two threads at
 * once gives RESDIAG_E_BUSY. */
#define RESDIAG_MODEL_LEVEL (-1)
RESDIAG_API resdiag_status resdiag_param_grad_at(resdiag *r, int layer, const char *name,
                                                 resdiag_tensor t,
                                                 const char *file, int line);

/* Hook macros: the trainer's file and line go into the run file. */
#define RESDIAG_FWD(r, layer, sublayer, site, t) \
    resdiag_observe_at((r), RESDIAG_FORWARD, (layer), (sublayer), (site), (t), __FILE__, __LINE__)
#define RESDIAG_BWD(r, layer, sublayer, site, t) \
    resdiag_observe_at((r), RESDIAG_BACKWARD, (layer), (sublayer), (site), (t), __FILE__, __LINE__)
#define RESDIAG_MODEL_FWD(r, site, t) RESDIAG_FWD((r), RESDIAG_MODEL_LEVEL, 0, (site), (t))
#define RESDIAG_MODEL_BWD(r, site, t) RESDIAG_BWD((r), RESDIAG_MODEL_LEVEL, 0, (site), (t))
#define RESDIAG_PARAM_GRAD(r, layer, name, t) \
    resdiag_param_grad_at((r), (layer), (name), (t), __FILE__, __LINE__)

/* Writes every buffered step to the file and flushes it to disk. */
RESDIAG_API resdiag_status resdiag_flush(resdiag *r);
/* Flushes and closes the file. The handle stays valid: later calls on it
 * return RESDIAG_E_STATE ("after close"). Returns the first error of the
 * final flush. Closing twice returns RESDIAG_E_STATE. */
RESDIAG_API resdiag_status resdiag_close(resdiag *r);
/* Closes the run if still open and frees the handle. NULL is a no-op. */
RESDIAG_API void resdiag_destroy(resdiag *r);

/* The last error message of this run ("" if none). Valid until the next
 * call on the handle. r may be NULL (returns ""). */
RESDIAG_API const char *resdiag_errmsg(const resdiag *r);

/* ------------------------------------------------------------------------ */
/* Reading run files                                                         */
/* ------------------------------------------------------------------------ */

typedef struct resdiag_reader resdiag_reader; /* opaque */

/* What the run file says about itself. All strings and arrays belong to
 * the reader and live until resdiag_reader_destroy. */
typedef struct resdiag_run_info {
    int schema_version;
    const char *resdiag_version;         /* of the writer */
    int n_layers, d_model, n_sublayers;
    const char *const *sublayer_names;   /* (n_sublayers) */
    resdiag_block_kind block;
    resdiag_placement declared_placement;
    int declared_mix_layers;
    resdiag_norm_kind norm_kind;
    int shard_cols;
    int n_layer_params;
    const char *const *layer_param_names;
    int n_model_params;
    const char *const *model_param_names;
    int sketch_size;
    uint64_t sketch_seed;
    int64_t n_steps;                     /* recorded steps in the file */
    int n_meta;
    const char *const *meta;             /* (2*n_meta) key, value, ... */
    const char *description;             /* "" if none */
    const char *created_utc;             /* provenance: ISO 8601 */
    const char *program;                 /* provenance: the writing program's path */
    const char *hdf5_version;            /* of the writer */
    /* Fields are only appended here (the struct belongs to the reader, so
     * a caller built against an older header reads the fields it knows). */
    resdiag_run_kind run_kind;           /* TRAINING for files without the attribute */
    /* The declared roles (resdiag_model), NULL when none. A file without the
     * role attributes (written before roles existed, or by a trainer that
     * declared none) gets the conventional names "head.w" and "mlp.w2" when
     * it has parameters of those names. */
    const char *head_param;
    const char *residual_param;
    /* The declared metrics (resdiag_model.metric_names); 0 and NULL for a
     * file written before metrics or by a trainer that declared none. */
    int n_metrics;
    const char *const *metric_names;
    /* The rank that wrote the file (resdiag_model's rank fields, as given
     * or detected): 0, 1, NONE for a file of one process or one written
     * before ranks existed. For a reader that merges a job's rank files
     * (resdiag_reader_open on rank 0's file), these are rank 0's, and
     * n_ranks_merged says how many files the view merges. */
    int rank;
    int world_size;
    int local_rank;                      /* -1 when unknown */
    resdiag_split split;
    int shard_col_offset;
    int layer_first, layer_count;        /* layer_count 0: every layer */
    int record_rank_every;               /* 1 for files without it */
    const char *rank_source;             /* "explicit", "torchrun", "openmpi", "pmi",
                                            "slurm", or "single" (none found) */
    const char *job_id;                  /* the launcher's job id (TORCHELASTIC_RUN_ID,
                                            OMPI_MCA_orte_ess_jobid, SLURM_JOB_ID), "" if none */
    int n_ranks_merged;                  /* 1 for a reader of one file */
} resdiag_run_info;

/* Opens a run file for reading, also one that a trainer is still writing
 * or one left by a killed trainer (every flushed step is there). On failure
 * *out is NULL and the reason is logged through the process-wide handler. */
RESDIAG_API resdiag_status resdiag_reader_open(resdiag_reader **out, const char *path);

/* Frees the reader and closes its file. NULL is a no-op. */
RESDIAG_API void resdiag_reader_destroy(resdiag_reader *rd);
/* Never NULL for an open reader. */
RESDIAG_API const resdiag_run_info *resdiag_reader_info(const resdiag_reader *rd);
/* Re-reads the number of steps (for a file still being written). */
RESDIAG_API resdiag_status resdiag_reader_refresh(resdiag_reader *rd);

/* The trainer's step numbers of the recorded steps: out (n_steps). */
RESDIAG_API resdiag_status resdiag_reader_steps(const resdiag_reader *rd, int64_t *out,
                                                int64_t n);
/* Statistics of one observed tensor at recorded step index `step_index`
 * (0 .. n_steps-1, not the trainer's step number). Block sites take layer
 * and sublayer; model sites ignore them. out (RESDIAG_N_FIELDS); all NaN
 * where the site was not observed in that step.
 * *observed (may be NULL) is set to 1 or 0. */
RESDIAG_API resdiag_status resdiag_reader_site(const resdiag_reader *rd, int64_t step_index,
                                               resdiag_direction dir, int layer,
                                               int sublayer, resdiag_site site,
                                               double *out, int *observed);
/* Statistics of a parameter gradient (layer or RESDIAG_MODEL_LEVEL).
 * out (RESDIAG_N_FIELDS). */
RESDIAG_API resdiag_status resdiag_reader_param(const resdiag_reader *rd, int64_t step_index,
                                                int layer, const char *name, double *out,
                                                int *observed);
/* The update ratios of (layer, sublayer): out (RESDIAG_N_UPDATE_FIELDS). */
RESDIAG_API resdiag_status resdiag_reader_update(const resdiag_reader *rd, int64_t step_index,
                                                 int layer, int sublayer, double *out);
/* Metric `metric` (an index into info->metric_names) at the recorded
 * steps first .. first+n-1 (step indices, as in resdiag_reader_steps):
 * out (n). NaN where the trainer gave no value, and everywhere for a file
 * that declares the metric but lacks metrics/values; a NaN the trainer gave
 * is NaN too: resdiag_metric_given tells them apart. RESDIAG_E_RANGE for a
 * metric outside 0..n_metrics-1 (every index, for a file without metrics),
 * RESDIAG_E_NOT_FOUND for steps past n_steps. */
RESDIAG_API resdiag_status resdiag_reader_metric(const resdiag_reader *rd, int metric,
                                                 int64_t first, int64_t n, double *out);
/* Names for printing. Static storage; "?" for values out of range. */
RESDIAG_API const char *resdiag_site_name(resdiag_site site);
RESDIAG_API const char *resdiag_field_name(resdiag_field field);
RESDIAG_API const char *resdiag_placement_name(resdiag_placement placement);
RESDIAG_API const char *resdiag_norm_kind_name(resdiag_norm_kind kind);
/* "training", "evaluation", "inference". */
RESDIAG_API const char *resdiag_run_kind_name(resdiag_run_kind kind);
RESDIAG_API const char *resdiag_dtype_name(resdiag_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Analysis: the verdict from data, depth laws, gradients, non-finite values */
/* ------------------------------------------------------------------------ */
/*
 * resdiag_analyze() reads a run through an open reader and decides, from
 * the recorded statistics and sketches only, where the norms sit (the
 * declared placement is compared afterwards, never used to decide). The
 * tool's `report` and `check` print what this computes, so every front end
 * gives the same verdict. See doc/REPORT-JSON.md for the JSON form.
 */

/* What the data say the model is. Values 1..7, 12 and 13 equal resdiag_placement's.
 * Pinned: never renumbered, only appended. */
typedef enum resdiag_verdict {
    RESDIAG_VERDICT_CANNOT_TELL = 0,  /* the evidence does not decide */
    RESDIAG_VERDICT_PRE = 1,
    RESDIAG_VERDICT_POST = 2,
    RESDIAG_VERDICT_SANDWICH = 3,
    RESDIAG_VERDICT_DEEPNORM = 4,
    RESDIAG_VERDICT_MIXED = 5,        /* layers differ: see resdiag_analysis_mix_layers */
    RESDIAG_VERDICT_PARALLEL = 6,
    RESDIAG_VERDICT_NONE = 7,
    RESDIAG_VERDICT_INCONSISTENT = 8, /* relations contradict every placement */
    RESDIAG_VERDICT_POST_FAMILY = 9,  /* stream only: every layer renormalized (post or deepnorm) */
    RESDIAG_VERDICT_NOT_RENORMALIZED = 10, /* stream only: no layer renormalized
                                              (pre, sandwich, parallel or none) */
    RESDIAG_VERDICT_PRE_OR_SANDWICH = 11,  /* the relations say pre-type and branch_out
                                              looks like a norm output, but no norm on
                                              the branch's output was observed
                                              (out_norm_in/out_norm_out would decide) */
    RESDIAG_VERDICT_REORDERED = 12,   /* x + Norm(F(x)) */
    RESDIAG_VERDICT_PER_SUBLAYER = 13,/* sublayers differ, the same way in every layer:
                                         see resdiag_analysis_sublayer */
    RESDIAG_VERDICT_ZERO_BRANCHES = 14 /* every branch adds exactly 0 at the step
                                          (zero-initialised: ReZero, SkipInit); the
                                          placement shows once they move */
} resdiag_verdict;

typedef enum resdiag_confidence {
    RESDIAG_CONFIDENCE_NONE = 0,   /* with CANNOT_TELL */
    RESDIAG_CONFIDENCE_LOW = 1,
    RESDIAG_CONFIDENCE_MEDIUM = 2,
    RESDIAG_CONFIDENCE_HIGH = 3
} resdiag_confidence;

/* Step selection for resdiag_analyze_options.step_index. */
#define RESDIAG_STEP_FIRST (-1)  /* the first recorded step (initialization) */
#define RESDIAG_STEP_LAST (-2)   /* the last recorded step */

typedef struct resdiag_analyze_options {
    size_t struct_size;   /* sizeof(resdiag_analyze_options): set by _init */
    int64_t step_index;   /* recorded step index 0..n_steps-1, or RESDIAG_STEP_FIRST
                             (default) or RESDIAG_STEP_LAST */
    double max_growth;    /* warn when the stream norm grows more than this
                             (last/first) over depth; default 10 */
    int no_consequences;  /* 1: no "Consequences" section (the sources' findings that
                             the measured run meets: doc/REPORT.md); default 0 */
} resdiag_analyze_options;

/* Fills *options with the defaults. options may not be NULL. */
RESDIAG_API void resdiag_analyze_options_init(resdiag_analyze_options *options);

typedef struct resdiag_analysis resdiag_analysis; /* opaque */

/* Analyses the run behind rd at the selected step. options may be NULL for
 * the defaults. On success *out is a new analysis (free it with
 * resdiag_analysis_destroy; it does not refer to rd afterwards). Fails with
 * RESDIAG_E_NOT_FOUND for a run with no recorded steps or a step index out
 * of range, RESDIAG_E_NULL / E_INVALID for bad arguments, E_IO / E_FORMAT
 * when the file cannot be read; *out is then NULL and the reason is logged.
 * Threads: the reader must not be used concurrently. */
RESDIAG_API resdiag_status resdiag_analyze(const resdiag_reader *rd,
                                           const resdiag_analyze_options *options,
                                           resdiag_analysis **out);
/* Frees the analysis. NULL is a no-op. */
RESDIAG_API void resdiag_analysis_destroy(resdiag_analysis *a);
/* The whole-model verdict and its confidence. */
RESDIAG_API resdiag_verdict resdiag_analysis_verdict(const resdiag_analysis *a);
RESDIAG_API resdiag_confidence resdiag_analysis_confidence(const resdiag_analysis *a);
/* Verdict of one sublayer (never MIXED, PER_SUBLAYER, POST_FAMILY or NOT_RENORMALIZED;
 * CANNOT_TELL for stream-only runs) and, with DEEPNORM, its alpha
 * (alpha may be NULL). RESDIAG_VERDICT_CANNOT_TELL for out-of-range indices. */
RESDIAG_API resdiag_verdict resdiag_analysis_sublayer(const resdiag_analysis *a, int layer,
                                                      int sublayer, double *alpha);
/* The trainer's step number that was analysed. */
RESDIAG_API int64_t resdiag_analysis_step(const resdiag_analysis *a);
/* The first non-finite value, scanning all recorded steps in order and
 * each step in hook-call order: returns 1 and fills the non-NULL pointers
 * (layer = RESDIAG_MODEL_LEVEL for model sites and model parameters; site
 * = -1 for a parameter gradient), or 0 if every value was finite. */
RESDIAG_API int resdiag_analysis_first_nonfinite(const resdiag_analysis *a, int64_t *step,
                                                 int *layer, int *sublayer, int *site,
                                                 resdiag_direction *dir);

/* Printable names. Static storage; "?" for values out of range. */
RESDIAG_API const char *resdiag_verdict_name(resdiag_verdict v);
RESDIAG_API const char *resdiag_confidence_name(resdiag_confidence c);

/* resdiag_check_options.expect: the placement the run file declares
 * (resdiag_model.declared_placement, with declared_mix_layers for MIXED).
 * A run that declares nothing gives RESDIAG_CHECK_CANNOT_TELL. */
#define RESDIAG_EXPECT_DECLARED ((resdiag_placement)100)

/* What `resdiag check` tests. */
typedef struct resdiag_check_options {
    size_t struct_size;          /* sizeof(resdiag_check_options): set by _init */
    resdiag_placement expect;    /* PRE .. NONE, or RESDIAG_EXPECT_DECLARED;
                                    UNDECLARED is invalid */
    int require_final_norm;      /* 1: a final norm must be observed; default 0 */
    double max_growth;           /* > 0: stream growth (last/first) must not exceed it;
                                    default 0 = not checked */
} resdiag_check_options;

/* Fills *options with the defaults (expect = UNDECLARED). Not NULL. */
RESDIAG_API void resdiag_check_options_init(resdiag_check_options *options);

/* Pinned: these are the tool's exit codes. */
typedef enum resdiag_check_result {
    RESDIAG_CHECK_HOLDS = 0,
    RESDIAG_CHECK_FAILS = 1,
    RESDIAG_CHECK_CANNOT_TELL = 2
} resdiag_check_result;

/* Holds the analysis against an expectation. why (why_len bytes, may be
 * NULL when why_len is 0) receives one line without a newline saying why.
 * NULL a or options, or an invalid expect, give CANNOT_TELL. With
 * RESDIAG_EXPECT_DECLARED it FAILS exactly when the report says the data
 * contradict the declared placement (for MIXED also when the post-norm
 * layers differ from declared_mix_layers): the CI gate for a declaration. */
RESDIAG_API resdiag_check_result resdiag_analysis_check(const resdiag_analysis *a,
                                                        const resdiag_check_options *options,
                                                        char *why, size_t why_len);

/* The report as text for people, or as JSON with the keys documented in
 * doc/REPORT-JSON.md. A new NUL-terminated string owned by the caller:
 * free it with resdiag_free. NULL if a is NULL or memory runs out. */
RESDIAG_API char *resdiag_analysis_to_text(const resdiag_analysis *a);
RESDIAG_API char *resdiag_analysis_to_json(const resdiag_analysis *a);
/* ----------------------------------------------- pictures and pages */

/* What the HTML page of one run shows besides the analysis. */
typedef struct resdiag_html_options {
    size_t struct_size;           /* sizeof(resdiag_html_options): set by _init */
    const char *run_name;         /* the run in the title and under the heading,
                                     usually its path (any bytes: escaped);
                                     default NULL: "run" */
    const resdiag_reader *reader; /* the open reader of the analysed run: a run
                                     with several steps then gets the layer x step
                                     heat maps, read from it; default NULL: none */
} resdiag_html_options;

/* Fills *options with the defaults. Not NULL. */
RESDIAG_API void resdiag_html_options_init(resdiag_html_options *options);

/* The report as one self-contained HTML page (`resdiag report --html`):
 * the verdict card, the figures of resdiag_analysis_figure_svg inline,
 * the heat maps with options->reader; inline SVG and CSS, no script, no
 * network; also well-formed XML. options may be NULL (the defaults).
 * A new string to free with resdiag_free; NULL (logged) when a is NULL,
 * options was not set up by its _init call, the heat maps cannot be read
 * or memory runs out. */
RESDIAG_API char *resdiag_analysis_to_html(const resdiag_analysis *a,
                                           const resdiag_html_options *options);
/* The figures of `resdiag plot --what`, each drawn from the analysis. */
typedef enum resdiag_figure {
    RESDIAG_FIGURE_GROWTH = 0, /* the stream norm ||x_k|| over depth k, with the fit
                                  ||x_k||^2 = a + b k and the sqrt(d) level */
    RESDIAG_FIGURE_UPDATES,    /* the relative updates r_k per sublayer, log-log,
                                  with the fitted power laws and 1/sqrt(k) */
    RESDIAG_FIGURE_GRADIENTS,  /* the gradient norms per layer at the first recorded
                                  backward: the first parameter, the stream, the
                                  head, with the pre-norm shape 1/||x_k|| */
    RESDIAG_FIGURE_LOSS,       /* the trainer's loss over the recorded steps (the
                                  metric "loss", else the first metric declared) */
    RESDIAG_N_FIGURES
} resdiag_figure;

/* "growth", "updates", "gradients", "loss" (the names `resdiag plot --what`
 * takes); "?" for values out of range. Static storage. */
RESDIAG_API const char *resdiag_figure_name(resdiag_figure figure);

/* One figure as a standalone SVG document into *svg (a new string to free
 * with resdiag_free; NULL on any error). RESDIAG_OK; RESDIAG_E_NOT_FOUND
 * when the run holds no data for the figure (e.g. no gradients recorded;
 * not logged: the caller says it its own way); RESDIAG_E_NULL,
 * RESDIAG_E_INVALID (figure out of range) or RESDIAG_E_NOMEM, logged. */
RESDIAG_API resdiag_status resdiag_analysis_figure_svg(const resdiag_analysis *a,
                                                       resdiag_figure figure, char **svg);

/* bytes as one printable line, the way every output of the library shows
 * a string from a run file: valid UTF-8 without control characters (each
 * such byte as an escape), so that a file or a file name cannot write
 * lines or terminal controls of its own. A new string to free with
 * resdiag_free; NULL when bytes is NULL or memory runs out. */
RESDIAG_API char *resdiag_escape_text(const char *bytes);

/* Frees memory the library returned (the strings above). NULL is a no-op. */
RESDIAG_API void resdiag_free(void *p);

/* ======================================================================== */
/* THE ADVANCED TIER (43 functions): free to change before 1.0.             */
/* Declared with #define RESDIAG_ADVANCED_API before the #include.          */
/* ======================================================================== */

#if defined(RESDIAG_ADVANCED_API) || defined(RESDIAG_BUILDING_LIBRARY)

/* ------------------------------------------------------------------------ */
/* Advanced: runs                                                           */
/* ------------------------------------------------------------------------ */

/* The file that rank `rank` of a job writes for the path given to
 * resdiag_open (doc/RANKS.md): path itself for rank 0; for rank r > 0,
 * "<stem>.rank<r, 5 or more digits>.h5" when path ends in ".h5" (run.h5 ->
 * run.rank00003.h5), else path + ".rank<r>". Into out (out_len bytes,
 * NUL-terminated). RESDIAG_E_NULL, RESDIAG_E_INVALID (rank < 0),
 * RESDIAG_E_RANGE when out is too short. Not logged. */
RESDIAG_API resdiag_status resdiag_rank_path(char *out, size_t out_len, const char *path,
                                             int rank);

/* Ends the step begun last as ABORTED: the trainer could not complete it
 * (an exception inside the step, a lost data-parallel peer in backward).
 * It ends the step as resdiag_step_end does (the same flush rule, signal
 * handling and return values), and a recorded step keeps every record its
 * hooks made, flagged aborted in the file (doc/FORMAT.md, /step_status):
 * the analysis never takes such a step for a complete one (the first and
 * last step skip it; asked for by index it is shown, not judged). reason
 * may be NULL; it is stored as given up to RESDIAG_MAX_ABORT_REASON - 1
 * bytes (cut before a character that would not fit whole) and logged
 * (RESDIAG_LOG_INFO). Like the free text of resdiag_model (description)
 * it may hold newlines and tabs; a reason that is not valid UTF-8 or holds
 * another control character still ends the step, stored with '?' for each
 * bad byte, and returns RESDIAG_E_INVALID (a client bug, logged). Outside
 * a step (no step_begin, or after step_end) it is RESDIAG_E_STATE, logged,
 * as step_end's is; after close too. NULL or disabled handle: OK. Threads:
 * as resdiag_step_end. */
RESDIAG_API resdiag_status resdiag_step_abort(resdiag *r, const char *reason);
/* Pauses (enabled = 0) or resumes recording from the next step_begin on;
 * hooks in steps begun while paused are no-ops. Not concurrently with hooks. */
RESDIAG_API resdiag_status resdiag_set_enabled(resdiag *r, int enabled);

/* The trainer's step number of the last step that is in the file, i.e.
 * that survives the trainer being killed (written and flushed to the
 * operating system, not fsync'ed against a power cut): *step = -1 before
 * the first flush. Steps still buffered are not counted. Not concurrently
 * with step_end, flush or close on the same handle. */
RESDIAG_API resdiag_status resdiag_flushed_step(const resdiag *r, int64_t *step);

/* What fired (resdiag_options.alarm_*; doc/INSTRUMENTING.md, "Alarms"). */
typedef enum resdiag_alarm_kind {
    RESDIAG_ALARM_NONFINITE = 0,    /* the step's first NaN or Inf: the slot whose first
                                       call (RESDIAG_FIELD_CALL_SEQ) came first */
    RESDIAG_ALARM_UPDATE_RATIO = 1, /* the largest update ratio above the bound */
    RESDIAG_ALARM_GROWTH = 2,       /* the stream's growth above the bound */
    RESDIAG_ALARM_GRAD_NORM = 3,    /* the largest parameter gradient norm above the bound */
    RESDIAG_N_ALARM_KINDS = 4
} resdiag_alarm_kind;

typedef struct resdiag_alarm {
    resdiag_alarm_kind kind;
    int64_t step;        /* the trainer's step number */
    int rank;            /* the rank of the process (0 for one process) */
    resdiag_direction direction; /* a parameter gradient: RESDIAG_BACKWARD */
    int layer;           /* RESDIAG_MODEL_LEVEL (-1) for a model site or parameter */
    int sublayer;        /* -1 for a model site or a parameter */
    int site;            /* a resdiag_site; -1 for a parameter gradient. UPDATE_RATIO:
                            RESDIAG_BRANCH_OUT; GROWTH: the highest layer's STREAM_OUT */
    const char *param;   /* a parameter gradient's name (valid until resdiag_destroy),
                            else NULL */
    int ref_layer;       /* GROWTH: the lowest layer, the denominator's; else -1 */
    double value;        /* NONFINITE: the NaN and Inf elements of the tensor; else the
                            ratio, growth or norm */
    double bound;        /* the option's bound (NONFINITE: 0) */
} resdiag_alarm;

/* Alarms fired so far in the run, in the order they fired (at most
 * RESDIAG_N_ALARM_KINDS); 0 for NULL. resdiag_alarm_get copies the i-th
 * (0 = the first) into *out: RESDIAG_E_NULL, RESDIAG_E_RANGE when i is not
 * below the count (not logged). Not concurrently with step_end. */
RESDIAG_API int resdiag_alarm_count(const resdiag *r);
RESDIAG_API resdiag_status resdiag_alarm_get(const resdiag *r, int i, resdiag_alarm *out);

/* ------------------------------------------------------------------------ */
/* Advanced: one tensor recorded at several sites                           */
/* ------------------------------------------------------------------------ */

/* One tensor, several sites: records at site `site` of (dir, layer,
 * sublayer) the statistics of the most recent call at site `from_site` of
 * (dir, from_layer, from_sublayer) in this step, reading no tensor (model
 * sites ignore layer and sublayer, as in resdiag_observe_at). For a
 * trainer whose tensor at the two sites is one buffer, unchanged between
 * the two hooks: in a residual stack the STREAM_IN of a sublayer is the
 * STREAM_OUT of the sublayer before it (EMBED_OUT for the first); in
 * post-norm NORM_OUT is STREAM_OUT. The library cannot check this (comparing
 * pointers would miss an in-place update), so it is the trainer's word:
 * within one sublayer the pair is also recorded as an alias
 * (resdiag_observe_alias), and the relation between the two sites then
 * counts toward no verdict. doc/USING.md lists the sites each part of the
 * report needs observed by reading. The copy is one call of `site` (calls
 * merge as resdiag_observe_at's do; its call site is file:line) and keeps
 * the update ratio's pairing (a copy into STREAM_IN or BRANCH_OUT pairs by
 * the source's per-token norms). The source must have been observed in
 * this step (else RESDIAG_E_STATE, nothing recorded) and have the width
 * `site` takes (else RESDIAG_E_SHAPE); a site cannot be its own source
 * (RESDIAG_E_INVALID). With a sketch, `site` must have seen in this step
 * the rows its source had seen before that call (as when both are called
 * once per micro-batch; else RESDIAG_E_STATE: the sketch's row signs
 * differ). Refused as RESDIAG_E_INVALID, since the file could not mark them
 * as copies: FINAL_NORM_OUT forward at either end, two of a parallel
 * block's terms (STREAM_IN, BRANCH_OUT, the last STREAM_OUT) of different
 * sublayers from one tensor, and LOGITS with another site on a
 * tensor-parallel rank whose shard is not the first. A no-op where hooks
 * are (NULL handle, disabled run, step not recorded). Threads: as
 * resdiag_observe_at for `site`; the source
 * may not be observed at the same time (RESDIAG_E_BUSY). */
RESDIAG_API resdiag_status resdiag_observe_same_as(resdiag *r, resdiag_direction dir, int layer,
                                                   int sublayer, resdiag_site site,
                                                   int from_layer, int from_sublayer,
                                                   resdiag_site from_site, const char *file,
                                                   int line);

/* The same for parameter gradients: records for (layer, name) the most
 * recent call for (from_layer, from_name) in this step, reading no tensor
 * (tied embeddings: the head's weight and the token embedding are one
 * gradient buffer). layer and from_layer as for resdiag_param_grad_at
 * (RESDIAG_MODEL_LEVEL for model-level names). Errors and threads as
 * resdiag_observe_same_as. */
RESDIAG_API resdiag_status resdiag_param_grad_same_as(resdiag *r, int layer, const char *name,
                                                      int from_layer, const char *from_name,
                                                      const char *file, int line);

/* ------------------------------------------------------------------------ */
/* Advanced: a hook computed by a team of the trainer's threads             */
/* ------------------------------------------------------------------------ */

/* Advanced, not core, because it did not pay where it was meant to: in an
 * OpenMP trainer shaped like llm.c's, team calls made the hooks slower than
 * serial ones (doc/ARCHITECTURE.md, "API tiers"). options.hook_threads is
 * the way to spread one large hook over cores.
 *
 * One observation computed by a team of threads: each of the n_parts
 * threads of the trainer's parallel region calls it with the same
 * arguments and its own part, 0 <= part < n_parts <= RESDIAG_MAX_TEAM:
 *
 *     #pragma omp parallel
 *     resdiag_observe_team_at(r, RESDIAG_FORWARD, l, s, RESDIAG_STREAM_OUT, t,
 *                             omp_get_thread_num(), omp_get_num_threads(),
 *                             __FILE__, __LINE__);
 *
 * Why: a hook called between the trainer's parallel regions runs on one
 * core while the others wait; the threads of a region are already running
 * (no wake-up), so each reads rows [part * rows / n_parts, (part + 1) *
 * rows / n_parts) and the hook's wall time shrinks with its CPU time. The
 * call that completes the team merges the parts in row order and records
 * one call of the site, as resdiag_observe_at would: the same bits as
 * hook_threads = n_parts. No call waits for another. A tensor under 1 MiB
 * (or of one row) is read whole by the call that completes the team (the
 * others return at once). The calls of one team must all return before the
 * next team call for the same site (the end of a parallel region ensures
 * it). At any size, a part given twice, n_parts or a tensor (data, dtype,
 * shape, row stride) that differs from the team's, or a part out of range
 * is a client bug (RESDIAG_E_INVALID or RESDIAG_E_RANGE, logged; that call
 * records nothing). A team still incomplete at resdiag_step_end records
 * nothing for its site: step_end logs it (a warning, RESDIAG_LOG_INFO),
 * writes the step and returns RESDIAG_E_STATE. n_parts = 1 is
 * resdiag_observe_at (refused while a team of the site is open). A no-op
 * where hooks are. */
#define RESDIAG_MAX_TEAM 256
RESDIAG_API resdiag_status resdiag_observe_team_at(resdiag *r, resdiag_direction dir, int layer,
                                                   int sublayer, resdiag_site site,
                                                   resdiag_tensor t, int part, int n_parts,
                                                   const char *file, int line);

/* resdiag_param_grad_at by a team of threads, as resdiag_observe_team_at. */
RESDIAG_API resdiag_status resdiag_param_grad_team_at(resdiag *r, int layer, const char *name,
                                                      resdiag_tensor t, int part, int n_parts,
                                                      const char *file, int line);

/* ------------------------------------------------------------------------ */
/* Statistics computed elsewhere (a GPU, another process)                    */
/* ------------------------------------------------------------------------ */
/*
 * The partial statistics of a tensor: the mergeable quantities from which
 * the library derives every recorded field (doc/PARTIAL.md derives each).
 * Code that holds the tensor where the library cannot read it (on a GPU)
 * computes them there and submits only this struct. The library's own
 * kernels compute the same struct (resdiag_partial_compute), which is the
 * reference. Every member is a double, so an array of them is a plain
 * (n, RESDIAG_PARTIAL_DOUBLES) array of doubles; counts are exact integers
 * in doubles. The layout is pinned: members are never reordered, and a new
 * layout gets a new struct name.
 *
 * Over the tensor's finite values (NaN and Inf left out, counted apart),
 * for its rows i = 0..rows-1 (tokens), with n_i = the L2 norm of row i,
 * m_i = its sum / cols, q_i = n_i / sqrt(cols) (its RMS), s_i = its
 * standard deviation about m_i (divided by cols):
 */
typedef struct resdiag_partial {
    double rows, cols;        /* the shape (rows >= 0, cols >= 1) */
    double sumsq;             /* sum of the squares of every finite value */
    double norm_mean, norm_m2;/* mean of the n_i, and sum_i (n_i - norm_mean)^2 */
    double norm_min, norm_max;/* extremes of the n_i (NaN when rows == 0) */
    double mean_mean, mean_m2;/* the same two for the m_i */
    double rms_mean, rms_m2;  /*   ... for the q_i */
    double std_mean, std_m2;  /*   ... for the s_i */
    double absmax;            /* the largest |value|, -1 when none is finite */
    double absmax_col;        /* its column in the tensor (the first on ties, the
                                 first row on ties across rows; a tensor-parallel
                                 shard's column within the shard: the library
                                 records it at its place in d_model), NaN when none */
    double nan_count, inf_count;
    /* The per-token update ratio, at BRANCH_OUT only: sum over the rows i
     * with ||x_i|| > 0 of n_i / ||x_i||, where x is the STREAM_IN tensor of
     * the same sublayer and call (the same rows), and how many rows those
     * are; ratio_rows = -1 when not computed (then the step's per-token
     * mean ratio is NaN, as for unpaired calls). Elsewhere -1. */
    double ratio_sum, ratio_rows;
    /* sketch[m] = sum_i sigma(row0 + i) * sum_{j: bucket(j) = m} tau(j) x[i][j]
     * over the finite values, with the run's row signs sigma, column
     * buckets and column signs tau (resdiag_sketch_layout); row0 = the
     * rows submitted before for this site in this step. Members past the
     * run's sketch_size are ignored. */
    double sketch[RESDIAG_MAX_SKETCH];
} resdiag_partial;

#define RESDIAG_PARTIAL_DOUBLES ((int)(sizeof(resdiag_partial) / sizeof(double)))

/* Submits the partial statistics of the tensor at a site, exactly as
 * resdiag_observe_at would have recorded that tensor (the same merging of
 * several calls, CALL_SEQ, call site and update ratio). p->cols is checked
 * as the tensor's width is; a partial whose members are inconsistent
 * (negative counts or spreads, min > max, an absmax_col outside the
 * columns, ...) is RESDIAG_E_INVALID, logged, not recorded. Threads and
 * no-op cases as resdiag_observe_at. */
RESDIAG_API resdiag_status resdiag_observe_partial(resdiag *r, resdiag_direction dir, int layer,
                                                   int sublayer, resdiag_site site,
                                                   const resdiag_partial *p, const char *file,
                                                   int line);
/* The same for a parameter gradient (as resdiag_param_grad_at). */
RESDIAG_API resdiag_status resdiag_param_grad_partial(resdiag *r, int layer, const char *name,
                                                      const resdiag_partial *p,
                                                      const char *file, int line);

/* One submission of a batch: what resdiag_observe_partial or (with
 * site = -1) resdiag_param_grad_partial would take. */
typedef struct resdiag_partial_site {
    int dir;              /* resdiag_direction */
    int layer, sublayer;  /* layer: RESDIAG_MODEL_LEVEL for model sites and parameters */
    int site;             /* resdiag_site, or -1 for the gradient of parameter `param` */
    int param;            /* index into layer_param_names (layer >= 0) or
                             model_param_names (MODEL_LEVEL); -1 otherwise */
    int line;             /* the call site's line */
    const char *file;     /* the call site's file, as resdiag_observe_at's (it lives
                             as long as the run); NULL: the batch's file */
} resdiag_partial_site;

/* Submits n partials at once (bindings: one call per step instead of one
 * per site), in array order, as n single submissions would: sites (n) and
 * p (n). The first failure is returned and the rest are still submitted;
 * each failure is logged as a single call's would be. file as in
 * resdiag_observe_at, for the entries whose own file is NULL. */
RESDIAG_API resdiag_status resdiag_submit_partials(resdiag *r, int n,
                                                   const resdiag_partial_site *sites,
                                                   const resdiag_partial *p,
                                                   const char *file);

/* One entry of resdiag_submit_partial_refs: a site or parameter gradient
 * (as in resdiag_submit_partials), its partial statistics by pointer
 * (entries may share one: a tensor seen unchanged at several sites), and
 * the tensor's per-token norms or NULL. */
typedef struct resdiag_partial_ref {
    resdiag_partial_site site;
    const resdiag_partial *p;
    const double *row_norms; /* p->rows values, the n_i (resdiag_partial_compute's
                                row_norms), or NULL */
} resdiag_partial_ref;

/* Submits n entries at once, in array order, as n single submissions
 * would (resdiag_submit_partials), for a binding that reads each tensor
 * once and submits a step's sites in one call. An entry with row_norms at
 * a forward STREAM_IN or BRANCH_OUT pairs the per-token update ratio from
 * them, as the norms of a tensor the library reads do (it pairs with such a
 * tensor's call too; a BRANCH_OUT's ratio_sum and ratio_rows are then not
 * used); elsewhere row_norms is not read; without them an entry is exactly
 * a resdiag_submit_partials entry. An entry with p NULL is RESDIAG_E_NULL.
 * The first failure is returned, the rest are still submitted, each
 * failure is logged as a single call's would be, and *failed (unless NULL)
 * receives how many entries failed. file as in resdiag_submit_partials.
 * Threads and no-op cases as resdiag_observe_at. */
RESDIAG_API resdiag_status resdiag_submit_partial_refs(resdiag *r, int n,
                                                       const resdiag_partial_ref *refs,
                                                       const char *file, int *failed);

/* The reference: the partial statistics of t computed by the library's
 * kernels, with run r's sketch layout and row signs from row0 on
 * (ratio_sum = 0, ratio_rows = -1). row_norms (t.rows) or NULL receives
 * each n_i. RESDIAG_E_NULL, RESDIAG_E_SHAPE / E_DTYPE / E_INVALID for a bad
 * tensor or row0 < 0. Works on a closed or disabled run too. */
RESDIAG_API resdiag_status resdiag_partial_compute(const resdiag *r, resdiag_tensor t,
                                                   int64_t row0, resdiag_partial *out,
                                                   double *row_norms);

/* What device code needs to reproduce run r's sketch bit for bit:
 * bucket (n_cols) and col_sign (n_cols) of the columns col0 .. col0+n_cols-1
 * (tau(j) as +1.0f or -1.0f), and row_sign (n_rows) of the rows row0 ..
 * row0+n_rows-1 (sigma). Any of the arrays may be NULL (with its count
 * 0). K = resdiag's sketch_size; with K = 0 the buckets are all 0. */
RESDIAG_API resdiag_status resdiag_sketch_layout(const resdiag *r, int64_t col0, int64_t n_cols,
                                                 int32_t *bucket, float *col_sign, int64_t row0,
                                                 int64_t n_rows, float *row_sign);
/* The run's sketch size K (0..RESDIAG_MAX_SKETCH); 0 for NULL. */
RESDIAG_API int resdiag_sketch_size(const resdiag *r);

/* ------------------------------------------------------------------------ */
/* SIGINT and SIGTERM                                                        */
/* ------------------------------------------------------------------------ */
/*
 * resdiag_install_signal_handlers(r, flags) catches SIGINT and SIGTERM for
 * run r (signals that are ignored when it is called stay ignored). The
 * handler only notes the signal and puts the previous disposition back, so
 * a second signal acts as it would have without resdiag. At the next
 * resdiag_step_begin or resdiag_step_end (never in a hook: hooks may run in
 * several threads) the run writes every buffered step - with step_end, the
 * step it ends too - closes the file cleanly (it then opens with any HDF5
 * tool) and then:
 *   RESDIAG_SIGNALS_RERAISE (0): restores the previous dispositions and
 *     raises the signal again, so the trainer ends as it would have ended
 *     (by default: killed by that signal) with the file complete;
 *   RESDIAG_SIGNALS_RETURN: returns RESDIAG_E_INTERRUPTED from that call;
 *     every later hook and step call returns it too, without work, and
 *     resdiag_close returns RESDIAG_OK. The trainer stops by itself
 *     (resdiag_signal_pending tells it before, if it polls).
 * One run per process may hold the handlers (else RESDIAG_E_STATE);
 * resdiag_destroy gives them back. Call it from the thread that opened the
 * run, not concurrently with anything else on the handle. Signals that
 * arrive while the trainer is blocked outside any step act only when it
 * calls step_begin/step_end again. */
#define RESDIAG_SIGNALS_RERAISE 0
#define RESDIAG_SIGNALS_RETURN 1
RESDIAG_API resdiag_status resdiag_install_signal_handlers(resdiag *r, int flags);
/* The signal number caught and not yet acted on, or 0. Async-signal-safe. */
RESDIAG_API int resdiag_signal_pending(void);

/* ------------------------------------------------------------------------ */
/* Advanced: reading the ranks of a job                                     */
/* ------------------------------------------------------------------------ */

/* Jobs of several ranks (doc/RANKS.md). resdiag_reader_open on the file of
 * rank 0 of a job with world_size > 1 finds the files of the other ranks
 * (the names resdiag_rank_path gives, beside it; nothing else is opened)
 * and reads them as one run: every read below returns the merged
 * statistics (data and sequence splits: the ranks' tokens together;
 * tensor splits: the shards' columns together where that is exact;
 * pipeline stages: each layer from the rank holding it), over the steps
 * any rank recorded. A file of another run (other model, world size or
 * job id), or one that cannot be read, is left out and reported.
 * resdiag_reader_open_rank opens the one file of rank `rank` (0 too),
 * merging nothing; RESDIAG_E_NOT_FOUND when that rank has no file. */
#define RESDIAG_RANK_ALL (-1)
RESDIAG_API resdiag_status resdiag_reader_open_rank(resdiag_reader **out, const char *path,
                                                    int rank);

typedef enum resdiag_rank_state {
    RESDIAG_RANK_MERGED = 0,       /* its file is read and merged */
    RESDIAG_RANK_ENDED_EARLY = 1,  /* merged, but its last step is before the others'
                                      (a rank killed mid-run) */
    RESDIAG_RANK_MISSING = 2,      /* it should have recorded, and has no file */
    RESDIAG_RANK_NOT_RECORDED = 3, /* outside record_rank_every: no file expected */
    RESDIAG_RANK_REJECTED = 4      /* its file is of another run or cannot be read */
} resdiag_rank_state;

/* One rank of the job behind a reader. Strings belong to the reader. */
typedef struct resdiag_rank_info {
    size_t struct_size;     /* sizeof(resdiag_rank_info): set by the caller */
    int rank;
    resdiag_rank_state state;
    const char *path;       /* its file's path ("" when there is none) */
    int64_t n_steps;        /* recorded steps in its file (0 without one) */
    int64_t last_step;      /* the trainer's number of its last step, -1 if none */
    const char *why;        /* with REJECTED: the reason; else "" */
} resdiag_rank_info;

/* world_size of the job for a merged reader, 1 for a reader of one file. */
RESDIAG_API int resdiag_reader_n_ranks(const resdiag_reader *rd);
/* Rank i (0 .. n_ranks-1) into *out (out->struct_size set by the caller).
 * RESDIAG_E_RANGE for i out of range. */
RESDIAG_API resdiag_status resdiag_reader_rank(const resdiag_reader *rd, int i,
                                               resdiag_rank_info *out);
/* ------------------------------------------------------------------------ */
/* Advanced: reading more of a run file                                     */
/* ------------------------------------------------------------------------ */

/* Whether recorded step step_index (0 .. n_steps-1) ended aborted
 * (resdiag_step_abort): *aborted 1, else 0 (also for every step of a file
 * written before step status existed). For a job's merged ranks, 1 when
 * any rank that recorded the step aborted it. RESDIAG_E_NULL,
 * RESDIAG_E_NOT_FOUND for a step index out of range. */
RESDIAG_API resdiag_status resdiag_reader_step_aborted(const resdiag_reader *rd,
                                                       int64_t step_index, int *aborted);
/* The reason given to resdiag_step_abort at recorded step step_index into
 * out (out_len >= 1 bytes, NUL-terminated, cut to fit): "" for a complete
 * step or an abort without reason. The bytes are the file's, unchecked:
 * escape them (resdiag_escape_text) before showing them. Merged ranks: the
 * lowest aborting rank's. Errors as resdiag_reader_step_aborted, and
 * RESDIAG_E_INVALID for out_len 0. */
RESDIAG_API resdiag_status resdiag_reader_abort_reason(const resdiag_reader *rd,
                                                       int64_t step_index, char *out,
                                                       size_t out_len);

/* What a run file says of its writer, tested at the call (a live writer
 * may close it a moment later). The reader never takes the writers' lock
 * nor changes the file: it asks whether the lock is held (F_OFD_GETLK) and
 * reads the superblock's status flags, which HDF5 sets while a writer has
 * the file open and clears when it closes the file. */
typedef enum resdiag_file_state {
    RESDIAG_FILE_CLOSED = 0,     /* closed by its writer (or cleared with h5clear -s) */
    RESDIAG_FILE_WRITING = 1,    /* still being written: a writer holds its lock */
    RESDIAG_FILE_NOT_CLOSED = 2, /* its writer did not close it (killed, crashed) and no
                                    writer holds it now */
    RESDIAG_FILE_UNKNOWN = 3     /* cannot tell: marked open on a file system without
                                    locks, or the file cannot be looked at again */
} resdiag_file_state;

/* The state of rd's file into *out (doc/FORMAT.md, "Is the writer done?").
 * For a job's merged ranks, the first of WRITING, NOT_CLOSED, UNKNOWN that
 * any rank's file is in, else CLOSED. RESDIAG_E_NULL for a NULL argument. */
RESDIAG_API resdiag_status resdiag_reader_file_state(const resdiag_reader *rd,
                                                     resdiag_file_state *out);

/* The sketch of the same tensor: out (sketch_size). */
RESDIAG_API resdiag_status resdiag_reader_sketch(const resdiag_reader *rd, int64_t step_index,
                                                 resdiag_direction dir, int layer,
                                                 int sublayer, resdiag_site site,
                                                 double *out);
/* 1 if value, from resdiag_reader_metric, is one the trainer gave (a
 * number, +-Inf, or its NaN: stored as a NaN of its own), 0 where it gave
 * none (in a file written before given NaNs were kept apart, every NaN
 * reads as not given). */
RESDIAG_API int resdiag_metric_given(double value);
/* *same_as: the block site of the same (dir, layer, sublayer) whose tensor
 * `site` was recorded from at recorded step step_index
 * (resdiag_observe_alias), or -1: a tensor of its own, or nothing declared
 * (also for files written before aliases). RESDIAG_E_FORMAT when the file
 * holds something that is not another site's index there. */
RESDIAG_API resdiag_status resdiag_reader_alias(const resdiag_reader *rd, int64_t step_index,
                                                resdiag_direction dir, int layer,
                                                int sublayer, resdiag_site site,
                                                int *same_as);
/* The trainer's "file:line" behind a site's hook ("" if never observed).
 * Static until the reader closes. */
RESDIAG_API const char *resdiag_reader_callsite(const resdiag_reader *rd,
                                                resdiag_direction dir, int layer,
                                                int sublayer, resdiag_site site);

/* One field of one site over all recorded steps: out (n), n <= n_steps. */
RESDIAG_API resdiag_status resdiag_reader_series(const resdiag_reader *rd,
                                                 resdiag_direction dir, int layer,
                                                 int sublayer, resdiag_site site,
                                                 resdiag_field field, double *out,
                                                 int64_t n);

/* Generic access to the file's datasets (doc/FORMAT.md lists them).
 * resdiag_reader_n_datasets/_dataset_name list them; _dims gives a
 * dataset's shape (first axis = step for time series); _read reads
 * steps [first, first+count) of a float64 time series, all other axes
 * whole, into out (count * product of the other dims). */
RESDIAG_API int resdiag_reader_n_datasets(const resdiag_reader *rd);
RESDIAG_API const char *resdiag_reader_dataset_name(const resdiag_reader *rd, int i);
RESDIAG_API resdiag_status resdiag_reader_dims(const resdiag_reader *rd, const char *name,
                                               int64_t *dims, int max_rank, int *rank);
RESDIAG_API resdiag_status resdiag_reader_read(const resdiag_reader *rd, const char *name,
                                               int64_t first, int64_t count, double *out,
                                               size_t out_len);

/* ------------------------------------------------------------------------ */
/* Advanced: more of the analysis                                           */
/* ------------------------------------------------------------------------ */

/* With RESDIAG_VERDICT_MIXED: the number K of leading renormalized
 * (post-norm/deepnorm) layers, 0..L; -1 when the layers are not one such
 * prefix followed by non-renormalized layers, or the verdict is not MIXED. */
RESDIAG_API int resdiag_analysis_mix_layers(const resdiag_analysis *a);
/* The DeepNorm alpha estimated from the sketches (mean over sublayers);
 * NaN unless the verdict is DEEPNORM. */
RESDIAG_API double resdiag_analysis_alpha(const resdiag_analysis *a);
/* 1 a final norm was observed, 0 observed to be absent (what the head
 * reads is the very tensor that entered), -1 cannot tell: no final-norm
 * site, or an input already normalized that the norm changes only within
 * rounding or its epsilon (a norm there cannot be told from an identity). */
RESDIAG_API int resdiag_analysis_final_norm(const resdiag_analysis *a);
/* 1 when only the stream (and the embedding) was observed: less evidence. */
RESDIAG_API int resdiag_analysis_stream_only(const resdiag_analysis *a);
/* Growth of the mean per-token stream norm over depth, last layer / first
 * observed stream tensor; NaN when fewer than two were observed. */
RESDIAG_API double resdiag_analysis_growth(const resdiag_analysis *a);
/* Two analyses side by side (`resdiag diff`): the differences that matter
 * first (verdict, final norm, stream growth, the layers whose stream norm,
 * relative updates or first parameter gradient differ most), then a
 * per-layer table. Meant for controlled comparisons (pre vs post on the
 * same data and seed); runs of different depth are compared over the
 * common layers. name_a and name_b label the columns (NULL: "A", "B").
 * A new string to free with resdiag_free; NULL if a or b is NULL or
 * memory runs out. */
RESDIAG_API char *resdiag_analysis_diff_text(const resdiag_analysis *a,
                                             const resdiag_analysis *b,
                                             const char *name_a, const char *name_b);
/* The page comparing two runs (`resdiag diff --html`): both verdicts, the
 * figures with both runs on the same axes (A solid, B dashed) and the text
 * of resdiag_analysis_diff_text. name_a and name_b as there (NULL: "A",
 * "B"). A new string to free with resdiag_free; NULL (logged) when a or b
 * is NULL or memory runs out. */
RESDIAG_API char *resdiag_analysis_diff_html(const resdiag_analysis *a,
                                             const resdiag_analysis *b,
                                             const char *name_a, const char *name_b);

/* What resdiag_reader_dump prints. */
typedef struct resdiag_dump_options {
    size_t struct_size;    /* sizeof(resdiag_dump_options): set by _init */
    const char *run_name;  /* the run in the first line, usually its path (any
                              bytes: escaped); default NULL: "run" */
    int64_t first_index;   /* the first step index (0-based, as in
                              resdiag_reader_steps) to print; default 0 */
    int64_t n_steps;       /* how many steps from there; default 1; -1: all the
                              rest. Fewer are printed when the run has fewer */
} resdiag_dump_options;

/* Fills *options with the defaults. Not NULL. */
RESDIAG_API void resdiag_dump_options_init(resdiag_dump_options *options);

/* What a run file holds (`resdiag dump`): the model description and
 * provenance, then per step a table of every observed site (tokens,
 * Frobenius norm, per-token norm, RMS and mean, max |value| and its
 * column, NaN/Inf counts, call order, the trainer's file:line), the update
 * ratios and the parameter gradients. Every string from the file is
 * text-escaped. options may be NULL (the defaults). *text: a new string to
 * free with resdiag_free, or NULL on any error. RESDIAG_OK, or the status
 * of the first value that cannot be read, RESDIAG_E_RANGE for a
 * first_index past the last step, RESDIAG_E_INVALID for options not set
 * up by _init, RESDIAG_E_NULL, RESDIAG_E_NOMEM; each logged. */
RESDIAG_API resdiag_status resdiag_reader_dump(const resdiag_reader *rd,
                                               const resdiag_dump_options *options,
                                               char **text);

#endif /* RESDIAG_ADVANCED_API */

/* ======================================================================== */
/* DEPRECATED (2 functions): old names, warned at each use.                 */
/* ======================================================================== */

/* The name of 0.1.0 for resdiag_reader_destroy. */
RESDIAG_API RESDIAG_DEPRECATED("use resdiag_reader_destroy")
void resdiag_reader_close(resdiag_reader *rd);
/* The name of 0.1.0 for resdiag_analysis_destroy. */
RESDIAG_API RESDIAG_DEPRECATED("use resdiag_analysis_destroy")
void resdiag_analysis_free(resdiag_analysis *a);

#ifdef __cplusplus
}
#endif

#endif /* RESDIAG_H */
