/* Status tests: the state file, the kstaled-ctl table, the Prometheus text
 * and the metrics endpoint over a real socket. */
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>

#include "kstaled-autocleanups.h"
#include "kstaled-metrics.h"
#include "kstaled-status.h"

#define MIB (G_GUINT64_CONSTANT (1024) * 1024)

/* A cgroup path a hostile guest might send (the parser already refuses
 * control characters): quote, brace and backslash must not end the label. */
#define HOSTILE_PATH "/evil\\\"}\\\\x"
#define REPLY \
  "{\"return\":{\"qom-path\":\"/machine/peripheral/kstaled0/virtio-backend\"," \
  "\"scan-seconds\":1,\"stale-page-age\":5,\"reports\":12," \
  "\"dropped-reports\":1,\"report-age-ms\":350,\"guest-scans\":40," \
  "\"cgroups\":[" \
  "{\"path\":\"/work\",\"inode\":7,\"scans\":40,\"stale\":50331648," \
  "\"memory-usage\":268435456,\"memory-limit\":536870912," \
  "\"idle-clean\":[209715200,209715200,104857600,52428800,0,0,0,0]," \
  "\"idle-dirty-file\":[1048576,0,0,0,0,0,0,0]," \
  "\"idle-dirty-swap\":[0,0,0,0,0,0,0,0]}," \
  "{\"path\":\"" HOSTILE_PATH "\",\"inode\":8,\"scans\":40,\"stale\":0," \
  "\"memory-usage\":4096," \
  "\"idle-clean\":[0,0,0,0,0,0,0,0],\"idle-dirty-file\":[0,0,0,0,0,0,0,0]," \
  "\"idle-dirty-swap\":[0,0,0,0,0,0,0,0]}]}}"

typedef struct {
  GPtrArray *domains;
  KstaledConfig *config;
  gchar *dir;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  KstaledDomainStatus *managed = kstaled_domain_status_new ("web1");
  KstaledDomainStatus *left_alone = kstaled_domain_status_new ("plain");
  KstaledPolicyConfig config;
  KstaledPolicyState state = { 0 };
  KstaledPolicyInput input = { 0 };

  (void) data;
  managed->device = KSTALED_DEVICE_PRESENT;
  managed->report = kstaled_report_parse (REPLY, strlen (REPLY), &error);
  g_assert_no_error (error);
  kstaled_policy_config_init (&config);
  config.min_memory_kib = 128 * 1024;
  config.headroom_kib = 0;
  /* the report's 1 s scans, and a cold age of 5 of them */
  config.scan_seconds = 1;
  config.cold_age = config.min_cold_age = 5;
  input = (KstaledPolicyInput) {
    .report = managed->report,
    .max_memory_kib = 512 * 1024,
    .now_us = G_USEC_PER_SEC,
    .stats = { .has_actual = TRUE, .actual = 512 * 1024,
               .has_available = TRUE, .available = 500 * 1024,
               .has_unused = TRUE, .unused = 100 * 1024 },
  };
  kstaled_policy_decide (&config, &input, &state, &managed->decision);
  g_assert_cmpint (managed->decision.action, ==, KSTALED_ACTION_INFLATE);
  managed->has_decision = TRUE;
  managed->decision_time = G_GINT64_CONSTANT (1764763200) * G_USEC_PER_SEC;
  managed->has_action = TRUE;
  managed->action = managed->decision;
  managed->action_time = managed->decision_time;
  managed->actions_total[KSTALED_ACTION_INFLATE] = 3;
  managed->polls_total = 10;
  managed->early_reports_total = 2;

  left_alone->device = KSTALED_DEVICE_ABSENT;
  f->domains = g_ptr_array_new_with_free_func (
    (GDestroyNotify) kstaled_domain_status_free);
  g_ptr_array_add (f->domains, managed);
  g_ptr_array_add (f->domains, left_alone);
  f->config = kstaled_config_new ();
  f->config->dry_run = TRUE;
  f->dir = g_dir_make_tmp ("test-status-XXXXXX", &error);
  g_assert_no_error (error);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_autofree gchar *state = g_build_filename (f->dir, "run", "state.json",
                                              NULL);
  g_autofree gchar *run = g_build_filename (f->dir, "run", NULL);

  (void) data;
  g_unlink (state);
  g_rmdir (run);
  g_rmdir (f->dir);
  g_free (f->dir);
  kstaled_config_free (f->config);
  g_ptr_array_unref (f->domains);
}

static json_object *
path (json_object *obj, const char *const *keys)
{
  for (; *keys; keys++)
    {
      json_object *next = NULL;

      if (g_ascii_isdigit (**keys))
        next = json_object_array_get_idx (obj, (gsize) atoi (*keys));
      else
        g_assert_true (json_object_object_get_ex (obj, *keys, &next));
      g_assert_nonnull (next);
      obj = next;
    }
  return obj;
}

#define PATH(obj, ...) path (obj, (const char *const[]) { __VA_ARGS__, NULL })

