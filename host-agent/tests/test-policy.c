/* Policy tests: estimate, clamping, stepping, hysteresis, pressure. */
#include <string.h>

#include "kstaled-policy.h"

#define MIB G_GUINT64_CONSTANT (1024)            /* in KiB */
#define GIB (1024 * MIB)
#define BYTES_PER_KIB G_GUINT64_CONSTANT (1024)

typedef struct {
  KstaledPolicyConfig config;
  KstaledPolicyState state;
  KstaledReport *report;
  KstaledPolicyInput input;
  KstaledDecision d;
} Fixture;

/* One cgroup whose pages are all idle-clean, with @idle_kib[i] idle for at
 * least kstaled_bucket_scans[i] scans. */
static void
set_idle (Fixture *f, const guint64 idle_kib[KSTALED_N_BUCKETS])
{
  KstaledCgroup *cg = g_ptr_array_index (f->report->cgroups, 0);

  memset (cg->idle, 0, sizeof cg->idle);
  for (guint i = 0; i < KSTALED_N_BUCKETS; i++)
    cg->idle[KSTALED_IDLE_CLEAN][i] = idle_kib[i] * BYTES_PER_KIB;
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  /* 8 GiB guest, 6 GiB used; 4 GiB idle >= 5 scans, 5 GiB idle >= 1 scan */
  const guint64 idle[KSTALED_N_BUCKETS] = {
    5 * GIB, 5 * GIB, 4 * GIB, 3 * GIB, 2 * GIB, GIB, 0, 0
  };
  KstaledCgroup *cg = g_new0 (KstaledCgroup, 1);

  (void) data;
  memset (f, 0, sizeof *f);
  kstaled_policy_config_init (&f->config);
  f->config.headroom_percent = 0;
  f->config.headroom_kib = 0;
  f->report = g_new0 (KstaledReport, 1);
  f->report->cgroups = g_ptr_array_new_with_free_func (g_free);
  f->report->has_report = TRUE;
  f->report->guest_scans = 100;
  f->report->report_age_ms = 500;
  g_ptr_array_add (f->report->cgroups, cg);
  cg->path = NULL;
  set_idle (f, idle);

  f->input.report = f->report;
  f->input.max_memory_kib = 8 * GIB;
  f->input.now_us = 1000 * G_USEC_PER_SEC;
  f->input.stats = (KstaledBalloonStats) {
    .has_actual = TRUE, .actual = 8 * GIB,
    .has_available = TRUE, .available = 8 * GIB,
    .has_unused = TRUE, .unused = 2 * GIB,
    .has_usable = TRUE, .usable = 3 * GIB,
    .has_swap_in = TRUE, .swap_in = 0,
    .has_major_fault = TRUE, .major_fault = 0,
  };
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  (void) data;
  kstaled_report_free (f->report);
}

static void
decide (Fixture *f)
{
  g_autofree gchar *line = NULL;

  kstaled_policy_decide (&f->config, &f->input, &f->state, &f->d);
  line = kstaled_decision_format ("test", &f->d);
  g_test_message ("%s", line);
}

static void
advance (Fixture *f, guint seconds)
{
  f->input.now_us += (gint64) seconds * G_USEC_PER_SEC;
}

static void
test_estimate (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.headroom_percent = 10;
  f->config.headroom_kib = 100 * MIB;
  decide (f);
  g_assert_true (f->d.has_estimate);
  g_assert_cmpuint (f->d.idle_kib, ==, 4 * GIB);
  g_assert_cmpuint (f->d.working_set_kib, ==, 2 * GIB);
  g_assert_cmpuint (f->d.headroom_kib, ==, 2 * GIB / 10 + 100 * MIB);
  g_assert_cmpuint (f->d.target_kib, ==, 2 * GIB + 2 * GIB / 10 + 100 * MIB);
  /* active: 6 GiB used - 5 GiB idle >= 1 scan */
  g_assert_cmpuint (f->d.floor_kib, ==, GIB);
}

static void
test_idle_age_selects_bucket (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.idle_age = 30;
  decide (f);
  g_assert_cmpuint (f->d.idle_kib, ==, 2 * GIB);
  g_assert_cmpuint (f->d.working_set_kib, ==, 4 * GIB);
}

static void
test_shrink_in_steps (Fixture *f, gconstpointer data)
{
  guint64 actual = 8 * GIB;

  (void) data;
  f->config.max_step_kib = 512 * MIB;
  for (int i = 0; i < 20; i++)
    {
      f->input.stats.actual = actual;
      decide (f);
      g_assert_cmpuint (f->d.target_kib, ==, 2 * GIB);
      if (actual == 2 * GIB)
        {
          g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
          g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HYSTERESIS);
          return;
        }
      g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_INFLATE);
      g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
      g_assert_cmpuint (actual - f->d.new_kib, <=, 512 * MIB);
      actual = f->d.new_kib;
      advance (f, 10);
    }
  g_assert_not_reached ();
}

