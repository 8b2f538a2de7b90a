/* Baseline modes on recorded inputs: oVirt MOM's balloon rules, Proxmox's
 * auto-ballooning and static, with the figures worked out by hand from
 * their published rules (docs/balloon-policy.md). */
#include <string.h>

#include "kstaled-baselines.h"

#define MIB G_GUINT64_CONSTANT (1024)            /* in KiB */
#define GIB (1024 * MIB)

typedef struct {
  KstaledPolicyConfig config;
  KstaledHostConfig host_config;
  KstaledHost *host;
  KstaledPolicyState state;
  KstaledPolicyInput input;
  KstaledDecision d;
} Fixture;

/* A host of @total_kib with @available_kib available. */
static void
host_round (Fixture *f, guint64 total_kib, guint64 available_kib)
{
  KstaledHostReading r = { .total_kib = total_kib,
                           .available_kib = available_kib };

  kstaled_host_begin_round (f->host, &f->host_config, &r);
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  (void) data;
  *f = (Fixture) { 0 };
  kstaled_policy_config_init (&f->config);
  f->config.min_memory_kib = 512 * MIB;
  kstaled_host_config_init (&f->host_config);
  f->host = kstaled_host_new ();
  f->input.domain = "vm";
  f->input.host = f->host;
  f->input.max_memory_kib = 4 * GIB;
  f->input.stats = (KstaledBalloonStats) {
    .has_actual = TRUE, .actual = 4 * GIB,
    .has_available = TRUE, .available = 4 * GIB,
    .has_unused = TRUE, .unused = GIB,
  };
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  (void) data;
  kstaled_host_free (f->host);
  kstaled_host_config_clear (&f->host_config);
}

static void
decide (Fixture *f)
{
  g_autofree gchar *line = NULL;

  kstaled_policy_decide (&f->config, &f->input, &f->state, &f->d);
  line = kstaled_decision_format (f->input.domain, &f->d);
  g_test_message ("%s", line);
}

static void
test_mom_shrink (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_MOM;
  /* host 15 % free: guest free share 0.20 * 0.15 / 0.20 = 15 %, so
   * balloon_min = 3 GiB used + 0.6 GiB; one step is 5 % of 4 GiB */
  host_round (f, 100 * GIB, 15 * GIB);
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_INFLATE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
  g_assert_cmpuint (f->d.new_kib, ==, (guint64) (4 * GIB * 0.95));
  g_assert_cmpuint (f->d.working_set_kib, ==, 3 * GIB);

  /* close to balloon_min the step is what is left: 3 GiB with 0.5 GiB
   * unused has balloon_min 2.5 + 0.45 GiB, above 95 % of 3 GiB */
  f->input.stats.actual = 3 * GIB;
  f->input.stats.unused = GIB / 2;
  memset (&f->state, 0, sizeof f->state);
  decide (f);
  g_assert_cmpuint (f->d.new_kib, ==, (guint64) (2.5 * GIB + 0.15 * 3 * GIB));
}

static void
test_mom_critical (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_MOM;
  /* host 4 % free: the guest's free share is 4 % - 5 % = -1 %, below its
   * used memory (it must swap); still 5 % per run */
  host_round (f, 100 * GIB, 4 * GIB);
  f->input.stats.actual = (guint64) (3.1 * GIB);
  f->input.stats.unused = (guint64) (0.1 * GIB);
  decide (f);
  g_assert_cmpuint (f->d.target_kib, ==,
                    (guint64) (3 * GIB - 0.01 * 3.1 * GIB));
  g_assert_cmpuint (f->d.new_kib, ==,
                    (guint64) (3 * GIB - 0.01 * 3.1 * GIB));
}

static void
test_mom_dead_band_and_grow (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_MOM;
  /* balloon_min 0.25 % under the balloon: not worth a change */
  host_round (f, 100 * GIB, 15 * GIB);
  f->input.stats.unused = (guint64) ((0.15 + 0.0025) * 4 * GIB);
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_HYSTERESIS);

  /* a host with 20 % free grows every guest by 5 % toward its maximum */
  host_round (f, 100 * GIB, 20 * GIB);
  memset (&f->state, 0, sizeof f->state);
  f->input.stats.actual = 3 * GIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_GROW);
  g_assert_cmpuint (f->d.new_kib, ==, (guint64) (3 * GIB * 1.05));
  memset (&f->state, 0, sizeof f->state);
  f->input.stats.actual = 4 * GIB - 20 * MIB;
  decide (f);
  g_assert_cmpuint (f->d.new_kib, ==, 4 * GIB);
  /* 10 MiB short of it is within the 0.25 % dead band: MOM stays there */
  memset (&f->state, 0, sizeof f->state);
  f->input.stats.actual = 4 * GIB - 10 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  memset (&f->state, 0, sizeof f->state);
  f->input.stats.actual = 4 * GIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  /* without a host reading, MOM sees no pressure */
  kstaled_host_begin_round (f->host, &f->host_config, NULL);
  memset (&f->state, 0, sizeof f->state);
  f->input.stats.actual = 3 * GIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_GROW);
}

