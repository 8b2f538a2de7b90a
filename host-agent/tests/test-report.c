/* Parser tests: valid replies, malformed JSON and hostile replies. */
#include <string.h>

#include "kstaled-report.h"

#define HIST "[8,8,4,4,2,2,1,0]"
#define CGROUP(path) \
  "{\"path\":\"" path "\",\"inode\":1234,\"scans\":40,\"stale\":50331648," \
  "\"memory-usage\":67108864,\"memory-limit\":134217728," \
  "\"idle-clean\":" HIST ",\"idle-dirty-file\":" HIST "," \
  "\"idle-dirty-swap\":" HIST "}"
#define HEADER \
  "\"qom-path\":\"/machine/peripheral/kstaled0/virtio-backend\"," \
  "\"scan-seconds\":1,\"stale-page-age\":5,\"reports\":12," \
  "\"dropped-reports\":0"
#define REPLY(cgroups) \
  "{\"return\":{" HEADER ",\"report-age-ms\":350,\"guest-scans\":40," \
  "\"cgroups\":[" cgroups "]},\"id\":\"libvirt-7\"}"

static KstaledReport *
parse (const char *json, GError **error)
{
  return kstaled_report_parse (json, strlen (json), error);
}

static void
expect_error (const char *json, KstaledReportError code)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledReport) report = parse (json, &error);

  g_assert_null (report);
  g_assert_error (error, KSTALED_REPORT_ERROR, (gint) code);
  g_test_message ("%s", error->message);
}

static void
test_valid (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledReport) r = parse (REPLY (CGROUP ("/work") ","
                                              CGROUP ("/")), &error);
  const KstaledCgroup *cg;

  g_assert_no_error (error);
  g_assert_nonnull (r);
  g_assert_cmpstr (r->qom_path, ==,
                   "/machine/peripheral/kstaled0/virtio-backend");
  g_assert_cmpuint (r->scan_seconds, ==, 1);
  g_assert_cmpuint (r->stale_page_age, ==, 5);
  g_assert_cmpuint (r->reports, ==, 12);
  g_assert_true (r->has_report);
  g_assert_cmpuint (r->report_age_ms, ==, 350);
  g_assert_cmpuint (r->guest_scans, ==, 40);
  g_assert_cmpuint (r->cgroups->len, ==, 2);
  cg = g_ptr_array_index (r->cgroups, 0);
  g_assert_cmpstr (cg->path, ==, "/work");
  g_assert_cmpuint (cg->inode, ==, 1234);
  g_assert_cmpuint (cg->stale, ==, 50331648);
  g_assert_true (cg->has_memory_limit);
  g_assert_cmpuint (cg->memory_limit, ==, 134217728);
  g_assert_cmpuint (cg->idle[KSTALED_IDLE_DIRTY_SWAP][2], ==, 4);
  /* bucket 2 (5 scans): 4 per kind per cgroup */
  g_assert_cmpuint (kstaled_report_idle_bytes (r, 2, 1u << KSTALED_IDLE_CLEAN),
                    ==, 8);
  g_assert_cmpuint (kstaled_report_idle_bytes (r, 2, 7), ==, 24);
}

static void
test_before_first_report (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledReport) r =
    parse ("{\"return\":{" HEADER ",\"cgroups\":[]}}", &error);

  g_assert_no_error (error);
  g_assert_false (r->has_report);
  g_assert_cmpuint (r->cgroups->len, ==, 0);
}

static void
test_no_limit (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledReport) r = parse (REPLY (
    "{\"path\":\"/\",\"inode\":1,\"scans\":1,\"stale\":0,\"memory-usage\":0,"
    "\"idle-clean\":" HIST ",\"idle-dirty-file\":" HIST ","
    "\"idle-dirty-swap\":" HIST ",\"future-field\":{\"x\":[1]}}"), &error);

  g_assert_no_error (error);
  g_assert_false (((KstaledCgroup *) g_ptr_array_index (r->cgroups, 0))
                  ->has_memory_limit);
}

static void
test_qmp_error (void)
{
  expect_error ("{\"id\":\"libvirt-3\",\"error\":{\"class\":\"GenericError\","
                "\"desc\":\"No kstaled device\"}}",
                KSTALED_REPORT_ERROR_NO_DEVICE);
  expect_error ("{\"id\":\"libvirt-3\",\"error\":{\"class\":\"CommandNotFound\","
                "\"desc\":\"The command query-kstaled has not been found\"}}",
                KSTALED_REPORT_ERROR_NO_DEVICE);
  expect_error ("{\"error\":{\"class\":\"GenericError\","
                "\"desc\":\"kstaled device is resetting\"}}",
                KSTALED_REPORT_ERROR_QMP);
  expect_error ("{\"error\":42}", KSTALED_REPORT_ERROR_QMP);
}

