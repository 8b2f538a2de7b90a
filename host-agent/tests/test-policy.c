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
  /* Scans of 1 s and a fixed 5 s cold age: the buckets are plain. */
  f->config.scan_seconds = 1;
  f->config.cold_age = f->config.min_cold_age = 5;
  f->config.max_cold_age = 240;
  f->config.headroom_percent = 0;
  f->config.headroom_kib = 0;
  f->report = g_new0 (KstaledReport, 1);
  f->report->cgroups = g_ptr_array_new_with_free_func (g_free);
  f->report->has_report = TRUE;
  f->report->scan_seconds = 1;
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

/* Time passes, and the guest scans at its pace. */
static void
advance (Fixture *f, guint seconds)
{
  f->input.now_us += (gint64) seconds * G_USEC_PER_SEC;
  f->report->guest_scans += seconds / MAX (f->report->scan_seconds, 1);
}

/* A balloon of @kib that leaves the guest no free memory: swap-ins and
 * faults are pressure. */
static void
squeeze (Fixture *f, guint64 kib)
{
  f->input.stats.actual = kib;
  f->input.stats.available = kib;
  f->input.stats.unused = 0;
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
test_cold_age_selects_bucket (Fixture *f, gconstpointer data)
{
  guint bucket;

  (void) data;
  f->config.cold_age = 30;
  decide (f);
  g_assert_cmpuint (f->d.cold_age, ==, 30);
  g_assert_cmpuint (f->d.idle_kib, ==, 2 * GIB);
  g_assert_cmpuint (f->d.working_set_kib, ==, 4 * GIB);
  /* the device scanning every 2 s: 30 s is 15 scans */
  f->report->scan_seconds = 2;
  decide (f);
  g_assert_cmpuint (f->d.cold_age_scans, ==, 15);
  g_assert_cmpuint (f->d.idle_kib, ==, 3 * GIB);
  /* an age between buckets takes the older one */
  memset (&f->state, 0, sizeof f->state);
  f->config.cold_age = 20;
  f->report->scan_seconds = 1;
  decide (f);
  g_assert_cmpuint (f->d.cold_age, ==, 30);
  g_assert_cmpuint (kstaled_cold_bucket (120, 4), ==, 4);
  g_assert_cmpuint (kstaled_cold_bucket (121, 4), ==, 5);
  g_assert_cmpuint (kstaled_cold_bucket (100000, 4), ==, KSTALED_N_BUCKETS - 1);
  /* only a bucket at least that old covers an age */
  g_assert_true (kstaled_covering_bucket (480, 2, &bucket));
  g_assert_cmpuint (bucket, ==, KSTALED_N_BUCKETS - 1);
  g_assert_false (kstaled_covering_bucket (481, 2, &bucket));
}

static void
test_device_config (Fixture *f, gconstpointer data)
{
  g_autofree gchar *command = NULL;

  (void) data;
  f->config.scan_seconds = 4;
  f->config.cold_age = 120;
  f->config.max_cold_age = 960;
  decide (f);
  g_assert_cmpuint (f->d.scan_seconds, ==, 4);
  g_assert_cmpuint (f->d.stale_page_age, ==, 30);
  command = kstaled_device_config_command (&f->d, f->report);
  g_assert_cmpstr (command, ==, "{\"execute\":\"kstaled-set-config\","
                   "\"arguments\":{\"scan-seconds\":4,\"stale-page-age\":30}}");
  f->report->scan_seconds = 4;
  f->report->stale_page_age = 30;
  g_assert_null (kstaled_device_config_command (&f->d, f->report));
  /* the baselines leave the device alone */
  f->config.mode = KSTALED_MODE_MOM;
  f->report->scan_seconds = 1;
  decide (f);
  g_assert_null (kstaled_device_config_command (&f->d, f->report));
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
      if (actual == 2 * GIB)
        continue;
      /* the step is seen done: a whole scan after it comes first */
      f->input.stats.actual = actual;
      decide (f);
      g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
      g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_AWAITING_SCAN);
      advance (f, 10);
    }
  g_assert_not_reached ();
}

