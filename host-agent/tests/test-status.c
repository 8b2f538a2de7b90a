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
  g_autoptr (json_object) state = NULL;
  const KstaledDomainStatus *web1 = g_ptr_array_index (f->domains, 0);
  json_object *dom, *action;

  (void) data;
  /* The directory is created, the file written whole. */
  g_assert_true (kstaled_status_write_file (file, f->domains, TRUE, &error));
  g_assert_no_error (error);
  state = kstaled_status_read_file (file, &error);
  g_assert_no_error (error);
  g_assert_true (json_object_get_boolean (PATH (state, "dry-run")));
  dom = PATH (state, "domains", "0");
  g_assert_cmpstr (json_object_get_string (PATH (dom, "name")), ==, "web1");
  g_assert_cmpstr (json_object_get_string (PATH (dom, "device")), ==,
                   "present");
  g_assert_cmpstr (json_object_get_string (PATH (dom, "report", "cgroups",
                                                 "0", "path")), ==, "/work");
  g_assert_cmpuint (json_object_get_uint64 (PATH (dom, "report", "cgroups",
                                                  "0", "idle-clean", "2")),
                    ==, 100 * MIB);
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
  g_assert_true (g_file_set_contents (file, "{\"version\":2,\"domains\":[]}",
                                      -1, NULL));
  state = kstaled_status_read_file (file, &error);
  g_assert_null (state);
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  g_unlink (file);
}

static void
test_table (Fixture *f, gconstpointer data)
{
  g_autoptr (json_object) state = kstaled_status_to_json (f->domains, FALSE,
                                                          0);
  g_autofree gchar *table = kstaled_status_format_table (state);
  g_auto (GStrv) lines = g_strsplit (table, "\n", -1);

  (void) data;
  g_test_message ("\n%s", table);
  g_assert_true (g_str_has_prefix (lines[0], "DOMAIN"));
  /* web1: balloon 512 MiB, shrinking toward its target */
  g_assert_true (g_regex_match_simple ("^web1 +present +512 +[0-9]+ ",
                                       lines[1], 0, 0));
  g_assert_nonnull (strstr (lines[1], "inflate 512 -> "));
  g_assert_nonnull (strstr (lines[1], "(shrink)"));
  g_assert_nonnull (strstr (table, "/work"));
  /* the clean histogram of /work in MiB: 200 200 100 50 0 0 0 0 */
  g_assert_true (g_regex_match_simple ("clean +48 +200 +200 +100 +50 +0 ",
                                       table, 0, 0));
  g_assert_true (g_regex_match_simple ("^plain +absent +- ", lines[
                   g_strv_length (lines) - 2], 0, 0));
}