static void
test_state_file (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *file = g_build_filename (f->dir, "run", "state.json",
                                             NULL);
  g_autofree gchar *dir = g_path_get_dirname (file);
  g_autofree gchar *text = NULL;
  g_autoptr (json_object) state = NULL;
  g_autoptr (json_object) written =
    kstaled_status_to_json (f->domains, f->config, g_get_real_time ());
  const KstaledDomainStatus *web1 = g_ptr_array_index (f->domains, 0);
  json_object *dom, *action;
  GStatBuf st;

  (void) data;
  /* The directory is created, the file written whole, for the agent's
   * group only, and compact: one line, paths without escaped slashes. */
  g_assert_true (kstaled_status_write_file (file, written, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0750);
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0640);
  g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
  g_assert_null (strchr (text, '\n'));
  g_assert_nonnull (strstr (text, "\"path\":\"/work\""));
  state = kstaled_status_read_file (file, &error);
  g_assert_no_error (error);
  g_assert_true (json_object_get_boolean (PATH (state, "dry-run")));
  g_assert_cmpint (json_object_get_int (PATH (state, "poll-interval")), ==,
                   10);
  dom = PATH (state, "domains", "0");
  g_assert_cmpstr (json_object_get_string (PATH (dom, "name")), ==, "web1");
  g_assert_cmpstr (json_object_get_string (PATH (dom, "device")), ==,
                   "present");
  g_assert_cmpstr (json_object_get_string (PATH (dom, "report", "cgroups",
                                                 "0", "path")), ==, "/work");
  g_assert_cmpuint (json_object_get_uint64 (PATH (dom, "report", "cgroups",
                                                  "0", "idle-clean", "2")),
                    ==, 100 * MIB);
  /* the totals of both cgroups */
  g_assert_cmpuint (json_object_get_uint64 (PATH (dom, "report",
                                                  "cgroup-count")), ==, 2);
  g_assert_cmpuint (json_object_get_uint64 (PATH (dom, "report", "stale")),
                    ==, 48 * MIB);
  g_assert_cmpuint (json_object_get_uint64 (PATH (dom, "report",
                                                  "idle-dirty-file", "0")),
                    ==, MIB);
  g_assert_cmpstr (json_object_get_string (PATH (dom, "last-action",
                                                 "action")), ==, "inflate");
  g_assert_cmpstr (json_object_get_string (PATH (dom, "last-action",
                                                 "time")), ==,
                   "2025-12-03T12:00:00Z");
  g_assert_cmpuint (json_object_get_uint64 (PATH (dom, "decision",
                                                  "target-kib")), ==,
                    web1->decision.target_kib);
  g_assert_cmpuint (json_object_get_uint64 (PATH (dom, "counters",
                                                  "inflations")), ==, 3);
  dom = PATH (state, "domains", "1");
  g_assert_cmpstr (json_object_get_string (PATH (dom, "device")), ==,
                   "absent");
  g_assert_true (json_object_object_get_ex (dom, "last-action", &action));
  g_assert_null (action);
}

static void
test_state_file_rejects (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *file = g_build_filename (f->dir, "state.json", NULL);
  g_autoptr (json_object) state = NULL;

  (void) data;
  g_assert_true (g_file_set_contents (file, "{\"version\":1,\"domains\":[]}",
                                      -1, NULL));
  state = kstaled_status_read_file (file, &error);
  g_assert_null (state);
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  g_unlink (file);
}

#define NOW (G_GINT64_CONSTANT (1764763200) * G_USEC_PER_SEC)

static void
test_table (Fixture *f, gconstpointer data)
{
  g_autoptr (json_object) state = kstaled_status_to_json (f->domains,
                                                          f->config, NOW);
  g_autofree gchar *table = kstaled_status_format_table (state, NOW +
                                                         5 * G_USEC_PER_SEC);
  g_auto (GStrv) lines = g_strsplit (table, "\n", -1);

  (void) data;
  g_test_message ("\n%s", table);
  g_assert_cmpstr (lines[0], ==, "State of 2025-12-03T12:00:00Z, 5 s old "
                   "(poll interval 10 s), dry run: no balloon is changed");
  g_assert_cmpstr (lines[1], ==, "");
  g_assert_true (g_str_has_prefix (lines[2], "DOMAIN"));
  /* web1: balloon 512 MiB, shrinking toward its target */
  g_assert_true (g_regex_match_simple ("^web1 +present +512 +[0-9]+ ",
                                       lines[3], 0, 0));
  g_assert_nonnull (strstr (lines[3], "inflate 512 -> "));
  g_assert_nonnull (strstr (lines[3], "(shrink)"));
  g_assert_nonnull (strstr (table, "/work"));
  /* the clean histogram of /work in MiB: 200 200 100 50 0 0 0 0, and the
   * totals of both cgroups */
  g_assert_true (g_regex_match_simple ("\n  /work +clean +48 +200 +200 +100 "
                                       "+50 +0 ", table, 0, 0));
  g_assert_true (g_regex_match_simple ("\n  all 2 +clean +48 +200 +200 ",
                                       table, 0, 0));
  g_assert_true (g_regex_match_simple ("^plain +absent +- ", lines[
                   g_strv_length (lines) - 2], 0, 0));
  g_assert_null (strstr (table, "WARNING"));
}

