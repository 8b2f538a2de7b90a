/* Host arbiter tests: the parsers on recorded file contents, the host's
 * levels, deflation grants and the split of a shortfall. */
#include <glib/gstdio.h>
#include <string.h>

#include "kstaled-host.h"

#define MIB G_GUINT64_CONSTANT (1024)            /* in KiB */
#define GIB (1024 * MIB)

/* A 24 GiB Debian 12 host (/proc/meminfo, 6.1 kernel), trimmed after
 * SwapFree. */
static const char meminfo[] =
  "MemTotal:       24683664 kB\n"
  "MemFree:        19285384 kB\n"
  "MemAvailable:   23839300 kB\n"
  "Buffers:          100056 kB\n"
  "Cached:          3834828 kB\n"
  "SwapCached:            0 kB\n"
  "Active:          1502112 kB\n"
  "Inactive:        3186020 kB\n"
  "SwapTotal:             0 kB\n"
  "SwapFree:              0 kB\n";

/* /proc/pressure/memory of a host short of memory. */
static const char pressure[] =
  "some avg10=12.50 avg60=4.21 avg300=1.02 total=91234567\n"
  "full avg10=2.31 avg60=0.90 avg300=0.20 total=30123456\n";

static void
test_parse_meminfo (void)
{
  g_autoptr (GError) error = NULL;
  KstaledHostReading r = { 0 };

  g_assert_true (kstaled_host_parse_meminfo (meminfo, &r, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (r.total_kib, ==, 24683664);
  g_assert_cmpuint (r.available_kib, ==, 23839300);
}

static void
test_parse_meminfo_rejects (void)
{
  const char *bad[] = {
    "",
    "MemTotal:       24683664 kB\n",                  /* no MemAvailable */
    "MemTotal: 100 kB\nMemAvailable: 200 kB\n",        /* more than total */
    "MemTotal: 100 MB\nMemAvailable: 20 kB\n",         /* unit */
    "MemTotal: -100 kB\nMemAvailable: 20 kB\n",
    "MemTotal: 0 kB\nMemAvailable: 0 kB\n",
    "MemTotal: 99999999999999999999 kB\nMemAvailable: 2 kB\n",
    "MemTotalX: 100 kB\nMemAvailable: 20 kB\n",
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      KstaledHostReading r = { 0 };

      g_assert_false (kstaled_host_parse_meminfo (bad[i], &r, &error));
      g_assert_nonnull (error);
    }
}

static void
test_parse_pressure (void)
{
  g_autoptr (GError) error = NULL;
  KstaledHostReading r = { 0 };

  g_assert_true (kstaled_host_parse_pressure (pressure, &r, &error));
  g_assert_true (r.has_psi);
  g_assert_cmpuint (r.psi_some_permille, ==, 125);
  g_assert_cmpuint (r.psi_full_permille, ==, 23);

  g_assert_false (kstaled_host_parse_pressure ("some avg10=1.00\n", &r,
                                               &error));
  g_clear_error (&error);
  g_assert_false (kstaled_host_parse_pressure (
    "some avg10=nan avg60=0 avg300=0 total=0\n"
    "full avg10=0.00 avg60=0 avg300=0 total=0\n", &r, &error));
}

static const char no_cache[] = "anon 4096\ninactive_file 0\n";
static const char v2_cache[] =
  "anon 4294967296\nfile 2147483648\ninactive_file 1073741824\n";
static const char v1_cache[] =
  "cache 0\ninactive_file 0\ntotal_cache 2147483648\n"
  "total_inactive_file 1073741824\n";

static void
test_parse_cgroup (void)
{
  g_autoptr (GError) error = NULL;
  KstaledHostReading r = { 0 };

  /* machine.slice with memory.high 6 GiB below memory.max 8 GiB */
  g_assert_true (kstaled_host_parse_cgroup ("8589934592\n", "6442450944\n",
                                            "5368709120\n", no_cache, &r,
                                            &error));
  g_assert_cmpuint (r.total_kib, ==, 6 * GIB);
  g_assert_cmpuint (r.available_kib, ==, GIB);
  /* its 1 GiB of inactive page cache is no memory the VMs use: v2 ... */
  g_assert_true (kstaled_host_parse_cgroup ("8589934592\n", "6442450944\n",
                                            "5368709120\n", v2_cache, &r,
                                            &error));
  g_assert_cmpuint (r.available_kib, ==, 2 * GIB);
  /* ... and v1, whose hierarchical count is total_inactive_file */
  g_assert_true (kstaled_host_parse_cgroup ("8589934592\n", "6442450944\n",
                                            "5368709120\n", v1_cache, &r,
                                            &error));
  g_assert_cmpuint (r.available_kib, ==, 2 * GIB);
  /* over budget: nothing available */
  g_assert_true (kstaled_host_parse_cgroup ("max\n", "4294967296\n",
                                            "5368709120\n", no_cache, &r,
                                            &error));
  g_assert_cmpuint (r.available_kib, ==, 0);
  /* no limit is no budget */
  g_assert_false (kstaled_host_parse_cgroup ("max\n", "max\n", "1024\n",
                                             no_cache, &r, &error));
  g_clear_error (&error);
  g_assert_false (kstaled_host_parse_cgroup ("max\n", "1024\n", "max\n",
                                             no_cache, &r, &error));
  g_clear_error (&error);
  g_assert_false (kstaled_host_parse_cgroup ("12k\n", "max\n", "1\n",
                                             no_cache, &r, &error));
  g_clear_error (&error);
  /* a memory.stat without the cache's size is an error, not 0 */
  g_assert_false (kstaled_host_parse_cgroup ("1024\n", "max\n", "1\n",
                                             "anon 0\n", &r, &error));
  g_clear_error (&error);
  g_assert_false (kstaled_host_parse_cgroup ("1024\n", "max\n", "1\n",
                                             "inactive_file -1\n", &r,
                                             &error));
}

static void
test_read_cgroup_dir (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("kstaled-host-XXXXXX", &error);
  const char *names[] = { "memory.max", "memory.high", "memory.current",
                          "memory.stat", "memory.pressure" };
  const char *values[] = { "4294967296\n", "max\n", "3221225472\n",
                           no_cache, pressure };
  KstaledHostConfig config;
  KstaledHostReading r;

  g_assert_no_error (error);
  kstaled_host_config_init (&config);
  g_free (config.source);
  config.source = g_strdup (dir);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree gchar *path = g_build_filename (dir, names[i], NULL);

      g_assert_true (g_file_set_contents (path, values[i], -1, &error));
    }
  g_assert_true (kstaled_host_read (&config, &r, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (r.total_kib, ==, 4 * GIB);
  g_assert_cmpuint (r.available_kib, ==, GIB);
  g_assert_cmpuint (r.psi_full_permille, ==, 23);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree gchar *path = g_build_filename (dir, names[i], NULL);

      g_assert_cmpint (g_remove (path), ==, 0);
    }
  g_assert_false (kstaled_host_read (&config, &r, &error));
  g_assert_nonnull (error);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
  kstaled_host_config_clear (&config);
}

/* Files in @dir (a cgroup, transparent_hugepage); NULL values are
 * removed. */
static void
write_files (const char *dir, const char *const *names,
              const char *const *values, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      g_autofree gchar *path = g_build_filename (dir, names[i], NULL);

      if (values[i] != NULL)
        g_assert_true (g_file_set_contents (path, values[i], -1, NULL));
      else
        g_remove (path);
    }
}

static void
test_read_cgroup_v1 (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("kstaled-host-XXXXXX", &error);
  const char *names[] = { "memory.limit_in_bytes", "memory.usage_in_bytes",
                          "memory.stat", "memory.soft_limit_in_bytes" };
  /* machine.slice on a cgroup v1 host: 6 GiB limit, 5 GiB used of which
   * 1 GiB inactive page cache; then no limit (what v1 reads back for -1
   * on x86-64); then no limit but a soft limit of 5.5 GiB, the budget */
  const char *limited[] = { "6442450944\n", "5368709120\n", v1_cache, NULL };
  const char *unlimited[] = { "9223372036854771712\n", "5368709120\n",
                              v1_cache, "9223372036854771712\n" };
  const char *soft[] = { "9223372036854771712\n", "5368709120\n",
                         v1_cache, "5905580032\n" };
  const char *none[] = { NULL, NULL, NULL, NULL };
  KstaledHostConfig config;
  KstaledHostReading r;

  g_assert_no_error (error);
  kstaled_host_config_init (&config);
  g_free (config.source);
  config.source = g_strdup (dir);
  write_files (dir, names, limited, 4);
  g_assert_true (kstaled_host_read (&config, &r, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (r.total_kib, ==, 6 * GIB);
  g_assert_cmpuint (r.available_kib, ==, 2 * GIB);
  g_assert_false (r.has_psi);
  write_files (dir, names, soft, 4);
  g_assert_true (kstaled_host_read (&config, &r, &error));
  g_assert_cmpuint (r.total_kib, ==, 5 * GIB + GIB / 2);
  g_assert_cmpuint (r.available_kib, ==, GIB + GIB / 2);
  write_files (dir, names, unlimited, 4);
  g_assert_false (kstaled_host_read (&config, &r, &error));
  g_assert_nonnull (error);
  write_files (dir, names, none, 4);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
  kstaled_host_config_clear (&config);
}

static void
test_parse_thp (void)
{
  /* enabled, hugepages-2048kB/enabled (NULL: before 6.8), whether guest
   * RAM (madvised by QEMU) gets huge pages */
  const struct {
    const char *enabled, *pmd_enabled;
    gboolean huge;
  } cases[] = {
    { "always [madvise] never\n", "always [inherit] madvise never\n",
      TRUE },                                   /* Debian 12's defaults */
    { "always [madvise] never\n", "always inherit madvise [never]\n", FALSE },
    { "always [madvise] never\n", NULL, TRUE },
    { "[always] madvise never\n", NULL, TRUE },
    { "always madvise [never]\n", NULL, FALSE },
    { "always madvise [never]\n", "always [inherit] madvise never\n", FALSE },
    { "always madvise [never]\n", "always inherit [madvise] never\n", TRUE },
  };
  const char *bad[][2] = {
    { "always madvise never\n", NULL },          /* nothing selected */
    { "always [sometimes] never\n", NULL },
    { "always [inherit] never\n", NULL },        /* per size only */
    { "always [madvise] never\n", "[inherit\n" },
    { "", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      gboolean huge = !cases[i].huge;

      g_assert_true (kstaled_host_parse_thp (cases[i].enabled,
                                             cases[i].pmd_enabled, &huge,
                                             &error));
      g_assert_no_error (error);
      g_assert_cmpint (huge, ==, cases[i].huge);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      gboolean huge;

      g_assert_false (kstaled_host_parse_thp (bad[i][0], bad[i][1], &huge,
                                              &error));
      g_assert_nonnull (error);
    }
}

static void
test_check_thp_dir (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("kstaled-thp-XXXXXX", &error);
  g_autofree gchar *pmd = g_build_filename (dir, "hugepages-2048kB", NULL);
  const char *names[] = { "enabled", "hpage_pmd_size",
                          "hugepages-2048kB/enabled" };
  const char *huge[] = { "always [madvise] never\n", "2097152\n",
                         "always [inherit] madvise never\n" };
  const char *pmd_never[] = { "always [madvise] never\n", "2097152\n",
                              "always inherit madvise [never]\n" };
  const char *garbled[] = { "[madvise\n", "2097152\n", NULL };
  const char *none[] = { NULL, NULL, NULL };
  g_autofree gchar *warning = NULL;

  g_assert_no_error (error);
  g_assert_cmpint (g_mkdir (pmd, 0700), ==, 0);
  write_files (dir, names, huge, G_N_ELEMENTS (names));
  warning = kstaled_host_check_thp (dir);
  g_assert_nonnull (strstr (warning, "transparent huge pages are on"));
  g_assert_nonnull (strstr (warning, "/enabled to never"));
  g_clear_pointer (&warning, g_free);
  write_files (dir, names, pmd_never, G_N_ELEMENTS (names));
  g_assert_null (kstaled_host_check_thp (dir));
  /* A file the agent cannot read is said, not taken as "all is well". */
  write_files (dir, names, garbled, G_N_ELEMENTS (names));
  warning = kstaled_host_check_thp (dir);
  g_assert_nonnull (strstr (warning, "cannot tell"));
  write_files (dir, names, none, G_N_ELEMENTS (names));
  g_assert_cmpint (g_rmdir (pmd), ==, 0);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
  /* No THP in the kernel: no huge pages. */
  g_assert_null (kstaled_host_check_thp (dir));
}

static void
test_levels_and_grants (void)
{
  g_autoptr (KstaledHost) host = kstaled_host_new ();
  KstaledHostConfig config;
  KstaledHostReading r = { .total_kib = 10 * GIB };

  kstaled_host_config_init (&config);
  /* no reading: no limits */
  kstaled_host_begin_round (host, &config, NULL);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_UNKNOWN);
  g_assert_cmpuint (kstaled_host_grant (host, 100 * GIB), ==, 100 * GIB);
  g_assert_cmpuint (kstaled_host_free_permille (host), ==, 1000);

  r.available_kib = 3 * GIB;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_RELAXED);
  g_assert_cmpuint (kstaled_host_free_permille (host), ==, 300);
  /* 3 GiB less the 256 MiB reserve, shared by the round's deflations */
  g_assert_cmpuint (kstaled_host_grant (host, 2 * GIB), ==, 2 * GIB);
  g_assert_cmpuint (kstaled_host_grant (host, 2 * GIB), ==, 768 * MIB);
  g_assert_cmpuint (kstaled_host_grant (host, 1), ==, 0);

  r.available_kib = GIB;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_SHORT);
  /* relaxed again only 5 points above the 20 % */
  r.available_kib = 2 * GIB + 400 * MIB;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_SHORT);
  r.available_kib = 2 * GIB + 600 * MIB;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_RELAXED);
  r.available_kib = 2 * GIB + 400 * MIB;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_RELAXED);
  r.available_kib = GIB;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_SHORT);
  r.available_kib = 400 * MIB;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_CRITICAL);
  /* below the reserve: nothing to grant */
  r.available_kib = 200 * MIB;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpuint (kstaled_host_grant (host, MIB), ==, 0);

  /* PSI full at 1 % is critical however much is free */
  r.available_kib = 9 * GIB;
  r.has_psi = TRUE;
  r.psi_full_permille = 10;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_CRITICAL);
  config.psi_full_permille = 0;
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpint (kstaled_host_level (host), ==, KSTALED_HOST_RELAXED);
  kstaled_host_config_clear (&config);
}

