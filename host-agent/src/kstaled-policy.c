#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-policy.h"

#include "kstaled-baselines.h"

#define KIB_PER_MIB G_GUINT64_CONSTANT (1024)

void
kstaled_policy_config_init (KstaledPolicyConfig *config)
{
  *config = (KstaledPolicyConfig) {
    .mode = KSTALED_MODE_KSTALED,
    /* Buckets of 4 s scans: 4, 8, 20, 60, 120, 240, 480 and 960 s. */
    .scan_seconds = 4,
    /* Google's far memory starts at 120 s (ASPLOS'19). */
    .cold_age = 120,
    .min_cold_age = 60,
    .max_cold_age = 960,
    .relaxed_cold_age = 480,
    .adapt_interval = 300,
    /* Google's promotion rate SLO: 0.2 % of the working set per minute. */
    .promotion_target_ppm = 2000,
    .headroom_percent = 10,
    .headroom_kib = 128 * KIB_PER_MIB,
    .critical_headroom_kib = 32 * KIB_PER_MIB,
    .min_memory_kib = 512 * KIB_PER_MIB,
    .shares = 1000,
    .hysteresis_kib = 64 * KIB_PER_MIB,
    .hysteresis_percent = 2,
    .max_step_kib = 256 * KIB_PER_MIB,
    .max_report_age = 60,
    .stale_drop_kib = 64 * KIB_PER_MIB,
    .emergency_stale_drop_percent = 25,
    .swap_in_rate_kib = 1024,
    .major_fault_rate = 100,
    .alloc_stall_rate = 50,
    .shortfall_gain = 2,
    .pressure_holdoff = 120,
    .max_pressure_holdoff = 3600,
    .pressure_memory = 1800,
    .swap_backed_reclaim_percent = 0,
  };
}

static guint64
add_sat (guint64 a, guint64 b)
{
  return a > G_MAXUINT64 - b ? G_MAXUINT64 : a + b;
}

static guint64
mul_sat (guint64 a, guint64 b)
{
  return b != 0 && a > G_MAXUINT64 / b ? G_MAXUINT64 : a * b;
}

static guint64
percent_of (guint64 value, guint percent)
{
  return value / 100 * percent + value % 100 * percent / 100;
}

static guint64
rate_per_second (guint64 prev, guint64 now, gint64 elapsed_us)
{
  double rate;

  /* A counter that went down belongs to a rebooted guest. */
  if (now <= prev || elapsed_us <= 0)
    return 0;
  rate = (double) (now - prev) * G_USEC_PER_SEC / (double) elapsed_us;
  return rate >= (double) G_MAXUINT64 ? G_MAXUINT64 : (guint64) rate;
}

static guint64
increase (gboolean had, guint64 prev, gboolean has, guint64 now)
{
  return had && has && now > prev ? now - prev : 0;
}

gboolean
kstaled_covering_bucket (guint seconds, guint scan_seconds, guint *bucket)
{
  for (guint i = 0; i < KSTALED_N_BUCKETS; i++)
    if ((guint64) kstaled_bucket_scans[i] * MAX (scan_seconds, 1) >= seconds)
      {
        *bucket = i;
        return TRUE;
      }
  return FALSE;
}

guint
kstaled_cold_bucket (guint seconds, guint scan_seconds)
{
  guint bucket;

  return kstaled_covering_bucket (seconds, scan_seconds, &bucket)
         ? bucket : KSTALED_N_BUCKETS - 1;
}

typedef struct {
  guint64 promoted_kib;         /* swap-ins, faults, stale drop */
  guint64 refaulted_kib;        /* swap-ins and stale drop */
  gint64 elapsed_us;            /* since the last call's sample */
  gboolean pressure;            /* grow in proportion */
  gboolean emergency;           /* go to the maximum */
  KstaledReason reason;
} Pressure;