/* Older than three poll intervals: the table says so. */
static void
test_table_stale (Fixture *f, gconstpointer data)
{
  g_autoptr (json_object) state = kstaled_status_to_json (f->domains,
                                                          f->config, NOW);
  g_autofree gchar *fresh = kstaled_status_format_table (state, NOW +
                                                         30 * G_USEC_PER_SEC);
  g_autofree gchar *stale = kstaled_status_format_table (state, NOW +
                                                         31 * G_USEC_PER_SEC);
  gboolean is_stale;

  (void) data;
  g_assert_null (strstr (fresh, "WARNING"));
  g_assert_nonnull (strstr (stale, ", 31 s old (poll interval 10 s)"));
  g_assert_nonnull (strstr (stale, "\nWARNING: the state is older than three "
                            "poll intervals"));
  g_assert_cmpint (kstaled_status_age (state, NOW + 31 * G_USEC_PER_SEC,
                                       &is_stale), ==, 31);
  g_assert_true (is_stale);
}

/* Long domain names widen their column; long cgroup paths get a line of
 * their own; the numbers stay aligned under their headings. */
static void
test_table_long_names (Fixture *f, gconstpointer data)
{
  KstaledDomainStatus *web1 = g_ptr_array_index (f->domains, 0);
  KstaledCgroup *cg = g_ptr_array_index (web1->report->cgroups, 0);
  g_autofree gchar *long_name = g_strnfill (70, 'd');
  g_autofree gchar *p200 = g_strnfill (200, 'p');
  g_autofree gchar *long_path = g_strconcat ("/", p200, NULL);
  g_autofree gchar *path_line = g_strconcat ("\n  ", long_path, "\n", NULL);
  g_autoptr (json_object) state = NULL;
  g_autofree gchar *table = NULL;
  g_auto (GStrv) lines = NULL;
  const char *header = NULL, *row = NULL;

  (void) data;
  g_free (web1->name);
  web1->name = g_strdup (long_name);
  g_free (cg->path);
  cg->path = g_strdup (long_path);
  state = kstaled_status_to_json (f->domains, f->config, NOW);
  table = kstaled_status_format_table (state, NOW);
  g_test_message ("\n%s", table);
  lines = g_strsplit (table, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      if (g_str_has_prefix (lines[i], "DOMAIN"))
        header = lines[i];
      if (g_str_has_prefix (lines[i], "plain "))
        row = lines[i];
    }
  g_assert_nonnull (header);
  g_assert_nonnull (row);
  /* ACTUAL's column ends where the rows' first number does */
  g_assert_cmpint (strstr (header, "ACTUAL") - header + 6, ==,
                   strstr (row, "-") - row + 1);
  g_assert_true (g_regex_match_simple ("^" "d{70}" " present +512 ",
                                       strstr (table, long_name), 0, 0));
  g_assert_nonnull (strstr (table, path_line));
  g_assert_true (g_regex_match_simple ("\n +clean +48 +200 +200 +100 ",
                                       table, 0, 0));
}