static void
test_malformed (void)
{
  const char *full = REPLY (CGROUP ("/"));
  g_autofree gchar *truncated = g_strndup (full, strlen (full) / 2);
  g_autoptr (GError) error = NULL;

  expect_error ("", KSTALED_REPORT_ERROR_MALFORMED);
  expect_error ("not json", KSTALED_REPORT_ERROR_MALFORMED);
  expect_error (truncated, KSTALED_REPORT_ERROR_MALFORMED);
  expect_error ("{\"return\":{}} trailing", KSTALED_REPORT_ERROR_MALFORMED);
  expect_error ("{\"return\":{},}", KSTALED_REPORT_ERROR_MALFORMED);
  expect_error ("null", KSTALED_REPORT_ERROR_MALFORMED);
  expect_error ("[1,2]", KSTALED_REPORT_ERROR_TYPE);
  g_assert_null (kstaled_report_parse (NULL, 0, &error));
  g_assert_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_MALFORMED);
}

static void
test_deep_nesting (void)
{
  GString *s = g_string_new ("{\"return\":");

  for (int i = 0; i < 100000; i++)
    g_string_append_c (s, '[');
  for (int i = 0; i < 100000; i++)
    g_string_append_c (s, ']');
  g_string_append_c (s, '}');
  expect_error (s->str, KSTALED_REPORT_ERROR_MALFORMED);
  g_string_free (s, TRUE);
}

static void
test_missing_fields (void)
{
  expect_error ("{\"id\":1}", KSTALED_REPORT_ERROR_MISSING);
  expect_error ("{\"return\":{\"scan-seconds\":1}}",
                KSTALED_REPORT_ERROR_MISSING);
  expect_error ("{\"return\":{" HEADER "}}", KSTALED_REPORT_ERROR_MISSING);
  expect_error ("{\"return\":{" HEADER ",\"guest-scans\":3,\"cgroups\":[]}}",
                KSTALED_REPORT_ERROR_MISSING);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1,\"stale\":0,"
                       "\"memory-usage\":0,\"idle-clean\":" HIST ","
                       "\"idle-dirty-file\":" HIST "}"),
                KSTALED_REPORT_ERROR_MISSING);
}

static void
test_wrong_types (void)
{
  expect_error ("{\"return\":[]}", KSTALED_REPORT_ERROR_TYPE);
  expect_error ("{\"return\":{\"qom-path\":7}}", KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("42"), KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":\"1\"}"),
                KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":true}"),
                KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1,\"stale\":0,"
                       "\"memory-usage\":0,\"idle-clean\":{}}"),
                KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1,\"stale\":0,"
                       "\"memory-usage\":0,\"idle-clean\":[1,1,1,1,1,1,1,"
                       "\"1\"]}"), KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1.5}"),
                KSTALED_REPORT_ERROR_TYPE);
  expect_error ("{\"return\":{" HEADER ",\"cgroups\":null}}",
                KSTALED_REPORT_ERROR_TYPE);
}

static void
test_hostile_numbers (void)
{
  /* json-c accepts NaN and Infinity as doubles even in strict mode */
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":NaN}"),
                KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":-Infinity}"),
                KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1e400}"),
                KSTALED_REPORT_ERROR_TYPE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":-1}"),
                KSTALED_REPORT_ERROR_RANGE);
  /* json-c saturates these to INT64_MAX / UINT64_MAX. */
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1,"
                       "\"stale\":9223372036854775808}"),
                KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1,"
                       "\"stale\":99999999999999999999999999999}"),
                KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1,\"stale\":0,"
                       "\"memory-usage\":-5}"), KSTALED_REPORT_ERROR_RANGE);
  expect_error ("{\"return\":{\"qom-path\":\"/x\",\"scan-seconds\":1,"
                "\"stale-page-age\":256}}", KSTALED_REPORT_ERROR_RANGE);
  expect_error ("{\"return\":{\"qom-path\":\"/x\",\"scan-seconds\":"
                "4294967296}}", KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1,\"stale\":0,"
                       "\"memory-usage\":0,\"idle-clean\":"
                       "[1,1,1,1,1,1,1,-1]}"), KSTALED_REPORT_ERROR_RANGE);
  /* 2^50 + 1: more bytes than any guest has. */
  expect_error (REPLY ("{\"path\":\"/\",\"inode\":1,\"scans\":1,\"stale\":0,"
                       "\"memory-usage\":1125899906842625}"),
                KSTALED_REPORT_ERROR_RANGE);
}

