#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-policy.h"

#define KIB_PER_MIB G_GUINT64_CONSTANT (1024)

void
kstaled_policy_config_init (KstaledPolicyConfig *config)
{
  *config = (KstaledPolicyConfig) {
    .idle_age = 5,
    .headroom_percent = 10,
    .headroom_kib = 128 * KIB_PER_MIB,
    .min_memory_kib = 512 * KIB_PER_MIB,
    .hysteresis_kib = 64 * KIB_PER_MIB,
    .hysteresis_percent = 2,
    .max_step_kib = 256 * KIB_PER_MIB,
    .max_report_age = 60,
    .stale_drop_kib = 64 * KIB_PER_MIB,
    .swap_in_rate_kib = 1024,
    .major_fault_rate = 100,
    .pressure_holdoff = 120,
    .reclaim_swap_backed = FALSE,
  };
}

static guint64
add_sat (guint64 a, guint64 b)
{
  return a > G_MAXUINT64 - b ? G_MAXUINT64 : a + b;
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

/* Updates the swap-in and major-fault sample and returns TRUE with @reason
 * set if a pressure signal is over its limit. */
static gboolean
measure_pressure (const KstaledPolicyConfig *config,
                  const KstaledPolicyInput *input, KstaledPolicyState *state,
                  KstaledDecision *d, KstaledReason *reason)
{
  const KstaledBalloonStats *st = &input->stats;
  gboolean have_counters = st->has_swap_in && st->has_major_fault;
  gint64 elapsed = input->now_us - state->sample_us;

  if (have_counters && state->has_sample)
    {
      d->swap_in_rate_kib = rate_per_second (state->swap_in, st->swap_in,
                                             elapsed);
      d->major_fault_rate = rate_per_second (state->major_fault,
                                             st->major_fault, elapsed);
    }
  state->has_sample = have_counters;
  state->sample_us = input->now_us;
  state->swap_in = st->swap_in;
  state->major_fault = st->major_fault;

  d->stale_drop_kib = input->early_stale_drop / 1024;
  if (config->stale_drop_kib > 0 && d->stale_drop_kib >= config->stale_drop_kib)
    *reason = KSTALED_REASON_EARLY_REPORT;
  else if (config->swap_in_rate_kib > 0 &&
           d->swap_in_rate_kib >= config->swap_in_rate_kib)
    *reason = KSTALED_REASON_SWAP_IN;
  else if (config->major_fault_rate > 0 &&
           d->major_fault_rate >= config->major_fault_rate)
    *reason = KSTALED_REASON_MAJOR_FAULTS;
  else
    return FALSE;
  return TRUE;
}

/* Fills the estimate fields; on FALSE, @reason says what is missing. */
static gboolean
estimate (const KstaledPolicyConfig *config, const KstaledPolicyInput *input,
          KstaledDecision *d, KstaledReason *reason)
{
  const KstaledReport *report = input->report;
  const KstaledBalloonStats *st = &input->stats;
  const guint all_kinds = (1u << KSTALED_N_IDLE_KINDS) - 1;
  guint reclaimable = (1u << KSTALED_IDLE_CLEAN) |
                      (1u << KSTALED_IDLE_DIRTY_FILE);
  int bucket = kstaled_bucket_index (config->idle_age);
  guint64 used, idle, recent_idle, active, overhead;

  if (report == NULL || !report->has_report)
    {
      *reason = KSTALED_REASON_NO_REPORT;
      return FALSE;
    }
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
  g_return_val_if_fail (bucket >= 0, FALSE);

  if (config->reclaim_swap_backed)
    reclaimable |= 1u << KSTALED_IDLE_DIRTY_SWAP;
  used = st->available > st->unused ? st->available - st->unused : 0;
  /* The guest's numbers are not trusted to be consistent: idle memory can
   * never exceed used memory. */
  idle = MIN (kstaled_report_idle_bytes (report, (guint) bucket, reclaimable)
              / 1024, used);
  recent_idle = MIN (kstaled_report_idle_bytes (report, 0, all_kinds) / 1024,
                     used);
  active = used - recent_idle;
  /* Memory the guest kernel reserved at boot is in the balloon size but not
   * in MemTotal; the target is a balloon size, so it includes it. */
  overhead = st->actual > st->available ? st->actual - st->available : 0;

  d->has_estimate = TRUE;
  d->idle_kib = idle;
  d->working_set_kib = used - idle;
  d->headroom_kib = add_sat (percent_of (d->working_set_kib,
                                         config->headroom_percent),
                             config->headroom_kib);
  d->floor_kib = MIN (MAX (config->min_memory_kib, add_sat (active, overhead)),
                      d->max_kib);
  d->target_kib = add_sat (add_sat (d->working_set_kib, d->headroom_kib),
                           overhead);
  d->target_kib = CLAMP (d->target_kib, d->floor_kib, d->max_kib);
  return TRUE;
}

/* Whether the last inflation is still under way; forgets it once done. */
static gboolean
settling (KstaledPolicyState *state, gint64 now_us, guint64 actual)
{
  if (state->inflate_request_kib == 0)
    return FALSE;
  if (actual > state->inflate_request_kib + KSTALED_SETTLE_SLACK_KIB &&
      now_us - state->inflate_request_us <
      (gint64) KSTALED_SETTLE_SECONDS * G_USEC_PER_SEC)
    return TRUE;
  state->inflate_request_kib = 0;
  return FALSE;
}

void
kstaled_policy_decide (const KstaledPolicyConfig *config,
                       const KstaledPolicyInput *input,
                       KstaledPolicyState *state, KstaledDecision *d)
{
  KstaledReason pressure_reason = KSTALED_REASON_NO_STATS;
  KstaledReason missing_reason = KSTALED_REASON_NO_STATS;
  gboolean pressure, have_estimate;
  guint64 actual, hysteresis;

  *d = (KstaledDecision) {
    .action = KSTALED_ACTION_NONE,
    .actual_kib = input->stats.actual,
    .new_kib = input->stats.actual,
    .max_kib = input->max_memory_kib,
    .idle_age = config->idle_age,
  };

  if (input->rebooted)
    *state = (KstaledPolicyState) { 0 };
  pressure = measure_pressure (config, input, state, d, &pressure_reason);
  if (pressure)
    state->holdoff_until_us = input->now_us +
                              (gint64) config->pressure_holdoff * G_USEC_PER_SEC;

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
  have_estimate = estimate (config, input, d, &missing_reason);

  if (input->rebooted || pressure)
    {
      d->reason = input->rebooted ? KSTALED_REASON_REBOOT : pressure_reason;
      state->inflate_request_kib = 0;
      if (actual < d->max_kib)
        {
          d->action = KSTALED_ACTION_DEFLATE;
          d->new_kib = d->max_kib;
          if (input->rebooted)
            state->stale_actual_kib = actual;
        }
      return;
    }
  if (!have_estimate)
    {
      d->reason = missing_reason;
      return;
    }

  hysteresis = MAX (config->hysteresis_kib,
                    percent_of (actual, config->hysteresis_percent));
  if (d->target_kib > actual)
    {
      if (d->target_kib - actual < hysteresis && actual >= d->floor_kib)
        d->reason = KSTALED_REASON_HYSTERESIS;
      else
        {
          d->reason = KSTALED_REASON_GROW;
          d->action = KSTALED_ACTION_DEFLATE;
          d->new_kib = d->target_kib;
          state->inflate_request_kib = 0;
        }
    }
  else if (d->target_kib < actual)
    {
      if (d->guest_scans < config->idle_age)
        d->reason = KSTALED_REASON_WARMING_UP;
      else if (input->now_us < state->holdoff_until_us)
        {
          d->reason = KSTALED_REASON_HOLDOFF;
          d->holdoff_left_us = state->holdoff_until_us - input->now_us;
        }
      else if (actual - d->target_kib < hysteresis)
        d->reason = KSTALED_REASON_HYSTERESIS;
      else if (settling (state, input->now_us, actual))
        {
          d->reason = KSTALED_REASON_SETTLING;
          d->settle_kib = state->inflate_request_kib;
        }
      else
        {
          d->reason = KSTALED_REASON_SHRINK;
          d->action = KSTALED_ACTION_INFLATE;
          d->new_kib = actual - MIN (config->max_step_kib,
                                     actual - d->target_kib);
          state->inflate_request_kib = d->new_kib;
          state->inflate_request_us = input->now_us;
        }
    }
  else
    d->reason = KSTALED_REASON_HYSTERESIS;
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
  [KSTALED_REASON_WARMING_UP] = "warming-up",
  [KSTALED_REASON_HOLDOFF] = "holdoff",
  [KSTALED_REASON_SETTLING] = "settling",
  [KSTALED_REASON_HYSTERESIS] = "hysteresis",
  [KSTALED_REASON_GROW] = "grow",
  [KSTALED_REASON_SHRINK] = "shrink",
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

gboolean
kstaled_action_from_string (const char *str, KstaledAction *action)
{
  for (guint i = 0; i < G_N_ELEMENTS (action_names); i++)
    if (g_strcmp0 (str, action_names[i]) == 0)
      {
        *action = (KstaledAction) i;
        return TRUE;
      }
  return FALSE;
}

static gchar *
explain (const KstaledDecision *d)
{
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
                              " MiB, deflating to the maximum",
                              d->stale_drop_kib / 1024);
    case KSTALED_REASON_SWAP_IN:
      return g_strdup_printf ("swap-in at %" G_GUINT64_FORMAT
                              " KiB/s, deflating to the maximum",
                              d->swap_in_rate_kib);
    case KSTALED_REASON_MAJOR_FAULTS:
      return g_strdup_printf ("%" G_GUINT64_FORMAT
                              " major faults/s, deflating to the maximum",
                              d->major_fault_rate);
    case KSTALED_REASON_WARMING_UP:
      return g_strdup_printf ("guest scanned %" G_GUINT64_FORMAT
                              " times, fewer than idle-age %u; not shrinking",
                              d->guest_scans, d->idle_age);
    case KSTALED_REASON_HOLDOFF:
      return g_strdup_printf ("pressure seen recently; not shrinking for %"
                              G_GINT64_FORMAT " s",
                              (d->holdoff_left_us + G_USEC_PER_SEC - 1) /
                              G_USEC_PER_SEC);
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
                          G_GUINT64_FORMAT " new-kib=%" G_GUINT64_FORMAT,
                          domain, kstaled_action_to_string (d->action),
                          kstaled_reason_to_string (d->reason),
                          d->actual_kib, d->new_kib);
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