static void
test_filter (Fixture *f, gconstpointer data)
{
  g_autoptr (json_object) state = kstaled_status_to_json (f->domains,
                                                          f->config, NOW);
  g_autoptr (GError) error = NULL;
  const char *plain[] = { "plain", NULL };
  const char *missing[] = { "plain", "nosuch", NULL };
  g_autofree gchar *table = NULL;

  (void) data;
  g_assert_true (kstaled_status_filter (state, plain, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (json_object_array_length (PATH (state, "domains")), ==, 1);
  table = kstaled_status_format_table (state, NOW);
  g_assert_null (strstr (table, "web1"));
  g_assert_nonnull (strstr (table, "\nplain "));
  g_assert_false (kstaled_status_filter (state, missing, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "\"nosuch\""));
}

/* Every line is a comment or "name{labels} value". */
static void
assert_exposition_format (const char *text)
{
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);

  for (guint i = 0; lines[i] && lines[i][0]; i++)
    g_assert_true (lines[i][0] == '#' ||
                   g_regex_match_simple ("^kstaled_[a-z_]+\\{domain=\"[^\\n]*\"\\} [0-9]+$",
                                         lines[i], 0, 0));
}

static void
test_metrics_text (Fixture *f, gconstpointer data)
{
  g_autofree gchar *text = kstaled_status_format_metrics (f->domains,
                                                          f->config);

  (void) data;
  g_test_message ("\n%s", text);
  g_assert_nonnull (strstr (text, "\nkstaled_domain_managed{domain=\"web1\"} 1\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_managed{domain=\"plain\"} 0\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_balloon_bytes{domain=\"web1\"} 536870912\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_balloon_changes_total{domain=\"web1\",action=\"inflate\"} 3\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_last_decision_timestamp_seconds{domain=\"web1\"} 1764763200\n"));
  /* the report summed over its cgroups */
  g_assert_nonnull (strstr (text, "\nkstaled_domain_report_cgroups{domain=\"web1\"} 2\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_stale_bytes{domain=\"web1\"} 50331648\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_report_idle_bytes{domain=\"web1\",kind=\"clean\",min_scans=\"5\"} 104857600\n"));
  /* no per-cgroup series unless configured: no guest path in a label */
  g_assert_null (strstr (text, "cgroup=\""));
  /* an unmanaged domain has no estimate to show */
  g_assert_null (strstr (text, "kstaled_domain_target_bytes{domain=\"plain\"}"));
  assert_exposition_format (text);
}

static void
test_metrics_cgroups (Fixture *f, gconstpointer data)
{
  g_autofree gchar *one = NULL, *all = NULL;

  (void) data;
  /* the largest cgroup by usage only */
  f->config->metrics_cgroups = 1;
  one = kstaled_status_format_metrics (f->domains, f->config);
  g_assert_nonnull (strstr (one, "\nkstaled_cgroup_idle_bytes{domain=\"web1\",cgroup=\"/work\",kind=\"clean\",min_scans=\"5\"} 104857600\n"));
  g_assert_nonnull (strstr (one, "\nkstaled_cgroup_stale_bytes{domain=\"web1\",cgroup=\"/work\"} 50331648\n"));
  g_assert_null (strstr (one, "/evil"));
  assert_exposition_format (one);

  f->config->metrics_cgroups = KSTALED_MAX_METRICS_CGROUPS;
  all = kstaled_status_format_metrics (f->domains, f->config);
  /* the guest's path is escaped, and cannot add lines or labels */
  g_assert_nonnull (strstr (all, "cgroup=\"/evil\\\"}\\\\x\"}"));
  assert_exposition_format (all);
}

/* A long path is cut to 104 bytes, at a character boundary, and keeps its
 * inode. */
static void
test_metrics_long_path (Fixture *f, gconstpointer data)
{
  KstaledDomainStatus *web1 = g_ptr_array_index (f->domains, 0);
  KstaledCgroup *cg = g_ptr_array_index (web1->report->cgroups, 0);
  g_autofree gchar *a = g_strnfill (102, 'a');
  g_autofree gchar *b = g_strnfill (300, 'b');
  g_autofree gchar *label = g_strconcat ("cgroup=\"/", a, "...#7\"", NULL);
  g_autofree gchar *text = NULL;

  (void) data;
  g_free (cg->path);
  /* "\xc3\xa9" (e acute) spans bytes 104 and 105 */
  cg->path = g_strconcat ("/", a, "\xc3\xa9", b, NULL);
  f->config->metrics_cgroups = 1;
  text = kstaled_status_format_metrics (f->domains, f->config);
  g_assert_nonnull (strstr (text, label));
  g_assert_null (strstr (text, "bbb"));
  assert_exposition_format (text);
}

/* The largest report the agent accepts: KSTALED_MAX_CGROUPS cgroups (the
 * device's VIRTIO_KSTALED_MAX_RECORDS) with KSTALED_MAX_PATH_LEN-byte paths
 * (the device allows longer paths, but its 1 MiB report limit leaves under
 * 800 bytes per path when it sends 1024 records), every path made of '"',
 * which both JSON and Prometheus escape as two bytes, and every number at
 * its parser limit. */
static KstaledReport *
largest_report (void)
{
  GString *json = g_string_new ("{\"return\":{\"qom-path\":\"/machine/"
                                "peripheral/kstaled0/virtio-backend\","
                                "\"scan-seconds\":1,\"stale-page-age\":5,"
                                "\"reports\":9007199254740992,"
                                "\"dropped-reports\":9007199254740992,"
                                "\"report-age-ms\":9007199254740992,"
                                "\"guest-scans\":9007199254740992,"
                                "\"cgroups\":[");
  g_autofree gchar *quotes = g_strnfill (KSTALED_MAX_PATH_LEN - 5, '"');
  g_autofree gchar *escaped = NULL;
  g_autoptr (GError) error = NULL;
  KstaledReport *report;

  /* as JSON text: \" per quote */
  escaped = g_strescape (quotes, NULL);
  for (guint i = 0; i < KSTALED_MAX_CGROUPS; i++)
    {
      g_string_append_printf (json, "%s{\"path\":\"/%04u%s\","
                              "\"inode\":9007199254740992,"
                              "\"scans\":9007199254740992,"
                              "\"stale\":1125899906842624,"
                              "\"memory-usage\":%" G_GUINT64_FORMAT ","
                              "\"memory-limit\":1125899906842624",
                              i ? "," : "", i, escaped,
                              G_GUINT64_CONSTANT (1125899906842624) - i);
      for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
        {
          g_string_append_printf (json, ",\"%s\":[",
                                  kstaled_idle_kind_to_string (k));
          for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
            g_string_append_printf (json, "%s1125899906842624", b ? "," : "");
          g_string_append_c (json, ']');
        }
      g_string_append_c (json, '}');
    }
  g_string_append (json, "]}}");
  g_assert_cmpuint (json->len, <, KSTALED_MAX_REPLY_LEN);
  report = kstaled_report_parse (json->str, json->len, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (report->cgroups->len, ==, KSTALED_MAX_CGROUPS);
  g_assert_cmpuint (strlen (((KstaledCgroup *) g_ptr_array_index (
                      report->cgroups, 0))->path), ==, KSTALED_MAX_PATH_LEN);
  g_string_free (json, TRUE);
  return report;
}

/* Bounds per domain whose guest sends largest_report(), the domain's name
 * being at most NAME_LEN bytes; kstaled-agent(8) states them. */
#define NAME_LEN 64
#define MAX_STATE_BYTES_PER_DOMAIN (48 * 1024)
#define MAX_METRICS_BYTES_PER_DOMAIN (8 * 1024)
#define MAX_METRICS_BYTES_PER_CGROUP (12 * 1024)
#define N_DOMAINS 4

static void
test_bounded_output (void)
{
  g_autoptr (GPtrArray) domains = g_ptr_array_new_with_free_func (
    (GDestroyNotify) kstaled_domain_status_free);
  g_autoptr (KstaledConfig) config = kstaled_config_new ();
  g_autoptr (json_object) state = NULL;
  g_autofree gchar *dir = NULL, *file = NULL, *text = NULL;
  g_autoptr (GError) error = NULL;
  gsize state_len;
  gint64 start, render_us;

  for (guint i = 0; i < N_DOMAINS; i++)
    {
      g_autofree gchar *name = g_strdup_printf ("%0*u", NAME_LEN, i);
      KstaledDomainStatus *s = kstaled_domain_status_new (name);
      KstaledPolicyConfig policy;
      KstaledPolicyState policy_state = { 0 };
      KstaledPolicyInput input = { 0 };

      s->device = KSTALED_DEVICE_PRESENT;
      s->report = largest_report ();
      kstaled_policy_config_init (&policy);
      input = (KstaledPolicyInput) {
        .report = s->report,
        .max_memory_kib = G_GUINT64_CONSTANT (1) << 40,
        .now_us = G_USEC_PER_SEC,
        .stats = { .has_actual = TRUE, .actual = G_GUINT64_CONSTANT (1) << 40,
                   .has_available = TRUE,
                   .available = G_GUINT64_CONSTANT (1) << 40,
                   .has_unused = TRUE, .unused = 1024 },
      };
      kstaled_policy_decide (&policy, &input, &policy_state, &s->decision);
      s->has_decision = s->has_action = TRUE;
      s->action = s->decision;
      s->decision_time = s->action_time = NOW;
      s->last_error = g_strnfill (200, 'e');
      g_ptr_array_add (domains, s);
    }

  /* The state file, written as the agent writes it. */
  dir = g_dir_make_tmp ("test-status-XXXXXX", &error);
  g_assert_no_error (error);
  file = g_build_filename (dir, "state.json", NULL);
  state = kstaled_status_to_json (domains, config, NOW);
  g_assert_true (kstaled_status_write_file (file, state, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (file, &text, &state_len, NULL));
  g_test_message ("state file: %" G_GSIZE_FORMAT " bytes for %u domains of "
                  "%u cgroups with %u-byte paths (bound %u per domain)",
                  state_len, N_DOMAINS, KSTALED_MAX_CGROUPS,
                  KSTALED_MAX_PATH_LEN, MAX_STATE_BYTES_PER_DOMAIN);
  g_assert_cmpuint (state_len, <=, N_DOMAINS * MAX_STATE_BYTES_PER_DOMAIN);
  g_unlink (file);
  g_rmdir (dir);

  /* The default scrape: per-domain series only. */
  for (guint n = 0; n <= KSTALED_MAX_METRICS_CGROUPS; n += n ? n : 1)
    {
      g_autofree gchar *metrics = NULL;
      g_auto (GStrv) lines = NULL;
      gsize bound = N_DOMAINS * (MAX_METRICS_BYTES_PER_DOMAIN +
                                 n * MAX_METRICS_BYTES_PER_CGROUP);

      config->metrics_cgroups = n;
      start = g_get_monotonic_time ();
      metrics = kstaled_status_format_metrics (domains, config);
      render_us = g_get_monotonic_time () - start;
      lines = g_strsplit (metrics, "\n", -1);
      g_test_message ("metrics-cgroups=%u: %" G_GSIZE_FORMAT " bytes (bound %"
                      G_GSIZE_FORMAT "), %u lines, rendered in %" G_GINT64_FORMAT
                      " us", n, strlen (metrics), bound,
                      g_strv_length (lines),
                      render_us);
      g_assert_cmpuint (strlen (metrics), <=, bound);
      assert_exposition_format (metrics);
    }
}

static json_object *
count_render (gpointer data)
{
  guint *renders = data;

  (*renders)++;
  return json_object_new_object ();
}

/* A burst of requests costs one write at once and one at the end of the
 * interval, with the last path asked for. */
static void
test_state_writer (Fixture *f, gconstpointer data)
{
  g_autofree gchar *file = g_build_filename (f->dir, "state.json", NULL);
  g_autoptr (KstaledStateWriter) writer = NULL;
  gint64 start;
  guint renders = 0;

  (void) data;
  writer = kstaled_state_writer_new (g_main_context_default (), 200,
                                     count_render, &renders);
  kstaled_state_writer_schedule (writer, file);
  g_assert_cmpuint (renders, ==, 1);
  g_assert_true (g_file_test (file, G_FILE_TEST_EXISTS));
  g_unlink (file);
  start = g_get_monotonic_time ();
  for (guint i = 0; i < 100; i++)
    kstaled_state_writer_schedule (writer, file);
  g_assert_cmpuint (renders, ==, 1);
  g_assert_false (g_file_test (file, G_FILE_TEST_EXISTS));
  while (renders < 2)
    g_main_context_iteration (NULL, TRUE);
  /* at the end of the interval, give or take the main loop's slack */
  g_assert_cmpint (g_get_monotonic_time () - start, <, 300 * 1000);
  g_assert_true (g_file_test (file, G_FILE_TEST_EXISTS));
  /* quiet for an interval: the next request writes at once */
  g_usleep (200 * 1000);
  kstaled_state_writer_schedule (writer, file);
  g_assert_cmpuint (renders, ==, 3);
  /* a pending write is made when the writer goes */
  kstaled_state_writer_schedule (writer, file);
  g_assert_cmpuint (renders, ==, 3);
  g_clear_pointer (&writer, kstaled_state_writer_free);
  g_assert_cmpuint (renders, ==, 4);
  /* unless the path was emptied (a reload) since it was scheduled */
  writer = kstaled_state_writer_new (g_main_context_default (), 200,
                                     count_render, &renders);
  kstaled_state_writer_schedule (writer, file);
  kstaled_state_writer_schedule (writer, file);
  kstaled_state_writer_schedule (writer, "");
  g_clear_pointer (&writer, kstaled_state_writer_free);
  g_assert_cmpuint (renders, ==, 5);
  g_unlink (file);
}

static gchar *
fixed_metrics (gpointer data)
{
  return g_strdup (data);
}

static void
test_respond (void)
{
  static const struct {
    const char *request;
    const char *status;
    gboolean body;
  } cases[] = {
    { "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK\r\n", TRUE },
    { "GET /metrics HTTP/1.0\n\n", "HTTP/1.1 200 OK\r\n", TRUE },
    /* HEAD: GET's headers, no body */
    { "HEAD /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\n", FALSE },
    { "GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 404 ", TRUE },
    { "HEAD / HTTP/1.1\r\n\r\n", "HTTP/1.1 404 ", FALSE },
    { "POST /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405 ", TRUE },
    { "GET /metrics\r\n\r\n", "HTTP/1.1 400 ", TRUE },
    { "GET /metrics HTTP/1.1 extra\r\n\r\n", "HTTP/1.1 400 ", TRUE },
    { "\x01\x02\x03", "HTTP/1.1 400 ", TRUE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GBytes) reply = kstaled_metrics_respond (
        cases[i].request, strlen (cases[i].request), NULL, fixed_metrics,
        (gpointer) "m 1\n");
      g_autofree gchar *text = g_strndup (g_bytes_get_data (reply, NULL),
                                          g_bytes_get_size (reply));

      g_assert_true (g_str_has_prefix (text, cases[i].status));
      /* every response refuses keep-alive */
      g_assert_nonnull (strstr (text, "\r\nConnection: close\r\n"));
      g_assert_true (g_str_has_suffix (text, "\r\n\r\n") != cases[i].body);
      if (g_str_has_prefix (cases[i].status, "HTTP/1.1 200"))
        {
          g_assert_nonnull (strstr (text, "Content-Length: 4\r\n"));
          if (cases[i].body)
            g_assert_true (g_str_has_suffix (text, "\r\n\r\nm 1\n"));
        }
      if (g_str_has_prefix (cases[i].status, "HTTP/1.1 405"))
        g_assert_nonnull (strstr (text, "\r\nAllow: GET, HEAD\r\n"));
    }
}

/* Only requests with the token get the metrics. */
static void
test_respond_token (void)
{
  static const struct {
    const char *request;
    const char *status;
  } cases[] = {
    { "GET /metrics HTTP/1.1\r\nAuthorization: Bearer 0123456789abcdef\r\n\r\n",
      "HTTP/1.1 200 " },
    { "GET /metrics HTTP/1.1\r\nhost: x\r\nauthorization:  bearer  0123456789abcdef \r\n\r\n",
      "HTTP/1.1 200 " },
    { "GET /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 401 " },
    { "GET /metrics HTTP/1.1\r\nAuthorization: Bearer 0123456789abcdeF\r\n\r\n",
      "HTTP/1.1 401 " },
    { "GET /metrics HTTP/1.1\r\nAuthorization: Bearer 0123456789abcde\r\n\r\n",
      "HTTP/1.1 401 " },
    { "GET /metrics HTTP/1.1\r\nAuthorization: Basic MDEyMzQ1Njc4OWFiY2RlZg==\r\n\r\n",
      "HTTP/1.1 401 " },
    /* a header after the blank line is body, not a header */
    { "GET /metrics HTTP/1.1\r\n\r\nAuthorization: Bearer 0123456789abcdef\r\n",
      "HTTP/1.1 401 " },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GBytes) reply = kstaled_metrics_respond (
        cases[i].request, strlen (cases[i].request), "0123456789abcdef",
        fixed_metrics, (gpointer) "m 1\n");
      g_autofree gchar *text = g_strndup (g_bytes_get_data (reply, NULL),
                                          g_bytes_get_size (reply));

      g_test_message ("%u: %s", i, text);
      g_assert_true (g_str_has_prefix (text, cases[i].status));
      g_assert_true (g_str_has_suffix (text, "m 1\n") ==
                     g_str_has_prefix (cases[i].status, "HTTP/1.1 200"));
      if (g_str_has_prefix (cases[i].status, "HTTP/1.1 401"))
        g_assert_nonnull (strstr (text, "\r\nWWW-Authenticate: Bearer "));
    }
}

typedef struct {
  guint16 port;
  const char *request;
  gchar *reply;
  gboolean done;
} Client;

static GSocketConnection *
connect_to (guint16 port)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GError) error = NULL;
  GSocketConnection *conn =
    g_socket_client_connect_to_host (client, "127.0.0.1", port, NULL, &error);

  g_assert_no_error (error);
  return conn;
}