static void
test_settling (Fixture *f, gconstpointer data)
{
  (void) data;
  f->input.stats.actual = 8 * GIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB - 256 * MIB);

  /* the guest has freed only part of the step: wait for the rest */
  advance (f, 1);
  f->input.stats.actual = 8 * GIB - 100 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SETTLING);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpuint (f->d.settle_kib, ==, 8 * GIB - 256 * MIB);

  /* within the slack counts as there: the next step is relative to it */
  advance (f, 1);
  f->input.stats.actual = 8 * GIB - 256 * MIB + 4;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB - 512 * MIB + 4);

  /* a step the guest cannot finish is given up after the settle time */
  advance (f, KSTALED_SETTLE_SECONDS - 1);
  f->input.stats.actual = 8 * GIB - 300 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SETTLING);
  advance (f, 1);
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB - 556 * MIB);

  /* pressure forgets the step under way */
  f->input.early_stale_drop = 64 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_EARLY_REPORT);
  g_assert_cmpuint (f->state.inflate_request_kib, ==, 0);
}

static void
test_hysteresis (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.hysteresis_kib = 100 * MIB;
  f->config.hysteresis_percent = 0;
  f->input.stats.actual = 2 * GIB + 99 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HYSTERESIS);

  f->input.stats.actual = 2 * GIB + 101 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_INFLATE);

  /* below the target by less than the hysteresis: leave it */
  f->input.stats.actual = 2 * GIB - 99 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HYSTERESIS);

  /* percent of the current size wins when larger */
  f->config.hysteresis_percent = 10;
  f->input.stats.actual = 2 * GIB + 150 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HYSTERESIS);
}

static void
test_grow_at_once (Fixture *f, gconstpointer data)
{
  /* guest at 3 GiB using 2.5 GiB with nothing idle: grow straight to
   * working set + headroom */
  const guint64 none[KSTALED_N_BUCKETS] = { 0 };

  (void) data;
  f->config.headroom_kib = GIB;
  set_idle (f, none);
  f->input.stats.actual = 3 * GIB;
  f->input.stats.available = 3 * GIB;
  f->input.stats.unused = 512 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_GROW);
  g_assert_cmpuint (f->d.new_kib, ==, 3 * GIB + 512 * MIB);
  g_assert_cmpuint (f->d.target_kib, ==, 3 * GIB + 512 * MIB);
  /* with a bigger headroom the jump is the whole difference */
  f->config.headroom_kib = 3 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.new_kib, ==, 5 * GIB + 512 * MIB);
}

static void
test_clamp_to_max (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.headroom_kib = 100 * GIB;
  f->input.stats.actual = 4 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.target_kib, ==, 8 * GIB);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);
}

static void
test_floor (Fixture *f, gconstpointer data)
{
  const guint64 all_idle[KSTALED_N_BUCKETS] = {
    6 * GIB, 6 * GIB, 6 * GIB, 6 * GIB, 6 * GIB, 6 * GIB, 6 * GIB, 6 * GIB
  };

  (void) data;
  /* everything idle: the configured minimum holds */
  set_idle (f, all_idle);
  f->config.min_memory_kib = 1536 * MIB;
  f->input.stats.actual = 1536 * MIB + 10 * MIB;
  decide (f);
  g_assert_cmpuint (f->d.working_set_kib, ==, 0);
  g_assert_cmpuint (f->d.target_kib, ==, 1536 * MIB);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HYSTERESIS);

  /* below the floor: grow even within the hysteresis */
  f->input.stats.actual = 1536 * MIB - 10 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, 1536 * MIB);

  /* a floor above the maximum is clamped to the maximum */
  f->config.min_memory_kib = 16 * GIB;
  f->input.stats.actual = 8 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.floor_kib, ==, 8 * GIB);
  g_assert_cmpuint (f->d.target_kib, ==, 8 * GIB);
}

static void
test_active_floor (Fixture *f, gconstpointer data)
{
  /* idle >= 5 scans counts 4 GiB, but only 1 GiB was idle last scan: the
   * bucket values are inconsistent, and the active 5 GiB wins */
  const guint64 odd[KSTALED_N_BUCKETS] = {
    GIB, GIB, GIB, GIB, GIB, GIB, 0, 0
  };

  (void) data;
  set_idle (f, odd);
  f->config.min_memory_kib = 0;
  decide (f);
  g_assert_cmpuint (f->d.floor_kib, ==, 5 * GIB);
  g_assert_cmpuint (f->d.target_kib, >=, 5 * GIB);
}