/* Updates the counter samples and measures the guest's pressure. */
static void
measure_pressure (const KstaledPolicyConfig *config,
                  const KstaledPolicyInput *input, KstaledPolicyState *state,
                  KstaledDecision *d, Pressure *p)
{
  const KstaledBalloonStats *st = &input->stats;
  const KstaledGuestCounters *c = &input->counters;
  gboolean have_counters = st->has_swap_in && st->has_major_fault;
  gint64 elapsed = input->now_us - state->sample_us;
  guint64 swapped_in = 0, faults = 0, oom_kills, stalls;

  if (have_counters && state->has_sample)
    {
      d->swap_in_rate_kib = rate_per_second (state->swap_in, st->swap_in,
                                             elapsed);
      d->major_fault_rate = rate_per_second (state->major_fault,
                                             st->major_fault, elapsed);
      swapped_in = increase (TRUE, state->swap_in, TRUE, st->swap_in);
      faults = increase (TRUE, state->major_fault, TRUE, st->major_fault);
    }
  oom_kills = increase (state->has_counters && state->counters.has_oom_kills,
                        state->counters.oom_kills, c->has_oom_kills,
                        c->oom_kills);
  stalls = increase (state->has_counters && state->counters.has_alloc_stalls,
                     state->counters.alloc_stalls, c->has_alloc_stalls,
                     c->alloc_stalls);
  if (state->has_counters && elapsed > 0)
    stalls = stalls * G_USEC_PER_SEC / (guint64) elapsed;
  state->has_sample = have_counters;
  state->sample_us = input->now_us;
  state->swap_in = st->swap_in;
  state->major_fault = st->major_fault;
  state->has_counters = TRUE;
  state->counters = *c;

  d->stale_drop_kib = input->early_stale_drop / 1024;
  p->promoted_kib = add_sat (add_sat (swapped_in,
                                      mul_sat (faults, KSTALED_FAULT_KIB)),
                             d->stale_drop_kib);
  d->shortfall_kib = p->promoted_kib;
  p->refaulted_kib = add_sat (swapped_in, d->stale_drop_kib);
  p->elapsed_us = elapsed;

  p->emergency = TRUE;
  if (oom_kills > 0)
    p->reason = KSTALED_REASON_OOM_KILL;
  else if (config->emergency_stale_drop_percent > 0 &&
           d->stale_drop_kib > 0 &&
           d->stale_drop_kib >= percent_of (st->actual,
                                            config->emergency_stale_drop_percent))
    p->reason = KSTALED_REASON_EARLY_REPORT;
  /* The balloon driver's own allocations stall while it inflates: only
   * stalls with the balloon at rest are the guest's. */
  else if (config->alloc_stall_rate > 0 &&
           !(state->request_kib != 0 && !state->request_deflates) &&
           stalls >= config->alloc_stall_rate)
    p->reason = KSTALED_REASON_ALLOC_STALLS;
  else
    p->emergency = FALSE;
  if (p->emergency)
    {
      p->pressure = TRUE;
      return;
    }
  p->pressure = TRUE;
  if (config->stale_drop_kib > 0 && d->stale_drop_kib >= config->stale_drop_kib)
    p->reason = KSTALED_REASON_EARLY_REPORT;
  else if (config->swap_in_rate_kib > 0 &&
           d->swap_in_rate_kib >= config->swap_in_rate_kib)
    p->reason = KSTALED_REASON_SWAP_IN;
  else if (config->major_fault_rate > 0 &&
           d->major_fault_rate >= config->major_fault_rate)
    p->reason = KSTALED_REASON_MAJOR_FAULTS;
  else
    p->pressure = FALSE;
  /* A guest whose free memory covers what it lacked plus the headroom is
   * reading back what an earlier, smaller balloon pushed out: it has the
   * room, and the cold age adaptation counts the promotions. */
  if (p->pressure && st->has_unused &&
      st->unused >= add_sat (p->promoted_kib, config->headroom_kib))
    p->pressure = FALSE;
}

/* Idle memory in KiB of the cold bucket that the host gets back, never
 * above @used: the guest's numbers are not trusted to be consistent. */
static guint64
idle_kib (const KstaledPolicyConfig *config, const KstaledReport *report,
          guint bucket, guint64 used)
{
  guint file = (1u << KSTALED_IDLE_CLEAN) | (1u << KSTALED_IDLE_DIRTY_FILE);
  guint64 swap_backed = kstaled_report_idle_bytes (report, bucket,
                                                   1u << KSTALED_IDLE_DIRTY_SWAP)
                        / 1024;

  return MIN (add_sat (kstaled_report_idle_bytes (report, bucket, file) / 1024,
                       percent_of (swap_backed,
                                   config->swap_backed_reclaim_percent)),
              used);
}

typedef struct {
  guint64 used;
  guint64 overhead;
  guint64 slo_target;           /* at the adaptive cold age */
  guint64 long_cold;            /* cold for the relaxed cold age */
} Estimate;