static gchar *
read_all (GSocketConnection *conn)
{
  g_autoptr (GError) error = NULL;
  GString *reply = g_string_new (NULL);
  gchar buf[4096];
  gssize n;

  while ((n = g_input_stream_read (g_io_stream_get_input_stream (
            G_IO_STREAM (conn)), buf, sizeof buf, NULL, &error)) > 0)
    g_string_append_len (reply, buf, n);
  g_assert_no_error (error);
  return g_string_free (reply, FALSE);
}

static gpointer
client_thread (gpointer data)
{
  Client *c = data;
  g_autoptr (GSocketConnection) conn = connect_to (c->port);
  g_autoptr (GError) error = NULL;

  g_assert_true (g_output_stream_write_all (
    g_io_stream_get_output_stream (G_IO_STREAM (conn)), c->request,
    strlen (c->request), NULL, NULL, &error));
  c->reply = read_all (conn);
  g_atomic_int_set (&c->done, TRUE);
  g_main_context_wakeup (NULL);
  return NULL;
}

static gchar *
request (KstaledMetricsServer *server, const char *text)
{
  Client c = { kstaled_metrics_server_get_port (server), text, NULL, FALSE };
  GThread *thread = g_thread_new ("client", client_thread, &c);

  while (!g_atomic_int_get (&c.done))
    g_main_context_iteration (NULL, TRUE);
  g_thread_join (thread);
  return c.reply;
}