static void
test_step_awaits_scan (Fixture *f, gconstpointer data)
{
  (void) data;
  f->input.stats.actual = 8 * GIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);

  /* the balloon got there during scan 101 (100 were done): scan 102, the
   * first to run wholly at the new size, has to report first */
  f->report->guest_scans = 101;
  f->input.stats.actual = f->d.new_kib;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_AWAITING_SCAN);
  g_assert_cmpuint (f->d.evidence_scans, ==, 103);
  f->report->guest_scans = 102;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_AWAITING_SCAN);
  f->report->guest_scans = 103;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);

  /* a guest whose scan count stands still is not shrunk further */
  f->input.stats.actual = f->d.new_kib;
  for (int i = 0; i < 10; i++)
    {
      f->input.now_us += 60 * G_USEC_PER_SEC;
      decide (f);
      g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_AWAITING_SCAN);
    }

  /* growing ends the wait: the step's evidence is moot */
  f->input.now_us += 10 * G_USEC_PER_SEC;
  f->input.stats.unused = 0;
  f->input.stats.swap_in += 20 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_false (f->state.step_pending);
}

static void
test_settling (Fixture *f, gconstpointer data)
{
  guint64 hysteresis_kib, min_memory_kib;

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

  /* what is left of the step is no reason to forget it, however small */
  hysteresis_kib = f->config.hysteresis_kib;
  f->config.hysteresis_kib = 8 * GIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SETTLING);
  f->config.hysteresis_kib = hysteresis_kib;

  /* nor is a target that has come up to the balloon (a floor here, as
   * the host arbiter may set it): the guest is still carrying it out */
  min_memory_kib = f->config.min_memory_kib;
  f->config.min_memory_kib = 8 * GIB - 100 * MIB;
  decide (f);
  g_assert_cmpuint (f->d.target_kib, ==, 8 * GIB - 100 * MIB);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SETTLING);
  f->config.min_memory_kib = min_memory_kib;

  /* within the slack counts as there: after a whole scan at that size,
   * the next step is relative to it */
  advance (f, 1);
  f->input.stats.actual = 8 * GIB - 256 * MIB + 4;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_AWAITING_SCAN);
  advance (f, 2);
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB - 512 * MIB + 4);

  /* a step the guest cannot finish is given up after the settle time, and
   * what it did is judged as a finished one's */
  advance (f, KSTALED_SETTLE_SECONDS - 1);
  f->input.stats.actual = 8 * GIB - 300 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SETTLING);
  advance (f, 1);
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_AWAITING_SCAN);
  advance (f, 2);
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB - 556 * MIB);

  /* pressure replaces the step under way by its deflation */
  f->input.stats.unused = 0;
  f->input.early_stale_drop = 64 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_EARLY_REPORT);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpuint (f->state.request_kib, ==, f->d.new_kib);
}