static void
test_mom_averages (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_MOM;
  host_round (f, 100 * GIB, 15 * GIB);
  /* ten samples of 1 GiB unused, then one of 2 GiB: the average moves by
   * a tenth, so used is 2.9 GiB and balloon_min 2.9 + 0.6 GiB */
  for (int i = 0; i < KSTALED_MOM_SAMPLES; i++)
    decide (f);
  f->input.stats.unused = 2 * GIB;
  decide (f);
  g_assert_cmpuint (f->d.working_set_kib, ==, (guint64) (2.9 * GIB));
  /* a guest without free memory statistics is left alone */
  f->input.stats.has_unused = FALSE;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_NO_GUEST_STATS);
}

static void
test_mom_steps_from_current_balloon (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_MOM;
  host_round (f, 100 * GIB, 15 * GIB);
  /* nine samples at 4 GiB with 2 GiB unused, then the balloon is at 3 GiB
   * with 1 GiB unused: used is averaged (3.9 - 1.9 = 2 GiB), but the step
   * is 5 % of the current 3 GiB, not of the 3.9 GiB average, and the free
   * share 15 % of it: balloon_min 2 + 0.45 GiB, so 2.85 GiB */
  f->input.stats.unused = 2 * GIB;
  for (int i = 0; i < KSTALED_MOM_SAMPLES - 1; i++)
    decide (f);
  f->input.stats.actual = 3 * GIB;
  f->input.stats.unused = GIB;
  decide (f);
  g_assert_cmpuint (f->d.working_set_kib, ==, 2 * GIB);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_INFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, (guint64) (3 * GIB * 0.95));
}

static void
test_mom_guaranteed_memory (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_MOM;
  f->config.min_memory_kib = (guint64) (3.7 * GIB);
  host_round (f, 100 * GIB, 15 * GIB);
  /* balloon_min is the larger of the guarantee and used + free share:
   * 3.7 GiB against 3 + 0.6 GiB; 5 % steps stop there */
  decide (f);
  g_assert_cmpuint (f->d.new_kib, ==, (guint64) (4 * GIB * 0.95));
  f->input.stats.actual = (guint64) (3.8 * GIB);
  decide (f);
  g_assert_cmpuint (f->d.new_kib, ==, (guint64) (3.7 * GIB));
  f->input.stats.actual = (guint64) (3.7 * GIB);
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  /* guest_qos: a balloon below the guarantee goes back to it at once */
  f->input.stats.actual = 3 * GIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_DEFLATE);
  g_assert_cmpuint (f->d.new_kib, ==, (guint64) (3.7 * GIB));
}

static void
test_mom_grow_to_free_share (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_MOM;
  /* no pressure (30 % free): grow_guest's balloon_min is used plus the
   * free share of the current balloon, 0.20 * 0.30 / 0.20: a guest at
   * 2 GiB with nothing unused grows to 2 + 0.6 GiB, more than 5 % */
  host_round (f, 100 * GIB, 30 * GIB);
  f->input.stats.actual = 2 * GIB;
  f->input.stats.unused = 0;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_GROW);
  g_assert_cmpuint (f->d.new_kib, ==, (guint64) (2.6 * GIB));
}

/* pvestatd's goal with 16 GiB and @used_gib used, over three domains. */
static void
proxmox_round (KstaledVmRecord *vms, guint n, double used_gib)
{
  kstaled_proxmox_allocate (vms, n, 16 * GIB, (guint64) (used_gib * GIB));
}