/* Fills the estimate fields; on FALSE, @reason says what is missing. */
static gboolean
estimate (const KstaledPolicyConfig *config, const KstaledPolicyInput *input,
          KstaledDecision *d, Estimate *e, KstaledReason *reason)
{
  const KstaledReport *report = input->report;
  const KstaledBalloonStats *st = &input->stats;
  const guint all_kinds = (1u << KSTALED_N_IDLE_KINDS) - 1;
  guint scan_seconds, bucket, relaxed;
  gboolean has_relaxed;
  guint64 recent_idle, active;

  if (report == NULL || !report->has_report)
    {
      *reason = KSTALED_REASON_NO_REPORT;
      return FALSE;
    }
  /* The bucket whose age matches at the period the device scans with,
   * which is the agent's own once its settings are in. */
  scan_seconds = report->scan_seconds ? report->scan_seconds
                                      : config->scan_seconds;
  bucket = kstaled_cold_bucket (d->cold_age, scan_seconds);
  has_relaxed = kstaled_covering_bucket (MAX (config->relaxed_cold_age,
                                              d->cold_age),
                                         scan_seconds, &relaxed);
  d->cold_age_scans = kstaled_bucket_scans[bucket];
  d->report_age_ms = report->report_age_ms;
  d->guest_scans = report->guest_scans;
  if (report->report_age_ms > (guint64) config->max_report_age * 1000)
    {
      *reason = KSTALED_REASON_STALE_REPORT;
      return FALSE;
    }
  if (!st->has_available || !st->has_unused)
    {
      *reason = KSTALED_REASON_NO_GUEST_STATS;
      return FALSE;
    }

  e->used = st->available > st->unused ? st->available - st->unused : 0;
  d->idle_kib = idle_kib (config, report, bucket, e->used);
  /* Nothing is known to be cold for longer than the oldest bucket. */
  e->long_cold = has_relaxed ? idle_kib (config, report, relaxed, e->used)
                             : 0;
  recent_idle = MIN (kstaled_report_idle_bytes (report, 0, all_kinds) / 1024,
                     e->used);
  active = e->used - recent_idle;
  /* Memory the guest kernel reserved at boot is in the balloon size but not
   * in MemTotal; the target is a balloon size, so it includes it. */
  e->overhead = st->actual > st->available ? st->actual - st->available : 0;

  d->has_estimate = TRUE;
  d->working_set_kib = e->used - d->idle_kib;
  d->headroom_kib = add_sat (percent_of (d->working_set_kib,
                                         config->headroom_percent),
                             config->headroom_kib);
  d->floor_kib = MIN (MAX (MAX (config->min_memory_kib,
                                add_sat (active, e->overhead)),
                           d->soft_floor_kib),
                      d->max_kib);
  e->slo_target = CLAMP (add_sat (add_sat (d->working_set_kib,
                                           d->headroom_kib), e->overhead),
                         d->floor_kib, d->max_kib);
  return TRUE;
}

/* The size the host lets the domain shrink to, from its estimate. */
static guint64
host_target (const KstaledPolicyConfig *config,
             const KstaledPolicyInput *input, const KstaledDecision *d,
             const Estimate *e)
{
  guint64 relaxed = add_sat (add_sat (e->used - e->long_cold,
                                      d->headroom_kib), e->overhead);
  const KstaledVmRecord *record;
  guint64 target;

  switch (kstaled_host_level (input->host))
    {
    case KSTALED_HOST_UNKNOWN:
      return e->slo_target;
    case KSTALED_HOST_RELAXED:
      return MAX (e->slo_target, relaxed);
    case KSTALED_HOST_SHORT:
      /* Memory cold for long goes anyway; memory cold for the adaptive cold
       * age only as far as the host's shortfall asks of this domain. */
      record = kstaled_host_lookup (input->host, input->domain);
      target = d->actual_kib;
      if (record != NULL && record->take_kib < d->actual_kib)
        target = d->actual_kib - record->take_kib;
      return MAX (e->slo_target, MIN (target, relaxed));
    case KSTALED_HOST_CRITICAL:
      return add_sat (add_sat (d->working_set_kib,
                               config->critical_headroom_kib), e->overhead);
    }
  g_return_val_if_reached (e->slo_target);
}

/* Whether the balloon is still on its way to the last size asked for,
 * either way (past it counts as there); forgets the request once done or
 * given up. */
static gboolean
settling (KstaledPolicyState *state, gint64 now_us, guint64 actual)
{
  gboolean short_of_it;

  if (state->request_kib == 0)
    return FALSE;
  short_of_it = state->request_deflates
                ? add_sat (actual, KSTALED_SETTLE_SLACK_KIB) < state->request_kib
                : actual > state->request_kib + KSTALED_SETTLE_SLACK_KIB;
  if (short_of_it &&
      now_us - state->request_us <
      (gint64) KSTALED_SETTLE_SECONDS * G_USEC_PER_SEC)
    return TRUE;
  state->request_kib = 0;
  return FALSE;
}

static void
remember_request (KstaledPolicyState *state, gint64 now_us,
                  const KstaledDecision *d)
{
  state->request_kib = d->new_kib;
  state->request_us = now_us;
  state->request_deflates = d->action == KSTALED_ACTION_DEFLATE;
}

static void
settle (const KstaledPolicyState *state, KstaledDecision *d)
{
  d->reason = KSTALED_REASON_SETTLING;
  d->settle_kib = state->request_kib;
}

static void
cold_bucket_bounds (const KstaledPolicyConfig *config, guint *lowest,
                    guint *highest)
{
  *lowest = kstaled_cold_bucket (config->min_cold_age, config->scan_seconds);
  *highest = MAX (kstaled_cold_bucket (config->max_cold_age,
                                       config->scan_seconds), *lowest);
}

/* The cold age a domain starts with, or keeps within a changed
 * configuration's bounds. */
static void
init_cold_age (const KstaledPolicyConfig *config,
               const KstaledPolicyInput *input, KstaledPolicyState *state)
{
  guint lowest, highest;

  cold_bucket_bounds (config, &lowest, &highest);

  if (!state->has_cold_bucket)
    {
      state->has_cold_bucket = TRUE;
      state->cold_bucket = kstaled_cold_bucket (config->cold_age,
                                                config->scan_seconds);
      state->adapt_since_us = input->now_us;
      state->adapt_shortfall_kib = 0;
    }
  state->cold_bucket = CLAMP (state->cold_bucket, lowest, highest);
}