static void
test_allocate_shortfall (void)
{
  /* a: 25 % long cold; b: 50 %; c: 50 % but shares 2000; d: opted out */
  KstaledVmRecord vms[] = {
    { .actual_kib = 4 * GIB, .long_cold_kib = GIB, .shares = 1000,
      .reclaimable_kib = 2 * GIB },
    { .actual_kib = 4 * GIB, .long_cold_kib = 2 * GIB, .shares = 1000,
      .reclaimable_kib = GIB },
    { .actual_kib = 4 * GIB, .long_cold_kib = 2 * GIB, .shares = 2000,
      .reclaimable_kib = GIB },
    { .actual_kib = 4 * GIB, .long_cold_kib = 4 * GIB, .shares = 0,
      .reclaimable_kib = 4 * GIB },
  };

  /* b first (coldest), then a (25 % at 1000 shares beats 50 % at 2000) */
  g_assert_cmpuint (kstaled_host_allocate_shortfall (vms, 4, 2 * GIB), ==, 0);
  g_assert_cmpuint (vms[1].take_kib, ==, GIB);
  g_assert_cmpuint (vms[0].take_kib, ==, GIB);
  g_assert_cmpuint (vms[2].take_kib, ==, 0);
  g_assert_cmpuint (vms[3].take_kib, ==, 0);
  /* more than all can give: the rest is left over */
  g_assert_cmpuint (kstaled_host_allocate_shortfall (vms, 4, 5 * GIB), ==,
                    GIB);
  g_assert_cmpuint (vms[2].take_kib, ==, GIB);
  g_assert_cmpuint (kstaled_host_allocate_shortfall (vms, 4, 0), ==, 0);
  g_assert_cmpuint (vms[1].take_kib, ==, 0);
}