static gchar *
render_fixture_metrics (gpointer data)
{
  Fixture *f = data;

  return kstaled_status_format_metrics (f->domains, f->config);
}

static void
test_server (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledMetricsServer) server =
    kstaled_metrics_server_new ("127.0.0.1", 0, NULL, render_fixture_metrics, f,
                                &error);
  g_autofree gchar *ok = NULL, *head = NULL, *big = NULL, *missing = NULL;
  g_autofree gchar *keep_alive = NULL;
  g_autofree gchar *huge = g_strnfill (KSTALED_METRICS_MAX_REQUEST_LEN, 'a');
  g_autofree gchar *url = NULL;

  (void) data;
  g_assert_no_error (error);
  url = g_strdup_printf ("http://127.0.0.1:%u/metrics",
                         kstaled_metrics_server_get_port (server));
  g_assert_cmpstr (kstaled_metrics_server_get_url (server), ==, url);
  ok = request (server, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  g_assert_true (g_str_has_prefix (ok, "HTTP/1.1 200 OK\r\n"));
  g_assert_nonnull (strstr (ok, "kstaled_domain_managed{domain=\"web1\"} 1"));
  head = request (server, "HEAD /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  g_assert_true (g_str_has_prefix (head, "HTTP/1.1 200 OK\r\n"));
  g_assert_true (g_str_has_suffix (head, "\r\n\r\n"));
  /* two requests on a keep-alive connection: one answer, then the server
   * closes the connection as its "Connection: close" said */
  keep_alive = request (server, "GET /metrics HTTP/1.1\r\nConnection: "
                        "keep-alive\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n");
  g_assert_true (g_str_has_prefix (keep_alive, "HTTP/1.1 200 OK\r\n"));
  g_assert_null (strstr (keep_alive + 1, "HTTP/1.1"));
  missing = request (server, "GET /nothing HTTP/1.1\r\n\r\n");
  g_assert_true (g_str_has_prefix (missing, "HTTP/1.1 404 "));
  /* a request that never ends is cut off at the limit */
  big = request (server, huge);
  g_assert_true (g_str_has_prefix (big, "HTTP/1.1 431 "));
}

typedef struct {
  guint16 port;
  gint64 closed_after_us;
  gboolean done;
} SlowClient;

/* Connects and sends a byte of a request every 100 ms, which an idle
 * timeout would never stop; records when the server closes on it. */
static gpointer
slow_client_thread (gpointer data)
{
  SlowClient *c = data;
  g_autoptr (GSocketConnection) conn = connect_to (c->port);
  GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (conn));
  g_autofree gchar *rest = NULL;
  gint64 start = g_get_monotonic_time ();

  for (guint i = 0; i < 100; i++)
    {
      if (!g_output_stream_write_all (out, "X", 1, NULL, NULL, NULL))
        break;
      g_usleep (100 * 1000);
      if (g_socket_condition_check (g_socket_connection_get_socket (conn),
                                    G_IO_IN | G_IO_HUP))
        break;
    }
  rest = read_all (conn);
  g_assert_cmpstr (rest, ==, "");
  c->closed_after_us = g_get_monotonic_time () - start;
  g_atomic_int_set (&c->done, TRUE);
  g_main_context_wakeup (NULL);
  return NULL;
}