/* The cold age failed: one bucket older, and no younger than that for
 * pressure-memory seconds, doubled for every failure, so that probing a
 * younger age again gets rarer. */
static void
cold_age_failed (const KstaledPolicyConfig *config,
                 const KstaledPolicyInput *input, KstaledPolicyState *state,
                 guint highest)
{
  state->cold_bucket = MIN (state->cold_bucket + 1, highest);
  state->cold_failures = MIN (state->cold_failures + 1, 10);
  state->cold_floor_bucket = state->cold_bucket;
  state->cold_floor_until_us = input->now_us +
                               ((gint64) config->pressure_memory <<
                                state->cold_failures) * G_USEC_PER_SEC;
}

/* @kib promoted over @elapsed_us, per minute, in ppm of @working_set_kib
 * (both non-zero): what the promotion target is set in. */
static double
promotion_ppm (guint64 kib, guint64 working_set_kib, gint64 elapsed_us)
{
  return (double) kib * 1e6 / (double) working_set_kib *
         (60.0 * G_USEC_PER_SEC) / (double) elapsed_us;
}

/* The adaptive cold age: one bucket older on pressure or a promotion rate
 * above twice the target, one younger after a calm adapt-interval. */
static void
adapt_cold_age (const KstaledPolicyConfig *config,
                const KstaledPolicyInput *input, KstaledPolicyState *state,
                const KstaledDecision *d, const Pressure *p)
{
  gint64 window = (gint64) config->adapt_interval * G_USEC_PER_SEC;
  gint64 elapsed = input->now_us - state->adapt_since_us;
  guint lowest, highest;
  double rate_ppm;

  cold_bucket_bounds (config, &lowest, &highest);
  if (input->now_us >= state->cold_floor_until_us)
    state->cold_floor_bucket = 0;
  lowest = MAX (lowest, state->cold_floor_bucket);

  /* Promotions with the guest at its maximum are not the balloon's doing. */
  if (d->actual_kib < d->max_kib)
    state->adapt_shortfall_kib = add_sat (state->adapt_shortfall_kib,
                                          p->promoted_kib);
  /* Pressure may be a change of the working set rather than too young a
   * cold age: one bucket older, but nothing remembered. */
  if (p->pressure)
    {
      state->cold_bucket = MIN (state->cold_bucket + 1, highest);
      state->adapt_since_us = input->now_us;
      state->adapt_shortfall_kib = 0;
      return;
    }
  if (elapsed < window || !d->has_estimate || d->working_set_kib == 0)
    return;
  /* promoted memory per minute, in ppm of the working set */
  rate_ppm = promotion_ppm (state->adapt_shortfall_kib, d->working_set_kib,
                           elapsed);
  if (rate_ppm > 2.0 * config->promotion_target_ppm)
    cold_age_failed (config, input, state, highest);
  else if (rate_ppm < config->promotion_target_ppm &&
           state->cold_bucket > lowest)
    state->cold_bucket--;
  state->adapt_since_us = input->now_us;
  state->adapt_shortfall_kib = 0;
}

/* A pressure is remembered for pressure-memory seconds, doubled for every
 * repeat within its memory: a pressure that keeps coming back is not
 * forgotten between two visits. */
static gboolean
pressure_remembered (const KstaledPolicyConfig *config,
                     const KstaledPolicyState *state, gint64 now_us)
{
  return state->last_pressure_us != 0 &&
         now_us - state->last_pressure_us <
         ((gint64) config->pressure_memory <<
          MIN (state->pressure_repeats, 10)) * G_USEC_PER_SEC;
}

/* The soft floor decays by 1 % of the maximum every
 * KSTALED_SOFT_FLOOR_DECAY_SECONDS, and is forgotten with the pressure. */
static void
decay_soft_floor (const KstaledPolicyConfig *config,
                  const KstaledPolicyInput *input, KstaledPolicyState *state,
                  guint64 max_kib)
{
  gint64 period = KSTALED_SOFT_FLOOR_DECAY_SECONDS * G_USEC_PER_SEC;

  if (!pressure_remembered (config, state, input->now_us))
    {
      state->soft_floor_kib = 0;
      state->pressure_repeats = 0;
      return;
    }
  while (state->soft_floor_kib > 0 &&
         input->now_us - state->soft_floor_decay_us >= period)
    {
      state->soft_floor_decay_us += period;
      state->soft_floor_kib -= MIN (state->soft_floor_kib,
                                    MAX (percent_of (max_kib, 1), 1));
    }
}

/* Remembers where pressure hit (@needed_kib: just above the balloon then)
 * and starts a hold-off that doubles for repeats within the pressure
 * memory. */
static void
remember_pressure (const KstaledPolicyConfig *config,
                   const KstaledPolicyInput *input, KstaledPolicyState *state,
                   guint64 needed_kib)
{
  gint64 holdoff;

  if (pressure_remembered (config, state, input->now_us))
    state->pressure_repeats = MIN (state->pressure_repeats + 1, 30);
  else
    state->pressure_repeats = 0;
  state->last_pressure_us = input->now_us;
  state->soft_floor_kib = needed_kib;
  state->soft_floor_decay_us = input->now_us;
  holdoff = MIN ((gint64) config->pressure_holdoff <<
                 MIN (state->pressure_repeats, 20),
                 (gint64) MAX (config->max_pressure_holdoff,
                               config->pressure_holdoff));
  state->holdoff_until_us = input->now_us + holdoff * G_USEC_PER_SEC;
  state->step_pending = FALSE;
}

