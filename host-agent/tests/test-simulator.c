/* Trace-driven simulator of the kstaled policy with its default settings.
 *
 * A model guest holds regions of anonymous memory, each touched every
 * period seconds (0: never).  The balloon's size bounds what stays resident;
 * the guest reclaims the regions touched least often first, and a page of
 * a reclaimed region comes back (a swap-in) when it is touched, evicting
 * another.  Its kstaled histogram counts resident pages by the time since
 * their last touch (uniform phases), its early reports carry the stale
 * memory that touches woke up, and it runs out of memory when the regions
 * touched every poll do not fit for GRACE_POLLS polls in a row (before,
 * its swap absorbs them).  Traces change the regions over time.
 *
 * A guest starts as a long-running one does: its scans are long past the
 * cold age.  A trace may swap to zram, where a swapped-out page keeps a
 * compressed residue in guest memory, and may put the guest on a host the
 * arbiter sees as relaxed, short or critical, changing between phases.
 * For each trace the policy runs every 10 s and the test asserts:
 *   - never below the floor: the balloon never leaves the guest less than
 *     min-memory, nor, GRACE_POLLS after a change, less than its memory
 *     touched every poll; no OOM kill;
 *   - convergence: after each change, the balloon stays within 5 % of the
 *     maximum of where it ends up after the trace's converge_polls (15
 *     minutes; 20 after a working-set change, whose swap-ins hold the
 *     policy off until they calm down; 40 for a burst every 10 minutes,
 *     which the cold age takes
 *     up to four bursts to learn);
 *   - no limit cycle: no inflate/deflate reversal once converged (but
 *     with a leak), and at most the trace's max_reversals in all (2 per
 *     working set change; 3 to learn a burst every 10 minutes);
 *   - refaults: in the settled part of each phase, swap-ins stay under the
 *     0.2 %/min promotion target of the working set (but on a critical
 *     host). */
#include <string.h>

#include "kstaled-policy.h"

#define MIB 1024.0                      /* in KiB */
#define GIB (1024 * MIB)
#define POLL_SECONDS 10
#define MAX_REGIONS 4
/* Kernel, page tables and the free-page reserve: never reclaimable. */
#define RESERVE_KIB (64 * MIB)
#define PROMOTION_TARGET_PPM 2000.0
/* Polls a guest can live with its hot memory partly swapped out: the
 * policy sees the swap-ins one poll later and acts the poll after. */
#define GRACE_POLLS 3
/* The guest has been up this long when the policy first sees it. */
#define UPTIME_S 3600
#define KSTALED_DEFAULT_CRITICAL_PERCENT 5

typedef struct {
  double size_kib;
  double period_s;                      /* 0: never touched */
} Region;

typedef struct {
  guint start_s;
  Region regions[MAX_REGIONS];
  double leak_kib_per_min;              /* region 0 grows */
  /* The host arbiter sees a 64 GiB host with this much available; 0: no
   * host arbiter (in every phase of the trace). */
  guint host_free_percent;
} Phase;

typedef struct {
  const char *name;
  guint length_s;
  const Phase *phases;
  guint n_phases;
  guint converge_polls;
  guint max_reversals;                  /* per phase */
  /* The guest's swap keeps this much of what it swaps out in its memory
   * (zram); 0: swap on a disk. */
  guint zram_residue_percent;
} Trace;

typedef struct {
  Region regions[MAX_REGIONS];
  double resident[MAX_REGIONS];
  double residue;                       /* zram's share of a swapped page */
  double swap_in_kib;
  guint64 oom_kills;
  guint short_polls;                    /* in a row without the hot set */
  double stale_drop_kib;
} Guest;

static double
ages_idle (const Region *r, double resident, double age_s)
{
  if (r->period_s == 0)
    return resident;
  return age_s >= r->period_s ? 0 : resident * (1 - age_s / r->period_s);
}

/* Reclaims until the resident pages and zram's residue of the swapped-out
 * ones fit in @capacity, regions touched least often first. */
static void
reclaim (Guest *g, double capacity)
{
  double resident = 0, total = 0;

  for (guint i = 0; i < MAX_REGIONS; i++)
    {
      resident += g->resident[i];
      total += g->regions[i].size_kib;
    }
  /* resident + residue x (total - resident) <= capacity */
  capacity = MAX ((capacity - g->residue * total) / (1 - g->residue), 0);
  while (resident > capacity + 1)
    {
      int victim = -1;

      for (guint i = 0; i < MAX_REGIONS; i++)
        if (g->resident[i] > 0 &&
            (victim < 0 || g->regions[i].period_s == 0 ||
             (g->regions[victim].period_s != 0 &&
              g->regions[i].period_s > g->regions[victim].period_s)))
          victim = (int) i;
      if (victim < 0)
        return;
      {
        double take = MIN (g->resident[victim], resident - capacity);

        g->resident[victim] -= take;
        resident -= take;
      }
    }
}