/* A client that sends nothing and one that trickles its request do not
 * stop another scrape, and lose their connections at the deadline. */
static void
test_server_slow_clients (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledMetricsServer) server =
    kstaled_metrics_server_new ("127.0.0.1", 0, NULL, render_fixture_metrics, f,
                                &error);
  SlowClient slow = { 0 };
  g_autoptr (GSocketConnection) silent = NULL;
  g_autofree gchar *ok = NULL, *silent_reply = NULL;
  GThread *thread;
  gint64 start;

  (void) data;
  g_assert_no_error (error);
  slow.port = kstaled_metrics_server_get_port (server);
  silent = connect_to (slow.port);
  thread = g_thread_new ("slow", slow_client_thread, &slow);
  start = g_get_monotonic_time ();
  ok = request (server, "GET /metrics HTTP/1.1\r\n\r\n");
  g_assert_true (g_str_has_prefix (ok, "HTTP/1.1 200 OK\r\n"));
  g_assert_cmpint (g_get_monotonic_time () - start, <, G_USEC_PER_SEC);
  while (!g_atomic_int_get (&slow.done))
    g_main_context_iteration (NULL, TRUE);
  g_thread_join (thread);
  g_test_message ("the trickling client was closed after %" G_GINT64_FORMAT
                  " ms", slow.closed_after_us / 1000);
  g_assert_cmpint (slow.closed_after_us, >=,
                   (KSTALED_METRICS_DEADLINE_MS - 100) * 1000);
  g_assert_cmpint (slow.closed_after_us, <,
                   (KSTALED_METRICS_DEADLINE_MS + 500) * 1000);
  /* the silent one is gone too: its read sees the end at once */
  g_assert_true (g_socket_condition_check (
    g_socket_connection_get_socket (silent), G_IO_IN | G_IO_HUP));
  silent_reply = read_all (silent);
  g_assert_cmpstr (silent_reply, ==, "");
}