static void
test_round_records (void)
{
  g_autoptr (KstaledHost) host = kstaled_host_new ();
  KstaledHostConfig config;
  /* 10 GiB host with 1 GiB available: 1 GiB short of 20 % */
  KstaledHostReading r = { .total_kib = 10 * GIB, .available_kib = GIB };
  KstaledVmRecord a = { .actual_kib = 4 * GIB, .long_cold_kib = GIB,
                        .shares = 1000, .reclaimable_kib = 3 * GIB };

  kstaled_host_config_init (&config);
  kstaled_host_record (host, "a", &a);
  kstaled_host_begin_round (host, &config, &r);
  g_assert_cmpuint (kstaled_host_lookup (host, "a")->take_kib, ==, GIB);
  /* recording keeps the round's result */
  a.actual_kib = 3 * GIB;
  kstaled_host_record (host, "a", &a);
  g_assert_cmpuint (kstaled_host_lookup (host, "a")->take_kib, ==, GIB);
  g_assert_cmpuint (kstaled_host_lookup (host, "a")->actual_kib, ==, 3 * GIB);
  /* a domain that records nothing for a round is forgotten */
  kstaled_host_begin_round (host, &config, &r);
  g_assert_nonnull (kstaled_host_lookup (host, "a"));
  kstaled_host_begin_round (host, &config, &r);
  g_assert_null (kstaled_host_lookup (host, "a"));
  kstaled_host_config_clear (&config);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/host/parse-meminfo", test_parse_meminfo);
  g_test_add_func ("/host/parse-meminfo-rejects", test_parse_meminfo_rejects);
  g_test_add_func ("/host/parse-pressure", test_parse_pressure);
  g_test_add_func ("/host/parse-cgroup", test_parse_cgroup);
  g_test_add_func ("/host/read-cgroup-dir", test_read_cgroup_dir);
  g_test_add_func ("/host/read-cgroup-v1", test_read_cgroup_v1);
  g_test_add_func ("/host/parse-thp", test_parse_thp);
  g_test_add_func ("/host/check-thp-dir", test_check_thp_dir);
  g_test_add_func ("/host/levels-and-grants", test_levels_and_grants);
  g_test_add_func ("/host/allocate-shortfall", test_allocate_shortfall);
  g_test_add_func ("/host/round-records", test_round_records);
  return g_test_run ();
}