/* Whether the guest refaulted (swap-ins and stale drop) at less than the
 * promotion target since the last call. */
static gboolean
calm (const KstaledPolicyConfig *config, const KstaledDecision *d,
      const Pressure *p)
{
  if (p->refaulted_kib == 0)
    return TRUE;
  if (d->working_set_kib == 0 || p->elapsed_us <= 0)
    return FALSE;
  return promotion_ppm (p->refaulted_kib, d->working_set_kib,
                        p->elapsed_us) < config->promotion_target_ppm;
}

/* Whether a hold-off runs: until its time is up and then until a whole
 * guest scan has passed with refaults under the promotion target, as a
 * timer alone can end it in the middle of a working-set change. */
static gboolean
holding_off (KstaledPolicyState *state, gint64 now_us, guint64 guest_scans,
             KstaledDecision *d)
{
  if (state->holdoff_until_us == 0)
    return FALSE;
  if (now_us < state->holdoff_until_us)
    {
      d->holdoff_left_us = state->holdoff_until_us - now_us;
      return TRUE;
    }
  if (guest_scans < state->calm_from_scans)
    return TRUE;
  state->holdoff_until_us = 0;
  return FALSE;
}

/* Whether the last shrink step still awaits its evidence: a whole guest
 * scan run after the balloon got there, whose report and balloon
 * statistics show what the step cost before the next one is taken. */
static gboolean
awaiting_evidence (KstaledPolicyState *state, gboolean under_way,
                   guint64 guest_scans)
{
  if (!state->step_pending || under_way)
    return state->step_pending;
  if (state->evidence_scans == 0)
    state->evidence_scans = add_sat (guest_scans, 2);
  if (guest_scans < state->evidence_scans)
    return TRUE;
  state->step_pending = FALSE;
  return FALSE;
}

/* Asks the host for @want_kib; FALSE with HOST_FULL if it backs nothing. */
static gboolean
deflate (const KstaledPolicyInput *input, KstaledDecision *d,
         guint64 want_kib, KstaledReason reason)
{
  guint64 granted = kstaled_host_grant (input->host, want_kib - d->actual_kib);

  d->reason = reason;
  if (granted == 0)
    {
      d->reason = KSTALED_REASON_HOST_FULL;
      d->wanted_kib = want_kib;
      return FALSE;
    }
  d->action = KSTALED_ACTION_DEFLATE;
  d->new_kib = d->actual_kib + granted;
  if (d->new_kib < want_kib)
    d->wanted_kib = want_kib;
  return TRUE;
}

static void
record_for_host (const KstaledPolicyConfig *config,
                 const KstaledPolicyInput *input, const KstaledDecision *d,
                 const Estimate *e)
{
  KstaledVmRecord record = {
    .actual_kib = d->actual_kib,
    .max_kib = d->max_kib,
    .min_kib = d->floor_kib,
    .unused_kib = input->stats.unused,
    .shares = config->shares,
  };

  if (input->host == NULL || input->domain == NULL)
    return;
  if (d->has_estimate)
    {
      record.reclaimable_kib = d->actual_kib > e->slo_target
                               ? d->actual_kib - e->slo_target : 0;
      record.long_cold_kib = e->long_cold;
    }
  kstaled_host_record (input->host, input->domain, &record);
}