static void
test_deflation_under_way (Fixture *f, gconstpointer data)
{
  (void) data;
  /* an emergency deflates to the maximum ... */
  f->input.stats.actual = 3 * GIB;
  f->input.stats.available = 3 * GIB;
  f->input.stats.unused = 0;
  f->input.early_stale_drop = 768 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_true (f->d.emergency);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);

  /* ... and a target between the balloon and the maximum (a floor of
   * 4 GiB here) does not cut that deflation short */
  advance (f, 1);
  f->input.early_stale_drop = 0;
  f->input.stats.actual = 3 * GIB + 16 * MIB;
  f->config.min_memory_kib = 4 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.target_kib, >, 3 * GIB + 16 * MIB);
  g_assert_cmpuint (f->d.target_kib, <, 8 * GIB);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SETTLING);
  g_assert_cmpuint (f->d.settle_kib, ==, 8 * GIB);

  /* nor does pressure asking for less */
  f->input.early_stale_drop = 64 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);

  /* nor do missing guest statistics */
  advance (f, 1);
  f->input.early_stale_drop = 0;
  f->input.stats.has_available = FALSE;
  f->input.stats.has_unused = FALSE;
  f->input.stats.has_usable = FALSE;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SETTLING);
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
  /* zram keeping half of what it swaps out gives the host half back */
  f->config.swap_backed_reclaim_percent = 50;
  decide (f);
  g_assert_cmpuint (f->d.idle_kib, ==, 2 * GIB);
  f->config.swap_backed_reclaim_percent = 100;
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
  f->input.stats.available = 3 * GIB;
  f->input.stats.unused = 0;
  f->input.early_stale_drop = 63 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_cmpint (f->d.reason, !=, KSTALED_REASON_EARLY_REPORT);

  /* grow by twice the shortfall (headroom is 0 here), not to the maximum */
  memset (&f->state, 0, sizeof f->state);
  f->input.early_stale_drop = 64 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_EARLY_REPORT);
  g_assert_false (f->d.emergency);
  g_assert_cmpuint (f->d.shortfall_kib, ==, 64 * MIB);
  g_assert_cmpuint (f->d.new_kib, ==, 3 * GIB + 128 * MIB);
  /* it needed at least what it had and what it lacked */
  g_assert_cmpuint (f->d.soft_floor_kib, ==, 3 * GIB + 64 * MIB);

  /* pressure also acts without a report, with the fixed headroom */
  f->config.headroom_kib = 10 * MIB;
  f->input.report = NULL;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_EARLY_REPORT);
  g_assert_cmpuint (f->d.new_kib, ==, 3 * GIB + 138 * MIB);

  /* a quarter of the guest going stale at once is an emergency */
  f->input.early_stale_drop = 768 * MIB * BYTES_PER_KIB;
  decide (f);
  g_assert_true (f->d.emergency);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);

  /* a guest with the free memory to take it in is not short */
  f->input.early_stale_drop = 64 * MIB * BYTES_PER_KIB;
  f->input.stats.unused = 64 * MIB + 10 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpuint (f->d.shortfall_kib, ==, 64 * MIB);
  f->input.stats.unused = 64 * MIB + 10 * MIB - 1;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_EARLY_REPORT);

  /* nothing to grow at the maximum */
  f->input.stats.actual = 8 * GIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_NO_REPORT);
}

static void
test_fault_pressure_and_holdoff (Fixture *f, gconstpointer data)
{
  (void) data;
  squeeze (f, 4 * GIB);
  f->config.headroom_percent = 0;
  decide (f);                   /* first sample: no rate yet */
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);

  advance (f, 10);
  f->input.stats.major_fault += 999;   /* 99.9/s, under 100/s */
  f->input.stats.actual = 4 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.major_fault_rate, ==, 99);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_AWAITING_SCAN);

  /* 100/s: grow by twice the 1000 faults' 4 KiB pages */
  advance (f, 10);
  f->input.stats.major_fault += 1000;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_MAJOR_FAULTS);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, 4 * GIB + 2 * 1000 * KSTALED_FAULT_KIB);

  /* once grown, the hold-off stops shrinking for 120 s... */
  f->input.stats.actual = f->d.new_kib;
  advance (f, 60);
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HOLDOFF);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  /* ...and the soft floor (what it had and lacked, less 1 % of the
   * maximum per 2 minutes) holds the target up */
  g_assert_cmpuint (f->d.floor_kib, ==, 4 * GIB + 1000 * KSTALED_FAULT_KIB);
  advance (f, 61);
  decide (f);
  g_assert_cmpuint (f->d.floor_kib, ==, 4 * GIB + 1000 * KSTALED_FAULT_KIB
                    - 8 * GIB / 100);
  g_assert_cmpuint (f->d.target_kib, ==, f->d.floor_kib);

  /* swap-in: 2 MiB/s, again within the pressure memory: twice the hold-off */
  advance (f, 10);
  f->input.stats.swap_in += 20 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SWAP_IN);
  g_assert_cmpuint (f->d.swap_in_rate_kib, ==, 2 * MIB);
  g_assert_cmpuint (f->d.new_kib, ==, f->d.actual_kib + 40 * MIB);
  g_assert_cmpuint (f->state.pressure_repeats, ==, 1);
  g_assert_cmpint (f->state.holdoff_until_us, ==,
                   f->input.now_us + 240 * G_USEC_PER_SEC);
}