static double
stale_kib (const Guest *g, double age_s)
{
  double stale = 0;

  for (guint i = 0; i < MAX_REGIONS; i++)
    stale += ages_idle (&g->regions[i], g->resident[i], age_s);
  return stale;
}

/* The guest's next POLL_SECONDS with @capacity KiB for its pages. */
static void
run_guest (Guest *g, double capacity, double stale_age_s)
{
  double hot = 0, before;

  reclaim (g, capacity);
  before = stale_kib (g, stale_age_s);
  for (guint i = 0; i < MAX_REGIONS; i++)
    {
      const Region *r = &g->regions[i];
      double missing = r->size_kib - g->resident[i], back;

      if (r->period_s == 0)
        continue;
      if (r->period_s <= POLL_SECONDS)
        hot += r->size_kib;
      back = missing * MIN (1.0, POLL_SECONDS / r->period_s);
      g->swap_in_kib += back;
      g->resident[i] += back;
    }
  g->short_polls = hot > capacity ? g->short_polls + 1 : 0;
  if (g->short_polls >= GRACE_POLLS)
    g->oom_kills++;
  /* Stale pages touched this poll wake up: an early report's drop. */
  g->stale_drop_kib = MAX (before - stale_kib (g, stale_age_s), 0);
  reclaim (g, capacity);
}

static void
fill_report (const Guest *g, KstaledReport *report)
{
  KstaledCgroup *cg = g_ptr_array_index (report->cgroups, 0);

  memset (cg->idle, 0, sizeof cg->idle);
  for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
    cg->idle[KSTALED_IDLE_DIRTY_SWAP][b] =
      (guint64) (stale_kib (g, (double) kstaled_bucket_scans[b] *
                               report->scan_seconds) * 1024);
}

typedef struct {
  guint64 actual_kib;
  KstaledAction action;
  double swap_in_kib;
  double working_set_kib;               /* the model's: touched regions */
} Poll;

static void
set_phase (Guest *g, const Phase *phase)
{
  for (guint i = 0; i < MAX_REGIONS; i++)
    {
      g->regions[i] = phase->regions[i];
      g->resident[i] = MIN (g->resident[i], g->regions[i].size_kib);
    }
}

static GArray *
simulate (const Trace *t, const KstaledPolicyConfig *config, guint64 max_kib)
{
  g_autoptr (GArray) polls = g_array_new (FALSE, TRUE, sizeof (Poll));
  g_autoptr (KstaledReport) report = g_new0 (KstaledReport, 1);
  KstaledPolicyState state = { 0 };
  KstaledPolicyInput input = { 0 };
  KstaledDecision d = { 0 };
  Guest g = { 0 };
  guint64 actual = max_kib, stale_age_scans = 5;
  guint phase = 0;
  g_autoptr (KstaledHost) host = kstaled_host_new ();
  KstaledHostConfig host_config;
  KstaledHostReading reading = { .total_kib = (guint64) (64 * GIB) };

  kstaled_host_config_init (&host_config);

  report->cgroups = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (report->cgroups, g_new0 (KstaledCgroup, 1));
  report->has_report = TRUE;
  report->scan_seconds = 1;
  g.residue = t->zram_residue_percent / 100.0;
  set_phase (&g, &t->phases[0]);
  for (guint i = 0; i < MAX_REGIONS; i++)
    g.resident[i] = g.regions[i].size_kib;

  for (guint now = 0; now < t->length_s; now += POLL_SECONDS)
    {
      Poll p = { 0 };
      double ws = 0;

      if (phase + 1 < t->n_phases && now >= t->phases[phase + 1].start_s)
        set_phase (&g, &t->phases[++phase]);
      g.regions[0].size_kib += t->phases[phase].leak_kib_per_min *
                               POLL_SECONDS / 60;
      run_guest (&g, (double) actual - RESERVE_KIB,
                 (double) stale_age_scans * report->scan_seconds);
      fill_report (&g, report);
      report->guest_scans = (UPTIME_S + now) / MAX (report->scan_seconds, 1);
      reading.available_kib = reading.total_kib / 100 *
                              t->phases[phase].host_free_percent;
      kstaled_host_begin_round (host, &host_config, &reading);

      input = (KstaledPolicyInput) {
        .domain = t->name,
        .host = t->phases[phase].host_free_percent ? host : NULL,
        .report = report,
        .max_memory_kib = max_kib,
        .now_us = (gint64) (now + 1000) * G_USEC_PER_SEC,
        .early_stale_drop = g.stale_drop_kib >= 16 * MIB
                            ? (guint64) (g.stale_drop_kib * 1024) : 0,
        .counters = { .has_oom_kills = TRUE, .oom_kills = g.oom_kills,
                      .has_alloc_stalls = TRUE },
      };
      {
        double used = RESERVE_KIB;

        for (guint i = 0; i < MAX_REGIONS; i++)
          used += g.resident[i] +
                  g.residue * (g.regions[i].size_kib - g.resident[i]);
        input.stats = (KstaledBalloonStats) {
          .has_actual = TRUE, .actual = actual,
          .has_available = TRUE, .available = actual,
          .has_unused = TRUE,
          .unused = (guint64) MAX ((double) actual - used, 0),
          .has_swap_in = TRUE, .swap_in = (guint64) g.swap_in_kib,
          .has_major_fault = TRUE,
        };
      }
      kstaled_policy_decide (config, &input, &state, &d);
      if (g_test_verbose ())
        {
          g_autofree gchar *line = kstaled_decision_format (t->name, &d);

          g_test_message ("t=%u %s", now, line);
        }
      /* The device takes the settings the agent gives it. */
      if (d.scan_seconds != 0)
        {
          report->scan_seconds = d.scan_seconds;
          stale_age_scans = d.stale_page_age;
        }
      actual = d.new_kib;
      for (guint i = 0; i < MAX_REGIONS; i++)
        if (g.regions[i].period_s != 0)
          ws += g.regions[i].size_kib;
      p = (Poll) { .actual_kib = actual, .action = d.action,
                   .swap_in_kib = g.swap_in_kib, .working_set_kib = ws };
      g_array_append_val (polls, p);
      g_assert_cmpuint (g.oom_kills, ==, 0);
    }
  kstaled_host_config_clear (&host_config);
  return g_steal_pointer (&polls);
}