static void
test_histogram_shape (void)
{
#define CG_HIST(h) \
  "{\"path\":\"/\",\"inode\":1,\"scans\":1,\"stale\":0,\"memory-usage\":0," \
  "\"idle-clean\":" h ",\"idle-dirty-file\":" HIST ",\"idle-dirty-swap\":" \
  HIST "}"
  g_autoptr (GString) huge = g_string_new (NULL);

  expect_error (REPLY (CG_HIST ("[]")), KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CG_HIST ("[3,2,1,0,0,0,0]")),
                KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CG_HIST ("[3,2,1,0,0,0,0,0,0]")),
                KSTALED_REPORT_ERROR_TOO_LARGE);
  /* cumulative buckets never grow */
  expect_error (REPLY (CG_HIST ("[3,2,1,0,0,0,0,1]")),
                KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CG_HIST ("[1,2,2,2,2,2,2,2]")),
                KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CG_HIST ("[[1],1,1,1,1,1,1,1]")),
                KSTALED_REPORT_ERROR_TYPE);

  g_string_append (huge, "{\"return\":{" HEADER ",\"report-age-ms\":1,"
                   "\"guest-scans\":1,\"cgroups\":[{\"path\":\"/\","
                   "\"inode\":1,\"scans\":1,\"stale\":0,\"memory-usage\":0,"
                   "\"idle-clean\":[");
  for (int i = 0; i < 100000; i++)
    g_string_append (huge, "0,");
  g_string_append (huge, "0]}]}}");
  expect_error (huge->str, KSTALED_REPORT_ERROR_TOO_LARGE);
#undef CG_HIST
}

static void
test_too_many_cgroups (void)
{
  for (guint n = KSTALED_MAX_CGROUPS; n <= KSTALED_MAX_CGROUPS + 1; n++)
    {
      g_autoptr (GString) s = g_string_new ("{\"return\":{" HEADER
                                            ",\"cgroups\":[");
      g_autoptr (GError) error = NULL;
      g_autoptr (KstaledReport) r = NULL;

      for (guint i = 0; i < n; i++)
        g_string_append_printf (s, "%s" CGROUP ("/c"), i ? "," : "");
      g_string_append (s, "]}}");
      r = kstaled_report_parse (s->str, s->len, &error);
      if (n == KSTALED_MAX_CGROUPS)
        {
          g_assert_no_error (error);
          g_assert_cmpuint (r->cgroups->len, ==, n);
        }
      else
        {
          g_assert_null (r);
          g_assert_error (error, KSTALED_REPORT_ERROR,
                          KSTALED_REPORT_ERROR_TOO_LARGE);
        }
    }
}

static void
test_reply_size_limit (void)
{
  g_autoptr (GError) error = NULL;
  gsize len = KSTALED_MAX_REPLY_LEN + 1;
  g_autofree gchar *big = g_malloc (len + 1);

  memset (big, ' ', len);
  big[0] = '{';
  big[len - 1] = '}';
  big[len] = '\0';
  g_assert_null (kstaled_report_parse (big, len, &error));
  g_assert_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TOO_LARGE);
}

static void
test_hostile_strings (void)
{
  g_autoptr (GString) long_path = g_string_new (NULL);
  g_autoptr (GString) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledReport) r = NULL;

  expect_error (REPLY (CGROUP ("")), KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CGROUP ("relative")), KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CGROUP ("/a\\u0000b")), KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CGROUP ("/a\\nb")), KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CGROUP ("/a\\u001bb")), KSTALED_REPORT_ERROR_RANGE);
  expect_error (REPLY (CGROUP ("/\xff\xfe")), KSTALED_REPORT_ERROR_RANGE);

  g_string_append_c (long_path, '/');
  while (long_path->len <= KSTALED_MAX_PATH_LEN)
    g_string_append_c (long_path, 'a');
  reply = g_string_new (NULL);
  g_string_printf (reply, REPLY ("{\"path\":\"%s\"}"), long_path->str);
  expect_error (reply->str, KSTALED_REPORT_ERROR_TOO_LARGE);

  /* quotes, backslashes and non-ASCII are fine: they are escaped on output */
  r = parse (REPLY (CGROUP ("/a\\\"b\\\\c/\xc3\xa9t\xc3\xa9")), &error);
  g_assert_no_error (error);
  g_assert_cmpstr (((KstaledCgroup *) g_ptr_array_index (r->cgroups, 0))->path,
                   ==, "/a\"b\\c/\xc3\xa9t\xc3\xa9");
}

static void
test_early_report (void)
{
  g_autoptr (GError) error = NULL;
  const char *ok = "{\"qom-path\":\"/machine/x\",\"stale-drop\":16777216}";
  guint64 drop = 0;

  g_assert_true (kstaled_early_report_parse (ok, strlen (ok), &drop, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (drop, ==, 16777216);

  ok = "{\"qom-path\":\"/x\"}";
  g_assert_false (kstaled_early_report_parse (ok, strlen (ok), &drop, &error));
  g_assert_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_MISSING);
  g_clear_error (&error);
  ok = "{\"qom-path\":\"/x\",\"stale-drop\":-1}";
  g_assert_false (kstaled_early_report_parse (ok, strlen (ok), &drop, &error));
  g_assert_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_RANGE);
  g_clear_error (&error);
  g_assert_false (kstaled_early_report_parse ("[]", 2, &drop, &error));
  g_assert_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TYPE);
}