static void
test_server_token (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *file = g_build_filename (f->dir, "token", NULL);
  g_autoptr (KstaledMetricsServer) server = NULL;
  g_autofree gchar *denied = NULL, *ok = NULL;

  (void) data;
  g_assert_true (g_file_set_contents (file, "short\n", -1, NULL));
  server = kstaled_metrics_server_new ("127.0.0.1", 0, file,
                                       render_fixture_metrics, f, &error);
  g_assert_null (server);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  g_assert_true (g_file_set_contents (file, "0123456789abcdef\n", -1, NULL));
  server = kstaled_metrics_server_new ("127.0.0.1", 0, file,
                                       render_fixture_metrics, f, &error);
  g_assert_no_error (error);
  denied = request (server, "GET /metrics HTTP/1.1\r\n\r\n");
  g_assert_true (g_str_has_prefix (denied, "HTTP/1.1 401 "));
  g_assert_null (strstr (denied, "web1"));
  ok = request (server, "GET /metrics HTTP/1.1\r\nAuthorization: Bearer "
                "0123456789abcdef\r\n\r\n");
  g_assert_true (g_str_has_prefix (ok, "HTTP/1.1 200 OK\r\n"));
  g_unlink (file);
}

static void
test_server_ipv6 (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledMetricsServer) server = NULL;
  g_autofree gchar *url = NULL;

  (void) data;
  server = kstaled_metrics_server_new ("::1", 0, NULL, render_fixture_metrics, f,
                                       &error);
  if (server == NULL)
    {
      g_test_skip_printf ("no IPv6 loopback here: %s", error->message);
      return;
    }
  url = g_strdup_printf ("http://[::1]:%u/metrics",
                         kstaled_metrics_server_get_port (server));
  g_assert_cmpstr (kstaled_metrics_server_get_url (server), ==, url);
  g_clear_pointer (&server, kstaled_metrics_server_free);
  server = kstaled_metrics_server_new ("localhost", 0, NULL,
                                       render_fixture_metrics, f, &error);
  g_assert_null (server);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
}

#define ADD(path, fn) \
  g_test_add (path, Fixture, NULL, fixture_setup, fn, fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ADD ("/status/state-file", test_state_file);
  ADD ("/status/state-file-rejects", test_state_file_rejects);
  ADD ("/status/state-writer", test_state_writer);
  ADD ("/status/table", test_table);
  ADD ("/status/table-stale", test_table_stale);
  ADD ("/status/table-long-names", test_table_long_names);
  ADD ("/status/filter", test_filter);
  ADD ("/status/metrics-text", test_metrics_text);
  ADD ("/status/metrics-cgroups", test_metrics_cgroups);
  ADD ("/status/metrics-long-path", test_metrics_long_path);
  g_test_add_func ("/status/bounded-output", test_bounded_output);
  g_test_add_func ("/status/respond", test_respond);
  g_test_add_func ("/status/respond-token", test_respond_token);
  ADD ("/status/server-token", test_server_token);
  ADD ("/status/server", test_server);
  ADD ("/status/server-slow-clients", test_server_slow_clients);
  ADD ("/status/server-ipv6", test_server_ipv6);
  return g_test_run ();
}