static void
test_metrics_text (Fixture *f, gconstpointer data)
{
  g_autofree gchar *text = kstaled_status_format_metrics (f->domains);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);

  (void) data;
  g_test_message ("\n%s", text);
  g_assert_nonnull (strstr (text, "\nkstaled_domain_managed{domain=\"web1\"} 1\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_managed{domain=\"plain\"} 0\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_balloon_bytes{domain=\"web1\"} 536870912\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_domain_balloon_changes_total{domain=\"web1\",action=\"inflate\"} 3\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_cgroup_idle_bytes{domain=\"web1\",cgroup=\"/work\",kind=\"clean\",min_scans=\"5\"} 104857600\n"));
  g_assert_nonnull (strstr (text, "\nkstaled_cgroup_stale_bytes{domain=\"web1\",cgroup=\"/work\"} 50331648\n"));
  /* the guest's path is escaped, and cannot add lines or labels */
  g_assert_nonnull (strstr (text, "cgroup=\"/evil\\\"}\\\\x\"}"));
  /* an unmanaged domain has no estimate to show */
  g_assert_null (strstr (text, "kstaled_domain_target_bytes{domain=\"plain\"}"));
  /* every line is a comment or "name{labels} value" */
  for (guint i = 0; lines[i] && lines[i][0]; i++)
    g_assert_true (lines[i][0] == '#' ||
                   g_regex_match_simple ("^kstaled_[a-z_]+\\{domain=\"[^\\n]*\"\\} [0-9]+$",
                                         lines[i], 0, 0));
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
  } cases[] = {
    { "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.0 200 OK\r\n" },
    { "GET /metrics HTTP/1.0\n\n", "HTTP/1.0 200 OK\r\n" },
    { "GET / HTTP/1.1\r\n\r\n", "HTTP/1.0 404 " },
    { "POST /metrics HTTP/1.1\r\n\r\n", "HTTP/1.0 405 " },
    { "GET /metrics\r\n\r\n", "HTTP/1.0 400 " },
    { "GET /metrics HTTP/1.1 extra\r\n\r\n", "HTTP/1.0 400 " },
    { "\x01\x02\x03", "HTTP/1.0 400 " },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GBytes) reply = kstaled_metrics_respond (
        cases[i].request, strlen (cases[i].request), fixed_metrics,
        (gpointer) "m 1\n");
      g_autofree gchar *text = g_strndup (g_bytes_get_data (reply, NULL),
                                          g_bytes_get_size (reply));

      g_assert_true (g_str_has_prefix (text, cases[i].status));
      if (g_str_has_prefix (cases[i].status, "HTTP/1.0 200"))
        {
          g_assert_nonnull (strstr (text, "Content-Length: 4\r\n"));
          g_assert_true (g_str_has_suffix (text, "\r\n\r\nm 1\n"));
        }
    }
}

typedef struct {
  guint16 port;
  const char *request;
  gchar *reply;
  gboolean done;
} Client;

static gpointer
client_thread (gpointer data)
{
  Client *c = data;
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketConnection) conn = NULL;
  g_autoptr (GError) error = NULL;
  GString *reply = g_string_new (NULL);
  gchar buf[4096];
  gssize n;

  conn = g_socket_client_connect_to_host (client, "127.0.0.1", c->port, NULL,
                                          &error);
  g_assert_no_error (error);
  g_assert_true (g_output_stream_write_all (
    g_io_stream_get_output_stream (G_IO_STREAM (conn)), c->request,
    strlen (c->request), NULL, NULL, &error));
  while ((n = g_input_stream_read (g_io_stream_get_input_stream (
            G_IO_STREAM (conn)), buf, sizeof buf, NULL, &error)) > 0)
    g_string_append_len (reply, buf, n);
  g_assert_no_error (error);
  c->reply = g_string_free (reply, FALSE);
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

static void
test_server (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledMetricsServer) server =
    kstaled_metrics_server_new (0, (KstaledMetricsFunc)
                                kstaled_status_format_metrics, f->domains,
                                &error);
  g_autofree gchar *ok = NULL, *big = NULL, *missing = NULL;
  g_autofree gchar *huge = g_strnfill (KSTALED_METRICS_MAX_REQUEST_LEN, 'a');

  (void) data;
  g_assert_no_error (error);
  ok = request (server, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  g_assert_true (g_str_has_prefix (ok, "HTTP/1.0 200 OK\r\n"));
  g_assert_nonnull (strstr (ok, "kstaled_domain_managed{domain=\"web1\"} 1"));
  missing = request (server, "GET /nothing HTTP/1.1\r\n\r\n");
  g_assert_true (g_str_has_prefix (missing, "HTTP/1.0 404 "));
  /* a request that never ends is cut off at the limit */
  big = request (server, huge);
  g_assert_true (g_str_has_prefix (big, "HTTP/1.0 431 "));
}

#define ADD(path, fn) \
  g_test_add (path, Fixture, NULL, fixture_setup, fn, fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ADD ("/status/state-file", test_state_file);
  ADD ("/status/state-file-rejects", test_state_file_rejects);
  ADD ("/status/table", test_table);
  ADD ("/status/metrics-text", test_metrics_text);
  g_test_add_func ("/status/respond", test_respond);
  ADD ("/status/server", test_server);
  return g_test_run ();
}