static void
kstaled_decide (const KstaledPolicyConfig *config,
                const KstaledPolicyInput *input, KstaledPolicyState *state,
                KstaledDecision *d)
{
  Pressure p = { 0 };
  Estimate e = { 0 };
  KstaledReason missing_reason = KSTALED_REASON_NO_STATS;
  gboolean have_estimate;
  guint64 actual, hysteresis, grow;
  gboolean under_way, awaiting;

  measure_pressure (config, input, state, d, &p);
  if (!input->stats.has_actual || input->max_memory_kib == 0)
    {
      d->reason = KSTALED_REASON_NO_STATS;
      return;
    }
  actual = input->stats.actual;
  if (state->stale_actual_kib != 0)
    {
      if (actual == state->stale_actual_kib)
        actual = d->max_kib;
      else
        state->stale_actual_kib = 0;
      d->actual_kib = d->new_kib = actual;
    }
  /* Pressure with the guest at its maximum is none of the balloon's. */
  if (actual >= d->max_kib)
    p.pressure = p.emergency = FALSE;

  decay_soft_floor (config, input, state, d->max_kib);
  d->soft_floor_kib = state->soft_floor_kib;
  init_cold_age (config, input, state);
  d->cold_age = kstaled_bucket_scans[state->cold_bucket] *
                config->scan_seconds;
  d->scan_seconds = config->scan_seconds;
  /* Early reports then fire for memory the policy counts as cold. */
  d->stale_page_age = kstaled_bucket_scans[state->cold_bucket];
  have_estimate = estimate (config, input, d, &e, &missing_reason);
  adapt_cold_age (config, input, state, d, &p);
  if (have_estimate)
    {
      d->target_kib = CLAMP (host_target (config, input, d, &e),
                             d->floor_kib, d->max_kib);
    }
  record_for_host (config, input, d, &e);

  /* A step the guest is still carrying out is not judged by what is left
   * of it: the next decision would cut it short or start from a balloon
   * that has not settled. */
  under_way = settling (state, input->now_us, actual);
  /* The scan in progress may have started before the refaults: only the
   * one after it counts as calm. */
  if (have_estimate && !calm (config, d, &p))
    state->calm_from_scans = add_sat (d->guest_scans, 2);
  if (input->rebooted)
    {
      state->request_kib = 0;
      if (actual < d->max_kib && deflate (input, d, d->max_kib,
                                          KSTALED_REASON_REBOOT))
        state->stale_actual_kib = actual;
      else if (actual >= d->max_kib)
        d->reason = KSTALED_REASON_REBOOT;
      return;
    }
  if (p.pressure)
    {
      d->emergency = p.emergency;
      grow = p.emergency ? d->max_kib
                         : MIN (add_sat (add_sat (actual,
                                                  mul_sat (p.promoted_kib,
                                                           config->shortfall_gain)),
                                         d->has_estimate ? d->headroom_kib
                                                         : config->headroom_kib),
                                d->max_kib);
      /* Pressure again while an earlier deflation is under way asks for
       * no less than it did. */
      if (under_way && state->request_deflates && state->request_kib > grow)
        grow = state->request_kib;
      state->request_kib = 0;
      /* Pressure hit at @actual: the next shrink stops a little above,
       * by what the guest lacked, up to 5 % of its maximum (a thrashing
       * guest reads the same pages back many times). */
      if (deflate (input, d, grow, p.reason))
        {
          remember_request (state, input->now_us, d);
          remember_pressure (config, input, state,
                             MIN (add_sat (actual,
                                           MIN (p.promoted_kib,
                                                percent_of (d->max_kib, 5))),
                                  d->new_kib));
        }
      d->soft_floor_kib = state->soft_floor_kib;
      return;
    }
  if (!have_estimate)
    {
      if (under_way)
        settle (state, d);
      else
        d->reason = missing_reason;
      return;
    }
  awaiting = awaiting_evidence (state, under_way, d->guest_scans);

  hysteresis = MAX (config->hysteresis_kib,
                    percent_of (actual, config->hysteresis_percent));
  if (d->target_kib > actual)
    {
      if (under_way && state->request_deflates &&
          state->request_kib >= d->target_kib)
        settle (state, d);
      else if (d->target_kib - actual < hysteresis && actual >= d->floor_kib)
        d->reason = KSTALED_REASON_HYSTERESIS;
      else if (deflate (input, d, d->target_kib, KSTALED_REASON_GROW))
        {
          remember_request (state, input->now_us, d);
          state->step_pending = FALSE;
        }
    }
  /* At or above the target.  A step under way is waited for even when
   * the target has come up to the balloon. */
  else if (d->target_kib < actual && d->guest_scans < d->cold_age_scans)
    d->reason = KSTALED_REASON_WARMING_UP;
  else if (d->target_kib < actual &&
           holding_off (state, input->now_us, d->guest_scans, d))
    d->reason = KSTALED_REASON_HOLDOFF;
  else if (under_way)
    settle (state, d);
  else if (actual - d->target_kib < MAX (hysteresis, 1))
    d->reason = KSTALED_REASON_HYSTERESIS;
  else if (awaiting)
    {
      d->reason = KSTALED_REASON_AWAITING_SCAN;
      d->evidence_scans = state->evidence_scans;
    }
  else
    {
      d->reason = KSTALED_REASON_SHRINK;
      d->action = KSTALED_ACTION_INFLATE;
      d->new_kib = actual - MIN (config->max_step_kib,
                                 actual - d->target_kib);
      remember_request (state, input->now_us, d);
      state->step_pending = TRUE;
      state->evidence_scans = 0;
    }
}

void
kstaled_policy_decide (const KstaledPolicyConfig *config,
                       const KstaledPolicyInput *input,
                       KstaledPolicyState *state, KstaledDecision *d)
{
  *d = (KstaledDecision) {
    .action = KSTALED_ACTION_NONE,
    .mode = config->mode,
    .host_level = kstaled_host_level (input->host),
    .actual_kib = input->stats.actual,
    .new_kib = input->stats.actual,
    .max_kib = input->max_memory_kib,
  };

  if (input->rebooted)
    *state = (KstaledPolicyState) { 0 };
  if (config->mode == KSTALED_MODE_KSTALED)
    {
      kstaled_decide (config, input, state, d);
      return;
    }
  if (!input->stats.has_actual || input->max_memory_kib == 0)
    {
      d->reason = KSTALED_REASON_NO_STATS;
      return;
    }
  switch (config->mode)
    {
    case KSTALED_MODE_MOM:
      kstaled_mom_decide (config, input, state, d);
      break;
    case KSTALED_MODE_PROXMOX:
      kstaled_proxmox_decide (config, input, d);
      break;
    case KSTALED_MODE_STATIC:
    case KSTALED_MODE_KSTALED:
      kstaled_static_decide (input, d);
      break;
    }
}

