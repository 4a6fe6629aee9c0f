/*
 * team.h - what the write path, the step lifecycle and the handle need of
 * the team calls (team.c: resdiag_observe_team_at,
 * resdiag_param_grad_team_at). Internal.
 */
#ifndef RD_RECORD_TEAM_H
#define RD_RECORD_TEAM_H

#include "record/handle.h"
#include "record/hooks.h"

/* One part of a team call (d: RD_SOURCE_TEAM_PART, its part in range) for
 * a resolved target: checks the tensor, computes the part, and the call
 * that completes the team records it (rd_ingest). */
resdiag_status rd_team_write(resdiag *r, const rd_target *t, const rd_hook_data *d);

/* At the end of a recorded step: every team still incomplete is logged
 * (a warning, RESDIAG_LOG_INFO) and reset, its site not recorded. RESDIAG_E_STATE if there was
 * one (resdiag_errmsg says which), else OK. Not while hooks run. */
resdiag_status rd_teams_step_end(resdiag *r);

/* Frees every team's state (resdiag_destroy). */
void rd_teams_free(resdiag *r);

#endif /* RD_RECORD_TEAM_H */