static void
test_buckets (void)
{
  g_assert_cmpint (kstaled_bucket_index (1), ==, 0);
  g_assert_cmpint (kstaled_bucket_index (5), ==, 2);
  g_assert_cmpint (kstaled_bucket_index (240), ==, 7);
  g_assert_cmpint (kstaled_bucket_index (3), ==, -1);
  g_assert_cmpint (kstaled_bucket_index (0), ==, -1);
}

/* qom-get of the balloon's guest-stats, recorded from QEMU 10.0 with a
 * 6.12 guest under libvirt 9.0, while the agent inflated its balloon; and
 * from the same guest before its statistics period was set, when every
 * counter is -1 (2^64 - 1). */
static void
test_guest_counters (void)
{
  static const char reply[] =
    "{\"return\":{\"stats\":{\"stat-htlb-pgalloc\":0,"
    "\"stat-swap-out\":248217600,\"stat-alloc-stalls\":350,"
    "\"stat-available-memory\":4096,\"stat-direct-reclaims\":64450560,"
    "\"stat-direct-scans\":267345920,\"stat-htlb-pgfail\":0,"
    "\"stat-free-memory\":5570560,\"stat-minor-faults\":154575,"
    "\"stat-major-faults\":0,\"stat-total-memory\":102850560,"
    "\"stat-oom-kills\":0,\"stat-async-reclaims\":183771136,"
    "\"stat-swap-in\":0,\"stat-async-scans\":338206720,"
    "\"stat-disk-caches\":2633728},\"last-update\":1796403840},"
    "\"id\":\"libvirt-577\"}";
  static const char old_guest[] =
    "{\"return\":{\"stats\":{\"stat-htlb-pgalloc\":18446744073709551615,"
    "\"stat-alloc-stalls\":18446744073709551615,"
    "\"stat-oom-kills\":18446744073709551615,"
    "\"stat-swap-in\":18446744073709551615},\"last-update\":0},"
    "\"id\":\"libvirt-482\"}";
  const char *bad[] = {
    "{\"return\": {\"last-update\": 0}}",
    "{\"return\": {\"stats\": {\"stat-oom-kills\": -3}}}",
    "{\"return\": {\"stats\": {\"stat-oom-kills\": 1.5}}}",
    "{\"return\": {\"stats\": {\"stat-alloc-stalls\": \"7\"}}}",
    "{\"error\": {\"class\": \"GenericError\", \"desc\": \"no balloon\"}}",
    "[]",
  };
  KstaledGuestCounters c;
  g_autoptr (GError) error = NULL;

  g_assert_true (kstaled_guest_counters_parse (reply, strlen (reply), &c,
                                               &error));
  g_assert_no_error (error);
  g_assert_true (c.has_oom_kills && c.has_alloc_stalls);
  g_assert_cmpuint (c.oom_kills, ==, 0);
  g_assert_cmpuint (c.alloc_stalls, ==, 350);

  g_assert_true (kstaled_guest_counters_parse (old_guest, strlen (old_guest),
                                               &c, &error));
  g_assert_false (c.has_oom_kills);
  g_assert_false (c.has_alloc_stalls);

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_clear_error (&error);
      g_assert_false (kstaled_guest_counters_parse (bad[i], strlen (bad[i]),
                                                    &c, &error));
      g_assert_nonnull (error);
      g_test_message ("%s", error->message);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/report/valid", test_valid);
  g_test_add_func ("/report/before-first-report", test_before_first_report);
  g_test_add_func ("/report/no-limit-unknown-members", test_no_limit);
  g_test_add_func ("/report/qmp-error", test_qmp_error);
  g_test_add_func ("/report/malformed", test_malformed);
  g_test_add_func ("/report/deep-nesting", test_deep_nesting);
  g_test_add_func ("/report/missing-fields", test_missing_fields);
  g_test_add_func ("/report/wrong-types", test_wrong_types);
  g_test_add_func ("/report/hostile-numbers", test_hostile_numbers);
  g_test_add_func ("/report/histogram-shape", test_histogram_shape);
  g_test_add_func ("/report/too-many-cgroups", test_too_many_cgroups);
  g_test_add_func ("/report/reply-size-limit", test_reply_size_limit);
  g_test_add_func ("/report/hostile-strings", test_hostile_strings);
  g_test_add_func ("/report/early-report", test_early_report);
  g_test_add_func ("/report/buckets", test_buckets);
  g_test_add_func ("/report/guest-counters", test_guest_counters);
  return g_test_run ();
}