gchar *
kstaled_device_config_command (const KstaledDecision *d,
                               const KstaledReport *report)
{
  if (d->scan_seconds == 0 || report == NULL ||
      (report->scan_seconds == d->scan_seconds &&
       report->stale_page_age == d->stale_page_age))
    return NULL;
  return g_strdup_printf ("{\"execute\":\"kstaled-set-config\",\"arguments\":"
                          "{\"scan-seconds\":%u,\"stale-page-age\":%u}}",
                          d->scan_seconds, d->stale_page_age);
}

static const char *const reason_names[] = {
  [KSTALED_REASON_NO_STATS] = "no-stats",
  [KSTALED_REASON_NO_REPORT] = "no-report",
  [KSTALED_REASON_STALE_REPORT] = "stale-report",
  [KSTALED_REASON_NO_GUEST_STATS] = "no-guest-stats",
  [KSTALED_REASON_REBOOT] = "reboot",
  [KSTALED_REASON_EARLY_REPORT] = "early-report",
  [KSTALED_REASON_SWAP_IN] = "swap-in",
  [KSTALED_REASON_MAJOR_FAULTS] = "major-faults",
  [KSTALED_REASON_OOM_KILL] = "oom-kill",
  [KSTALED_REASON_ALLOC_STALLS] = "alloc-stalls",
  [KSTALED_REASON_WARMING_UP] = "warming-up",
  [KSTALED_REASON_HOLDOFF] = "holdoff",
  [KSTALED_REASON_SETTLING] = "settling",
  [KSTALED_REASON_AWAITING_SCAN] = "awaiting-scan",
  [KSTALED_REASON_HYSTERESIS] = "hysteresis",
  [KSTALED_REASON_GROW] = "grow",
  [KSTALED_REASON_SHRINK] = "shrink",
  [KSTALED_REASON_HOST_FULL] = "host-full",
  [KSTALED_REASON_STATIC] = "static",
};

static const char *const mode_names[] = {
  [KSTALED_MODE_KSTALED] = "kstaled",
  [KSTALED_MODE_MOM] = "mom",
  [KSTALED_MODE_PROXMOX] = "proxmox",
  [KSTALED_MODE_STATIC] = "static",
};

static const char *const action_names[] = {
  [KSTALED_ACTION_NONE] = "none",
  [KSTALED_ACTION_DEFLATE] = "deflate",
  [KSTALED_ACTION_INFLATE] = "inflate",
};

const char *
kstaled_reason_to_string (KstaledReason reason)
{
  g_return_val_if_fail (reason < G_N_ELEMENTS (reason_names), "unknown");
  return reason_names[reason];
}

const char *
kstaled_action_to_string (KstaledAction action)
{
  g_return_val_if_fail (action < G_N_ELEMENTS (action_names), "unknown");
  return action_names[action];
}

/* The index of @str in @names, or -1. */
static int
name_index (const char *const *names, guint n_names, const char *str)
{
  for (guint i = 0; i < n_names; i++)
    if (g_strcmp0 (str, names[i]) == 0)
      return (int) i;
  return -1;
}

gboolean
kstaled_action_from_string (const char *str, KstaledAction *action)
{
  int i = name_index (action_names, G_N_ELEMENTS (action_names), str);

  if (i >= 0)
    *action = (KstaledAction) i;
  return i >= 0;
}

const char *
kstaled_mode_to_string (KstaledPolicyMode mode)
{
  g_return_val_if_fail (mode < G_N_ELEMENTS (mode_names), "unknown");
  return mode_names[mode];
}

gboolean
kstaled_mode_from_string (const char *str, KstaledPolicyMode *mode)
{
  int i = name_index (mode_names, G_N_ELEMENTS (mode_names), str);

  if (i >= 0)
    *mode = (KstaledPolicyMode) i;
  return i >= 0;
}

/* How a pressure decision responds. */
static gchar *
response (const KstaledDecision *d)
{
  if (d->action != KSTALED_ACTION_DEFLATE)
    return g_strdup ("already at the maximum");
  if (d->emergency)
    return g_strdup ("an emergency, deflating to the maximum");
  return g_strdup_printf ("growing by %" G_GUINT64_FORMAT " MiB for %"
                          G_GUINT64_FORMAT " MiB of shortfall",
                          (d->new_kib - d->actual_kib) / 1024,
                          d->shortfall_kib / 1024);
}