static void
check_trace (const Trace *t)
{
  KstaledPolicyConfig config;
  const guint64 max_kib = (guint64) (4 * GIB);
  g_autoptr (GArray) polls = NULL;
  guint total_reversals = 0;

  kstaled_policy_config_init (&config);
  config.min_memory_kib = (guint64) (512 * MIB);
  config.swap_backed_reclaim_percent = 100 - t->zram_residue_percent;
  polls = simulate (t, &config, max_kib);

  for (guint ph = 0; ph < t->n_phases; ph++)
    {
      guint first = t->phases[ph].start_s / POLL_SECONDS;
      guint end = ph + 1 < t->n_phases
                  ? t->phases[ph + 1].start_s / POLL_SECONDS : polls->len;
      guint settled = first + t->converge_polls;
      const Poll *last = &g_array_index (polls, Poll, end - 1);
      const Poll *from;
      KstaledAction previous = KSTALED_ACTION_NONE;
      guint reversals = 0;
      double minutes, rate_ppm;

      g_assert_cmpuint (settled, <, end);
      for (guint i = first; i < end; i++)
        {
          const Poll *p = &g_array_index (polls, Poll, i);
          double hot = 0;

          for (guint r = 0; r < MAX_REGIONS; r++)
            if (t->phases[ph].regions[r].period_s != 0 &&
                t->phases[ph].regions[r].period_s <= POLL_SECONDS)
              hot += t->phases[ph].regions[r].size_kib;
          /* never below the floor */
          g_assert_cmpuint (p->actual_kib, >=, config.min_memory_kib);
          if (i >= first + GRACE_POLLS)
            g_assert_cmpfloat ((double) p->actual_kib, >=, hot + RESERVE_KIB);
          if (p->action != KSTALED_ACTION_NONE)
            {
              if (previous != KSTALED_ACTION_NONE && p->action != previous)
                {
                  reversals++;
                  /* no limit cycle; a leak changes the working set all
                   * the time */
                  if (t->phases[ph].leak_kib_per_min == 0)
                    g_assert_cmpuint (i, <, settled);
                }
              previous = p->action;
            }
          /* converged: within 5 % of the end of the phase, unless the
           * phase leaks (then the balloon follows the leak) */
          if (i >= settled && t->phases[ph].leak_kib_per_min == 0)
            g_assert_cmpfloat (ABS ((double) p->actual_kib -
                                     (double) last->actual_kib), <=,
                               0.05 * (double) max_kib);
        }
      from = &g_array_index (polls, Poll, settled);
      minutes = (double) (end - 1 - settled) * POLL_SECONDS / 60;
      rate_ppm = (last->swap_in_kib - from->swap_in_kib) * 1e6 /
                 last->working_set_kib / minutes;
      g_test_message ("%s phase %u: %u reversals, settled at %.0f MiB of "
                      "%.0f MiB, promotion %.0f ppm/min", t->name, ph,
                      reversals, last->actual_kib / MIB, max_kib / MIB,
                      rate_ppm);
      g_assert_cmpuint (reversals, <=, t->max_reversals);
      /* a critical host takes memory whatever it costs the guest */
      if (t->phases[ph].host_free_percent == 0 ||
          t->phases[ph].host_free_percent >= KSTALED_DEFAULT_CRITICAL_PERCENT)
        g_assert_cmpfloat (rate_ppm, <, PROMOTION_TARGET_PPM);
      total_reversals += reversals;
    }
  g_assert_cmpuint (total_reversals, <=, t->max_reversals * t->n_phases);
}

