/*
 * shared.h - what the text, JSON, diff and HTML renderers say alike: the
 * verdict in words, the energy law as a sentence, the final norm, the
 * head's name, and the runs of layers that share their sublayer verdicts.
 */
#ifndef RESDIAG_RENDER_SHARED_H
#define RESDIAG_RENDER_SHARED_H

#include <stddef.h>

#include "analysis/analysis.h"

/* Values that agree to this part of their mean are called flat. */
#define RD_FLAT_SPREAD 1e-4
#define RD_FLAT_SPREAD_TEXT "1e-4"

/* A verdict in words for people ("pre-norm", "post-norm family (post-norm
 * or deepnorm)", ...). Static storage. */
const char *rd_verdict_human(resdiag_verdict v);
/* A sublayer's verdict in the evidence lines: resdiag_verdict_name, with
 * "?" for cannot tell. */
const char *rd_verdict_short(resdiag_verdict v);

/* ||x_k||^2 = a + b k as a sentence into out (cap bytes): ASCII, or with
 * unicode = 1 the HTML page's notation "‖x_k‖² = ...". */
void rd_energy_sentence(char *out, size_t cap, const rd_fit *e, int unicode);

/* "present", "absent", "not observed" or "cannot be told from an identity
 * here" for a->final_norm. */
const char *rd_final_norm_text(const rd_analysis *a);
/* The JSON value: present, absent, "not observed" or indistinguishable. */
const char *rd_final_norm_key(const rd_analysis *a);

/* The name the head's gradient is shown under: the head parameter's
 * declared name, or NULL when the head gradient is that of the logits. */
const char *rd_head_name(const rd_analysis *a);

/* 1 when the data contradict the declared placement: every output says
 * so first, since `report` exits 0 whatever it finds (the CI gate is
 * `resdiag check --expect declared`). */
int rd_declared_contradicted(const rd_analysis *a);

/* 1 for a training run: its first step is initialization, its span of
 * steps "training"; evaluation and inference runs only count steps. */
int rd_is_training(const rd_analysis *a);

/* The layers l..end-1 share every sublayer's verdict (end > l): the
 * evidence is shown once per such run of layers. */
int rd_layer_group_end(const rd_analysis *a, int l);

/* What the file says of its writer, as a sentence into out (cap bytes,
 * ASCII; "" for a file its writer closed), with how other tools open it;
 * and as the JSON key's value (closed, being_written, not_closed, unknown). */
void rd_file_state_sentence(char *out, size_t cap, const rd_analysis *a);
const char *rd_file_state_key(resdiag_file_state s);

#endif