static void
test_holdoff_ends_on_evidence (Fixture *f, gconstpointer data)
{
  (void) data;
  squeeze (f, 4 * GIB);
  decide (f);
  advance (f, 10);
  f->input.stats.swap_in += 20 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SWAP_IN);
  f->input.stats.actual = f->d.new_kib;

  /* the 120 s are up, but the guest still swaps in, under the pressure
   * rate but over the promotion target (0.2 %/min of its 2 GiB working
   * set: 4.1 MiB/min): the hold-off goes on */
  for (int i = 0; i < 13; i++)
    {
      advance (f, 10);
      f->input.stats.swap_in += MIB;
      decide (f);
      g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HOLDOFF);
    }
  g_assert_cmpint (f->d.holdoff_left_us, ==, 0);
  /* a scan later, with a trickle under the target, is not yet a whole
   * scan after the last swap-ins: the one under way then may have started
   * before them */
  advance (f, 1);
  f->input.stats.swap_in += 16;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HOLDOFF);
  advance (f, 1);
  f->input.stats.swap_in += 16;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
}

static void
test_pressure_memory (Fixture *f, gconstpointer data)
{
  (void) data;
  squeeze (f, 4 * GIB);
  decide (f);
  /* pressure coming back is a repeat while remembered, and the memory
   * doubles with each repeat (1800, 3600, 7200 s) */
  for (guint i = 0; i < 3; i++)
    {
      /* the gaps: 10 s, then 1700 and 3400 s (each under the memory
       * of the pressure before, over the 1800 s it starts with) */
      if (i > 0)
        {
          advance (f, 1700 * i - 10);
          decide (f);
        }
      advance (f, 10);
      f->input.stats.swap_in += 20 * MIB;
      decide (f);
      g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SWAP_IN);
      g_assert_cmpuint (f->state.pressure_repeats, ==, i);
      g_assert_cmpint (f->state.holdoff_until_us - f->input.now_us, ==,
                       (gint64) (120u << i) * G_USEC_PER_SEC);
      f->input.stats.actual = 4 * GIB;
    }
  /* forgotten after 7200 s without pressure: the soft floor is gone and
   * the next pressure starts over */
  advance (f, 7200);
  decide (f);
  g_assert_cmpuint (f->d.soft_floor_kib, ==, 0);
  advance (f, 10);
  f->input.stats.swap_in += 20 * MIB;
  decide (f);
  g_assert_cmpuint (f->state.pressure_repeats, ==, 0);
}

static void
test_emergencies (Fixture *f, gconstpointer data)
{
  (void) data;
  f->input.stats.actual = 4 * GIB;
  f->input.counters = (KstaledGuestCounters) {
    .has_oom_kills = TRUE, .has_alloc_stalls = TRUE,
  };
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);

  /* stalls while the balloon inflates are the balloon driver's own */
  advance (f, 1);
  f->input.counters.alloc_stalls += 1000;
  decide (f);
  g_assert_cmpint (f->d.action, !=, KSTALED_ACTION_DEFLATE);

  /* at rest, 50 stalls a second are an emergency */
  f->state.request_kib = 0;
  advance (f, 2);
  f->input.counters.alloc_stalls += 100;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_ALLOC_STALLS);
  g_assert_true (f->d.emergency);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);

  /* so is an OOM kill */
  advance (f, 1);
  f->input.counters.oom_kills++;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_OOM_KILL);
  g_assert_cmpuint (f->d.new_kib, ==, 8 * GIB);

  /* a guest that stops sending the counter and starts again from 0 does
   * not make one */
  advance (f, 1);
  f->input.counters.has_oom_kills = FALSE;
  decide (f);
  f->input.counters.has_oom_kills = TRUE;
  f->input.counters.oom_kills = 0;
  advance (f, 1);
  decide (f);
  g_assert_cmpint (f->d.reason, !=, KSTALED_REASON_OOM_KILL);
}