static void
test_overhead (Fixture *f, gconstpointer data)
{
  (void) data;
  /* 8 GiB balloon, 7.75 GiB MemTotal: 256 MiB the guest never sees */
  f->input.stats.available = 8 * GIB - 256 * MIB;
  f->input.stats.unused = 2 * GIB - 256 * MIB;
  decide (f);
  g_assert_cmpuint (f->d.working_set_kib, ==, 2 * GIB);
  g_assert_cmpuint (f->d.target_kib, ==, 2 * GIB + 256 * MIB);
}

static void
test_swap_backed (Fixture *f, gconstpointer data)
{
  KstaledCgroup *cg;

  (void) data;
  cg = g_ptr_array_index (f->report->cgroups, 0);
  memset (cg->idle, 0, sizeof cg->idle);
  for (guint i = 0; i < KSTALED_N_BUCKETS; i++)
    cg->idle[KSTALED_IDLE_DIRTY_SWAP][i] = 4 * GIB * BYTES_PER_KIB;
  decide (f);
  g_assert_cmpuint (f->d.idle_kib, ==, 0);
  f->config.reclaim_swap_backed = TRUE;
  decide (f);
  g_assert_cmpuint (f->d.idle_kib, ==, 4 * GIB);
}

static void
test_hostile_idle (Fixture *f, gconstpointer data)
{
  KstaledCgroup *cg;

  (void) data;
  /* idle far larger than used memory, over several cgroups: clamped, never
   * wraps around */
  for (int i = 0; i < 3; i++)
    {
      cg = g_new0 (KstaledCgroup, 1);
      for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
        for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
          cg->idle[k][b] = G_MAXUINT64 / 2;
      g_ptr_array_add (f->report->cgroups, cg);
    }
  f->config.min_memory_kib = 512 * MIB;
  decide (f);
  g_assert_cmpuint (f->d.idle_kib, ==, 6 * GIB);
  g_assert_cmpuint (f->d.working_set_kib, ==, 0);
  g_assert_cmpuint (f->d.target_kib, ==, 512 * MIB);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_INFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB - f->config.max_step_kib);

  /* unused larger than available */
  f->input.stats.unused = 100 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.working_set_kib, ==, 0);
}

static void
test_missing_data (Fixture *f, gconstpointer data)
{
  (void) data;
  f->input.report = NULL;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_NO_REPORT);

  f->input.report = f->report;
  f->report->has_report = FALSE;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_NO_REPORT);

  f->report->has_report = TRUE;
  f->report->report_age_ms = 61 * 1000;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_STALE_REPORT);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);

  f->report->report_age_ms = 0;
  f->input.stats.has_unused = FALSE;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_NO_GUEST_STATS);

  f->input.stats.has_actual = FALSE;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_NO_STATS);

  f->input.stats.has_actual = TRUE;
  f->input.max_memory_kib = 0;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_NO_STATS);
}

static void
test_warming_up (Fixture *f, gconstpointer data)
{
  (void) data;
  f->report->guest_scans = 4;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_WARMING_UP);

  /* growing is still allowed while warming up */
  f->input.stats.actual = 512 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
}

static void
test_early_report_pressure (Fixture *f, gconstpointer data)
{
  (void) data;
  f->input.stats.actual = 3 * GIB;
  f->input.early_stale_drop = 63 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_cmpint (f->d.reason, !=, KSTALED_REASON_EARLY_REPORT);

  f->input.early_stale_drop = 64 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_EARLY_REPORT);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);

  /* pressure also acts without a report */
  f->input.report = NULL;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_EARLY_REPORT);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);
}

static void
test_fault_pressure_and_holdoff (Fixture *f, gconstpointer data)
{
  (void) data;
  f->input.stats.actual = 4 * GIB;
  decide (f);                   /* first sample: no rate yet */
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);

  advance (f, 10);
  f->input.stats.major_fault += 999;   /* 99.9/s, under 100/s */
  f->input.stats.actual = 4 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.major_fault_rate, ==, 99);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);

  advance (f, 10);
  f->input.stats.major_fault += 1000;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_MAJOR_FAULTS);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);

  /* once deflated, the hold-off stops shrinking for 120 s */
  f->input.stats.actual = 8 * GIB;
  advance (f, 60);
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HOLDOFF);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);

  advance (f, 61);
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);

  /* swap-in: 2 MiB/s */
  advance (f, 10);
  f->input.stats.swap_in += 20 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SWAP_IN);
  g_assert_cmpuint (f->d.swap_in_rate_kib, ==, 2 * MIB);
}