/* 1 GiB hot, 512 MiB touched every 5 minutes, 2 GiB never. */
#define STEADY_REGIONS \
  { { 1 * GIB, 5 }, { 512 * MIB, 300 }, { 2 * GIB, 0 }, { 0, 0 } }

static void
test_steady (void)
{
  static const Phase phases[] = { { 0, STEADY_REGIONS, 0, 0 } };
  static const Trace t = { "steady", 2 * 3600, phases, 1, 90, 2, 0 };

  check_trace (&t);
}

static void
test_relaxed_host (void)
{
  /* a host with half its memory free takes only what was untouched for
   * 8 minutes: the 2 GiB never touched, not the 512 MiB touched every 5 */
  static const Phase phases[] = { { 0, STEADY_REGIONS, 0, 50 } };
  static const Trace t = { "relaxed-host", 2 * 3600, phases, 1, 90, 2, 0 };

  check_trace (&t);
}

static void
test_critical_host (void)
{
  /* a host with 3 % free takes all but the hot memory and 32 MiB */
  static const Phase phases[] = { { 0, STEADY_REGIONS, 0, 3 } };
  static const Trace t = { "critical-host", 2 * 3600, phases, 1, 90, 2, 0 };

  check_trace (&t);
}

static void
test_phase_change (void)
{
  /* after an hour the idle 2 GiB become hot and the hot 1 GiB idle */
  static const Phase phases[] = {
    { 0, STEADY_REGIONS, 0, 0 },
    { 3600, { { 1 * GIB, 0 }, { 512 * MIB, 300 }, { 2 * GIB, 5 }, { 0, 0 } },
      0, 0 },
  };
  static const Trace t = { "phase-change", 2 * 3600, phases, 2, 120, 2, 0 };

  check_trace (&t);
}

static void
test_slow_leak (void)
{
  /* the hot set grows by 1 MiB a minute for three hours */
  static const Phase phases[] = {
    { 0, { { 512 * MIB, 5 }, { 256 * MIB, 300 }, { 2 * GIB, 0 }, { 0, 0 } },
      1 * MIB, 0 },
  };
  static const Trace t = { "slow-leak", 3 * 3600, phases, 1, 90, 2, 0 };

  check_trace (&t);
}

static void
test_burst (void)
{
  /* a batch job reads 1 GiB every 10 minutes, beside 1 GiB hot: the cold
   * age has to learn to keep it */
  static const Phase phases[] = {
    { 0, { { 1 * GIB, 5 }, { 1 * GIB, 600 }, { 1 * GIB, 0 }, { 0, 0 } },
      0, 0 },
  };
  static const Trace t = { "burst", 4 * 3600, phases, 1, 240, 3, 0 };

  check_trace (&t);
}

static void
test_zram (void)
{
  /* the steady guest swapping to zram, which keeps half of each page it
   * swaps out: the idle memory is worth half as much to the host, and the
   * residue must not push the hot set out */
  static const Phase phases[] = { { 0, STEADY_REGIONS, 0, 0 } };
  static const Trace t = { "zram", 2 * 3600, phases, 1, 90, 2, 50 };

  check_trace (&t);
}

static void
test_host_changes (void)
{
  /* the host goes from relaxed (50 % free) to short (10 %) and back: the
   * short host takes memory cold for the adaptive age, the relaxed one
   * gives back what was not cold for its 8 minutes */
  static const Phase phases[] = {
    { 0, STEADY_REGIONS, 0, 50 },
    { 2400, STEADY_REGIONS, 0, 10 },
    { 4800, STEADY_REGIONS, 0, 50 },
  };
  static const Trace t = { "host-changes", 7200, phases, 3, 90, 2, 0 };

  check_trace (&t);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/simulator/steady", test_steady);
  g_test_add_func ("/simulator/relaxed-host", test_relaxed_host);
  g_test_add_func ("/simulator/critical-host", test_critical_host);
  g_test_add_func ("/simulator/phase-change", test_phase_change);
  g_test_add_func ("/simulator/slow-leak", test_slow_leak);
  g_test_add_func ("/simulator/burst", test_burst);
  g_test_add_func ("/simulator/zram", test_zram);
  g_test_add_func ("/simulator/host-changes", test_host_changes);
  return g_test_run ();
}