static void
test_adaptive_cold_age (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.cold_age = 30;
  f->config.adapt_interval = 300;
  f->input.stats.actual = 4 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.cold_age, ==, 30);

  /* a calm interval: one bucket younger */
  advance (f, 300);
  decide (f);
  advance (f, 1);
  decide (f);
  g_assert_cmpuint (f->d.cold_age, ==, 15);

  /* promotions over twice 0.2 %/min of the 3 GiB working set (at 15 s):
   * 5 minutes at 0.5 %/min are about 77 MiB; under the pressure rate */
  for (int i = 0; i < 30; i++)
    {
      advance (f, 10);
      f->input.stats.swap_in += 77 * MIB / 30;
      decide (f);
      g_assert_cmpint (f->d.reason, !=, KSTALED_REASON_SWAP_IN);
    }
  advance (f, 1);
  decide (f);
  g_assert_cmpuint (f->d.cold_age, ==, 30);

  /* pressure (no free memory to take the swap-ins in): at once one
   * bucket older, up to the maximum */
  f->config.max_cold_age = 60;
  f->input.stats.unused = 0;
  advance (f, 10);
  f->input.stats.swap_in += 100 * MIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SWAP_IN);
  advance (f, 10);
  decide (f);
  g_assert_cmpuint (f->d.cold_age, ==, 60);
  f->input.stats.swap_in += 100 * MIB;
  advance (f, 10);
  decide (f);
  advance (f, 10);
  decide (f);
  g_assert_cmpuint (f->d.cold_age, ==, 60);
}

static void
test_host_levels (Fixture *f, gconstpointer data)
{
  g_autoptr (KstaledHost) host = kstaled_host_new ();
  KstaledHostConfig host_config;
  KstaledHostReading r = { .total_kib = 100 * GIB };

  (void) data;
  kstaled_host_config_init (&host_config);
  f->input.domain = "vm";
  f->input.host = host;
  f->config.max_step_kib = 8 * GIB;
  /* memory idle for 60 s (1 GiB) is what a relaxed host takes */
  f->config.relaxed_cold_age = 60;

  /* relaxed: only the long-cold memory goes */
  r.available_kib = 50 * GIB;
  kstaled_host_begin_round (host, &host_config, &r);
  decide (f);
  g_assert_cmpint (f->d.host_level, ==, KSTALED_HOST_RELAXED);
  g_assert_cmpuint (f->d.target_kib, ==, 5 * GIB);
  g_assert_cmpuint (f->d.new_kib, ==, 5 * GIB);

  /* short by 5 GiB of its 20 %: the domain gives that much of the 6 GiB
   * cold for its cold age, from its balloon as the last round saw it */
  r.available_kib = 15 * GIB;
  kstaled_host_begin_round (host, &host_config, &r);
  g_assert_cmpuint (kstaled_host_lookup (host, "vm")->take_kib, ==, 5 * GIB);
  decide (f);
  g_assert_cmpint (f->d.host_level, ==, KSTALED_HOST_SHORT);
  g_assert_cmpuint (f->d.target_kib, ==, 3 * GIB);

  /* critical: working set plus the critical headroom */
  r.available_kib = 4 * GIB;
  kstaled_host_begin_round (host, &host_config, &r);
  decide (f);
  g_assert_cmpint (f->d.host_level, ==, KSTALED_HOST_CRITICAL);
  g_assert_cmpuint (f->d.target_kib, ==, 2 * GIB + 32 * MIB);

  /* growing is granted only as far as the host backs it, and the round's
   * grants add up: 1 GiB available less the 256 MiB reserve, on a 5 GiB
   * host (relaxed) */
  {
    const guint64 none[KSTALED_N_BUCKETS] = { 0 };

    set_idle (f, none);
  }
  f->input.stats.actual = 2 * GIB;
  f->input.stats.available = 2 * GIB;
  f->input.stats.unused = 0;
  r.total_kib = 5 * GIB;
  r.available_kib = GIB + 256 * MIB;
  kstaled_host_begin_round (host, &host_config, &r);
  f->config.headroom_kib = 2 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.target_kib, ==, 4 * GIB);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, 3 * GIB);
  g_assert_cmpuint (f->d.wanted_kib, ==, 4 * GIB);
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HOST_FULL);
  /* an emergency too */
  f->input.counters.has_oom_kills = TRUE;
  decide (f);
  f->input.counters.oom_kills = 1;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HOST_FULL);
  kstaled_host_config_clear (&host_config);
}