static void
test_counter_reset (Fixture *f, gconstpointer data)
{
  (void) data;
  f->input.stats.major_fault = 1000000;
  decide (f);
  advance (f, 10);
  f->input.stats.major_fault = 10;     /* guest rebooted */
  decide (f);
  g_assert_cmpuint (f->d.major_fault_rate, ==, 0);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
}

static void
test_reboot (Fixture *f, gconstpointer data)
{
  (void) data;
  f->input.stats.actual = 4 * GIB;
  f->input.stats.major_fault = 1000;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);

  /* a rebooted guest gets its memory back, without waiting for a report */
  advance (f, 10);
  f->input.rebooted = TRUE;
  f->input.report = NULL;
  f->input.stats.major_fault = 0;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_REBOOT);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);

  /* the counters start over without counting as pressure, and no hold-off
   * delays shrinking once the new kernel reports; QEMU still says 4 GiB,
   * the old kernel's balloon, but the new kernel has all 8 GiB: the first
   * step down starts from there */
  advance (f, 10);
  f->input.rebooted = FALSE;
  f->input.report = f->report;
  f->input.stats.major_fault = 10;
  decide (f);
  g_assert_cmpuint (f->d.major_fault_rate, ==, 1);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
  g_assert_cmpuint (f->d.actual_kib, ==, 8 * GIB);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB - f->config.max_step_kib);

  /* once the new driver moves the balloon, its "actual" counts again */
  advance (f, 10);
  f->input.stats.actual = f->d.new_kib;
  decide (f);
  g_assert_cmpuint (f->d.actual_kib, ==, 8 * GIB - f->config.max_step_kib);
  advance (f, 10);
  f->input.stats.actual = 4 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.actual_kib, ==, 4 * GIB);
  f->input.stats.actual = 8 * GIB;

  /* already at the maximum: nothing to do */
  f->input.rebooted = TRUE;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_REBOOT);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
}

static void
test_format (Fixture *f, gconstpointer data)
{
  g_autofree gchar *line = NULL;

  (void) data;
  decide (f);
  line = kstaled_decision_format ("web1", &f->d);
  g_assert_nonnull (strstr (line, "domain=web1 action=inflate reason=shrink"));
  g_assert_nonnull (strstr (line, " target-kib=2097152 "));
  g_assert_nonnull (strstr (line, ": shrinking by 256 MiB toward the target"));
  g_assert_null (strchr (line, '\n'));

  for (KstaledReason r = KSTALED_REASON_NO_STATS; r <= KSTALED_REASON_SHRINK;
       r++)
    {
      g_autofree gchar *l = NULL;

      f->d.reason = r;
      l = kstaled_decision_format ("x", &f->d);
      g_assert_null (strstr (l, "unknown reason"));
      g_assert_cmpstr (kstaled_reason_to_string (r), !=, "unknown");
    }
}

static void
test_action_names (void)
{
  KstaledAction a;

  g_assert_true (kstaled_action_from_string ("inflate", &a));
  g_assert_cmpint (a, ==, KSTALED_ACTION_INFLATE);
  g_assert_true (kstaled_action_from_string (
    kstaled_action_to_string (KSTALED_ACTION_DEFLATE), &a));
  g_assert_cmpint (a, ==, KSTALED_ACTION_DEFLATE);
  g_assert_false (kstaled_action_from_string ("explode", &a));
}

#define ADD(path, fn) \
  g_test_add (path, Fixture, NULL, fixture_setup, fn, fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ADD ("/policy/estimate", test_estimate);
  ADD ("/policy/idle-age-selects-bucket", test_idle_age_selects_bucket);
  ADD ("/policy/shrink-in-steps", test_shrink_in_steps);
  ADD ("/policy/settling", test_settling);
  ADD ("/policy/hysteresis", test_hysteresis);
  ADD ("/policy/grow-at-once", test_grow_at_once);
  ADD ("/policy/clamp-to-max", test_clamp_to_max);
  ADD ("/policy/floor", test_floor);
  ADD ("/policy/active-floor", test_active_floor);
  ADD ("/policy/overhead", test_overhead);
  ADD ("/policy/swap-backed", test_swap_backed);
  ADD ("/policy/hostile-idle", test_hostile_idle);
  ADD ("/policy/missing-data", test_missing_data);
  ADD ("/policy/warming-up", test_warming_up);
  ADD ("/policy/early-report-pressure", test_early_report_pressure);
  ADD ("/policy/fault-pressure-and-holdoff", test_fault_pressure_and_holdoff);
  ADD ("/policy/counter-reset", test_counter_reset);
  ADD ("/policy/reboot", test_reboot);
  ADD ("/policy/format", test_format);
  g_test_add_func ("/policy/action-names", test_action_names);
  return g_test_run ();
}