static gchar *
explain (const KstaledDecision *d)
{
  g_autofree gchar *how = response (d);

  switch (d->reason)
    {
    case KSTALED_REASON_NO_STATS:
      return g_strdup ("balloon size or maximum memory unknown");
    case KSTALED_REASON_NO_REPORT:
      return g_strdup ("no kstaled report from the guest yet");
    case KSTALED_REASON_STALE_REPORT:
      return g_strdup_printf ("last kstaled report is %" G_GUINT64_FORMAT
                              " s old", d->report_age_ms / 1000);
    case KSTALED_REASON_NO_GUEST_STATS:
      return g_strdup ("balloon driver reports no guest free memory");
    case KSTALED_REASON_REBOOT:
      return g_strdup ("guest rebooted, deflating to the maximum");
    case KSTALED_REASON_EARLY_REPORT:
      return g_strdup_printf ("stale memory dropped by %" G_GUINT64_FORMAT
                              " MiB: %s", d->stale_drop_kib / 1024, how);
    case KSTALED_REASON_SWAP_IN:
      return g_strdup_printf ("swap-in at %" G_GUINT64_FORMAT " KiB/s: %s",
                              d->swap_in_rate_kib, how);
    case KSTALED_REASON_MAJOR_FAULTS:
      return g_strdup_printf ("%" G_GUINT64_FORMAT " major faults/s: %s",
                              d->major_fault_rate, how);
    case KSTALED_REASON_OOM_KILL:
      return g_strdup_printf ("the guest killed a process for memory: %s",
                              how);
    case KSTALED_REASON_ALLOC_STALLS:
      return g_strdup_printf ("the guest's allocations stall: %s", how);
    case KSTALED_REASON_WARMING_UP:
      return g_strdup_printf ("guest scanned %" G_GUINT64_FORMAT
                              " times, fewer than the cold age's %u; "
                              "not shrinking", d->guest_scans,
                              d->cold_age_scans);
    case KSTALED_REASON_HOLDOFF:
      if (d->holdoff_left_us == 0)
        return g_strdup ("pressure seen recently; not shrinking before a "
                         "whole guest scan passes with swap-ins and stale "
                         "drops under the promotion target");
      return g_strdup_printf ("pressure seen recently; not shrinking for %"
                              G_GINT64_FORMAT " s",
                              (d->holdoff_left_us + G_USEC_PER_SEC - 1) /
                              G_USEC_PER_SEC);
    case KSTALED_REASON_AWAITING_SCAN:
      return g_strdup_printf ("guest at scan %" G_GUINT64_FORMAT "; the "
                              "next step waits for scan %" G_GUINT64_FORMAT
                              " to show what the last one cost",
                              d->guest_scans, d->evidence_scans);
    case KSTALED_REASON_SETTLING:
      return g_strdup_printf ("balloon still on its way to %" G_GUINT64_FORMAT
                              " MiB; not shrinking further yet",
                              d->settle_kib / 1024);
    case KSTALED_REASON_HYSTERESIS:
      return g_strdup ("difference to the target is below the hysteresis");
    case KSTALED_REASON_GROW:
      return g_strdup_printf ("growing by %" G_GUINT64_FORMAT
                              " MiB to the target at once",
                              (d->new_kib - d->actual_kib) / 1024);
    case KSTALED_REASON_HOST_FULL:
      return g_strdup_printf ("the host cannot back %" G_GUINT64_FORMAT
                              " MiB more", (d->wanted_kib - d->actual_kib)
                              / 1024);
    case KSTALED_REASON_STATIC:
      return g_strdup ("static mode: the guest keeps its maximum");
    case KSTALED_REASON_SHRINK:
      return g_strdup_printf ("shrinking by %" G_GUINT64_FORMAT
                              " MiB toward the target",
                              (d->actual_kib - d->new_kib) / 1024);
    }
  return g_strdup ("unknown reason");
}

gchar *
kstaled_decision_format (const char *domain, const KstaledDecision *d)
{
  GString *line = g_string_new (NULL);
  g_autofree gchar *why = explain (d);

  g_string_append_printf (line, "domain=%s action=%s reason=%s actual-kib=%"
                          G_GUINT64_FORMAT " new-kib=%" G_GUINT64_FORMAT
                          " mode=%s host=%s",
                          domain, kstaled_action_to_string (d->action),
                          kstaled_reason_to_string (d->reason),
                          d->actual_kib, d->new_kib,
                          kstaled_mode_to_string (d->mode),
                          kstaled_host_level_to_string (d->host_level));
  if (d->cold_age != 0)
    g_string_append_printf (line, " cold-age=%u", d->cold_age);
  if (d->soft_floor_kib != 0)
    g_string_append_printf (line, " soft-floor-kib=%" G_GUINT64_FORMAT,
                            d->soft_floor_kib);
  if (d->has_estimate)
    g_string_append_printf (line, " target-kib=%" G_GUINT64_FORMAT
                            " working-set-kib=%" G_GUINT64_FORMAT
                            " idle-kib=%" G_GUINT64_FORMAT
                            " headroom-kib=%" G_GUINT64_FORMAT
                            " floor-kib=%" G_GUINT64_FORMAT,
                            d->target_kib, d->working_set_kib, d->idle_kib,
                            d->headroom_kib, d->floor_kib);
  g_string_append_printf (line, " max-kib=%" G_GUINT64_FORMAT ": %s",
                          d->max_kib, why);
  return g_string_free (line, FALSE);
}