static void
test_relaxed_beyond_buckets (Fixture *f, gconstpointer data)
{
  const guint64 idle[KSTALED_N_BUCKETS] = {
    5 * GIB, 5 * GIB, 4 * GIB, 3 * GIB, 2 * GIB, GIB, GIB, GIB
  };
  g_autoptr (KstaledHost) host = kstaled_host_new ();
  KstaledHostConfig host_config;
  KstaledHostReading r = { .total_kib = 100 * GIB, .available_kib = 50 * GIB };

  (void) data;
  kstaled_host_config_init (&host_config);
  f->input.domain = "vm";
  f->input.host = host;
  f->config.max_step_kib = 8 * GIB;
  f->config.relaxed_cold_age = 480;
  set_idle (f, idle);
  kstaled_host_begin_round (host, &host_config, &r);

  /* at 1 s scans the oldest bucket is 240 s: nothing is known to have been
   * idle for 480 s, and a relaxed host takes only the free 2 GiB */
  decide (f);
  g_assert_cmpint (f->d.host_level, ==, KSTALED_HOST_RELAXED);
  g_assert_cmpuint (f->d.target_kib, ==, 6 * GIB);
  g_assert_cmpuint (f->d.new_kib, ==, 6 * GIB);
  /* at 2 s scans 240 scans are 480 s: that bucket's 1 GiB goes too */
  memset (&f->state, 0, sizeof f->state);
  f->report->scan_seconds = 2;
  decide (f);
  g_assert_cmpuint (f->d.target_kib, ==, 5 * GIB);
  g_assert_cmpuint (f->d.new_kib, ==, 5 * GIB);
  kstaled_host_config_clear (&host_config);
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
  g_assert_cmpint (f->d.reason, !=, KSTALED_REASON_MAJOR_FAULTS);
  g_assert_cmpint (f->d.action, !=, KSTALED_ACTION_DEFLATE);
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

  for (KstaledReason r = KSTALED_REASON_NO_STATS; r <= KSTALED_REASON_STATIC;
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
  ADD ("/policy/cold-age-selects-bucket", test_cold_age_selects_bucket);
  ADD ("/policy/device-config", test_device_config);
  ADD ("/policy/shrink-in-steps", test_shrink_in_steps);
  ADD ("/policy/step-awaits-scan", test_step_awaits_scan);
  ADD ("/policy/settling", test_settling);
  ADD ("/policy/deflation-under-way", test_deflation_under_way);
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
  ADD ("/policy/holdoff-ends-on-evidence", test_holdoff_ends_on_evidence);
  ADD ("/policy/pressure-memory", test_pressure_memory);
  ADD ("/policy/emergencies", test_emergencies);
  ADD ("/policy/adaptive-cold-age", test_adaptive_cold_age);
  ADD ("/policy/host-levels", test_host_levels);
  ADD ("/policy/relaxed-beyond-buckets", test_relaxed_beyond_buckets);
  ADD ("/policy/counter-reset", test_counter_reset);
  ADD ("/policy/reboot", test_reboot);
  ADD ("/policy/format", test_format);
  g_test_add_func ("/policy/action-names", test_action_names);
  return g_test_run ();
}