static void
test_proxmox_allocate (void)
{
  KstaledVmRecord vms[3];
  const KstaledVmRecord start[3] = {
    /* comfortable: 1 GiB free > a quarter of its 2 GiB minimum */
    { .proxmox = TRUE, .actual_kib = 4 * GIB, .max_kib = 4 * GIB,
      .min_kib = 2 * GIB, .unused_kib = GIB, .shares = 1000 },
    /* pressed: 100 MiB free */
    { .proxmox = TRUE, .actual_kib = 2 * GIB, .max_kib = 4 * GIB,
      .min_kib = GIB, .unused_kib = 100 * MIB, .shares = 1000 },
    /* shares=0 opts out */
    { .proxmox = TRUE, .actual_kib = 4 * GIB, .max_kib = 4 * GIB,
      .min_kib = GIB, .unused_kib = 3 * GIB, .shares = 0 },
  };

  /* 14 of 16 GiB used, 1.2 GiB over 80 %: the comfortable domain gives
   * its 100 MiB for the round, which is progress, so the others keep theirs */
  memcpy (vms, start, sizeof vms);
  proxmox_round (vms, 3, 14);
  g_assert_true (vms[0].has_proxmox_target);
  g_assert_cmpuint (vms[0].proxmox_target_kib, ==, 4 * GIB - 100 * MIB);
  g_assert_false (vms[1].has_proxmox_target);
  g_assert_false (vms[2].has_proxmox_target);

  /* 8 GiB used, 4.8 GiB under 80 %: the pressed domain grows 100 MiB */
  memcpy (vms, start, sizeof vms);
  proxmox_round (vms, 3, 8);
  g_assert_false (vms[0].has_proxmox_target);
  g_assert_true (vms[1].has_proxmox_target);
  g_assert_cmpuint (vms[1].proxmox_target_kib, ==, 2 * GIB + 100 * MIB);
  g_assert_false (vms[2].has_proxmox_target);

  /* within 10 MiB of the goal: nothing moves */
  memcpy (vms, start, sizeof vms);
  kstaled_proxmox_allocate (vms, 3, 16 * GIB,
                            (guint64) (0.8 * 16 * GIB) - 5 * MIB);
  for (guint i = 0; i < 3; i++)
    g_assert_false (vms[i].has_proxmox_target);

  /* 400 MiB over 80 %, two comfortable domains at 3 GiB: the
   * share-proportional sizes are 1 GiB + 3.6 GiB * 1/3 (2.2 GiB) and
   * 1 GiB + 3.6 GiB * 2/3 (3.4 GiB); only the first is above its size, and
   * it moves by 100 MiB a round */
  {
    KstaledVmRecord two[2] = {
      { .proxmox = TRUE, .actual_kib = 3 * GIB, .max_kib = 4 * GIB,
        .min_kib = GIB, .unused_kib = GIB, .shares = 1000 },
      { .proxmox = TRUE, .actual_kib = 3 * GIB, .max_kib = 4 * GIB,
        .min_kib = GIB, .unused_kib = GIB, .shares = 2000 },
    };

    kstaled_proxmox_allocate (two, 2, 16 * GIB,
                              (guint64) (0.8 * 16 * GIB) + 400 * MIB);
    g_assert_true (two[0].has_proxmox_target);
    g_assert_cmpuint (two[0].proxmox_target_kib, ==, 3 * GIB - 100 * MIB);
    g_assert_false (two[1].has_proxmox_target);
  }
}

static void
test_proxmox_decide (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_PROXMOX;
  f->config.min_memory_kib = 2 * GIB;
  /* the first decision only records the domain */
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  /* the next round computes its target from the record */
  host_round (f, 16 * GIB, 2 * GIB);
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_SHRINK);
  g_assert_cmpuint (f->d.new_kib, ==, 4 * GIB - 100 * MIB);
  /* once there, it is not asked again */
  f->input.stats.actual = 4 * GIB - 100 * MIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
}

static void
test_static (Fixture *f, gconstpointer data)
{
  (void) data;
  f->config.mode = KSTALED_MODE_STATIC;
  f->input.stats.actual = 3 * GIB;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_STATIC);
  g_assert_cmpuint (f->d.new_kib, ==, 4 * GIB);
  f->input.stats.actual = 4 * GIB;
  decide (f);
  g_assert_cmpint (f->d.action, ==, KSTALED_ACTION_NONE);
  f->input.stats.has_actual = FALSE;
  decide (f);
  g_assert_cmpint (f->d.reason, ==, KSTALED_REASON_NO_STATS);
}

static void
test_mode_names (void)
{
  KstaledPolicyMode mode;

  for (KstaledPolicyMode m = KSTALED_MODE_KSTALED; m <= KSTALED_MODE_STATIC;
       m++)
    {
      g_assert_true (kstaled_mode_from_string (kstaled_mode_to_string (m),
                                               &mode));
      g_assert_cmpint (mode, ==, m);
    }
  g_assert_false (kstaled_mode_from_string ("ballooning", &mode));
}

#define ADD(path, fn) \
  g_test_add (path, Fixture, NULL, fixture_setup, fn, fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ADD ("/baselines/mom-shrink", test_mom_shrink);
  ADD ("/baselines/mom-critical", test_mom_critical);
  ADD ("/baselines/mom-dead-band-and-grow", test_mom_dead_band_and_grow);
  ADD ("/baselines/mom-averages", test_mom_averages);
  ADD ("/baselines/mom-steps-from-current-balloon",
       test_mom_steps_from_current_balloon);
  ADD ("/baselines/mom-guaranteed-memory", test_mom_guaranteed_memory);
  ADD ("/baselines/mom-grow-to-free-share", test_mom_grow_to_free_share);
  g_test_add_func ("/baselines/proxmox-allocate", test_proxmox_allocate);
  ADD ("/baselines/proxmox-decide", test_proxmox_decide);
  ADD ("/baselines/static", test_static);
  g_test_add_func ("/baselines/mode-names", test_mode_names);
  return g_test_run ();
}
