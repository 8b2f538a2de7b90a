#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-status.h"

#include <errno.h>
#include <gio/gio.h>
#include <string.h>

#include "kstaled-autocleanups.h"

#define KIB G_GUINT64_CONSTANT (1024)

static const char *const device_names[] = {
  [KSTALED_DEVICE_UNKNOWN] = "unknown",
  [KSTALED_DEVICE_PRESENT] = "present",
  [KSTALED_DEVICE_ABSENT] = "absent",
  [KSTALED_DEVICE_NOT_NEEDED] = "not-needed",
};

/* Short names, for table rows and metric labels. */
static const char *const idle_kind_labels[] = {
  [KSTALED_IDLE_CLEAN] = "clean",
  [KSTALED_IDLE_DIRTY_FILE] = "dirty-file",
  [KSTALED_IDLE_DIRTY_SWAP] = "dirty-swap",
};

static const char *const idle_kind_json[] = {
  [KSTALED_IDLE_CLEAN] = "idle-clean",
  [KSTALED_IDLE_DIRTY_FILE] = "idle-dirty-file",
  [KSTALED_IDLE_DIRTY_SWAP] = "idle-dirty-swap",
};

KstaledDomainStatus *
kstaled_domain_status_new (const char *name)
{
  KstaledDomainStatus *status = g_new0 (KstaledDomainStatus, 1);

  status->name = g_strdup (name);
  status->enabled = TRUE;
  return status;
}

void
kstaled_domain_status_free (KstaledDomainStatus *status)
{
  if (status == NULL)
    return;
  g_free (status->name);
  g_free (status->last_error);
  kstaled_report_free (status->report);
  g_free (status);
}

static json_object *
u64_json (guint64 value)
{
  return json_object_new_uint64 (value);
}

static json_object *
time_json (gint64 wall_us)
{
  g_autoptr (GDateTime) dt = g_date_time_new_from_unix_utc (wall_us /
                                                            G_USEC_PER_SEC);
  g_autofree gchar *iso = dt ? g_date_time_format_iso8601 (dt) : NULL;

  return iso ? json_object_new_string (iso) : NULL;
}

/* Largest memory usage first; the path breaks ties, so that the choice does
 * not depend on the guest's order. */
static gint
compare_usage (gconstpointer a, gconstpointer b)
{
  const KstaledCgroup *ca = *(const KstaledCgroup *const *) a;
  const KstaledCgroup *cb = *(const KstaledCgroup *const *) b;

  if (ca->memory_usage != cb->memory_usage)
    return ca->memory_usage > cb->memory_usage ? -1 : 1;
  return strcmp (ca->path, cb->path);
}

/* The @n largest cgroups of @r by memory usage (the array does not own
 * them). */
static GPtrArray *
largest_cgroups (const KstaledReport *r, guint n)
{
  GPtrArray *list = g_ptr_array_copy (r->cgroups, NULL, NULL);

  /* The copy takes the report's free function, but the report owns them. */
  g_ptr_array_set_free_func (list, NULL);
  g_ptr_array_sort (list, compare_usage);
  if (list->len > n)
    g_ptr_array_set_size (list, (gint) n);
  return list;
}

/* Stale bytes of every cgroup of @r; each page belongs to one cgroup, so
 * the sum counts none twice.  Saturates instead of wrapping. */
static guint64
report_stale_bytes (const KstaledReport *r)
{
  guint64 total = 0;

  for (guint i = 0; i < r->cgroups->len; i++)
    {
      const KstaledCgroup *cg = g_ptr_array_index (r->cgroups, i);

      total = cg->stale > G_MAXUINT64 - total ? G_MAXUINT64
                                               : total + cg->stale;
    }
  return total;
}

static json_object *
histogram_json (const guint64 *values)
{
  json_object *hist = json_object_new_array_ext (KSTALED_N_BUCKETS);

  for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
    json_object_array_add (hist, u64_json (values[b]));
  return hist;
}

static json_object *
cgroup_to_json (const KstaledCgroup *cg)
{
  json_object *c = json_object_new_object ();

  json_object_object_add (c, "path", json_object_new_string (cg->path));
  json_object_object_add (c, "stale", u64_json (cg->stale));
  json_object_object_add (c, "memory-usage", u64_json (cg->memory_usage));
  if (cg->has_memory_limit)
    json_object_object_add (c, "memory-limit", u64_json (cg->memory_limit));
  for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
    json_object_object_add (c, idle_kind_json[k], histogram_json (cg->idle[k]));
  return c;
}

/* The report's figures, its histograms summed over every cgroup, and the
 * detail of its KSTALED_STATUS_STATE_CGROUPS largest cgroups. */
static json_object *
report_to_json (const KstaledReport *r)
{
  json_object *obj = json_object_new_object ();
  json_object *cgroups = json_object_new_array ();
  g_autoptr (GPtrArray) largest = largest_cgroups (r,
                                                   KSTALED_STATUS_STATE_CGROUPS);

  json_object_object_add (obj, "scan-seconds", u64_json (r->scan_seconds));
  json_object_object_add (obj, "stale-page-age", u64_json (r->stale_page_age));
  json_object_object_add (obj, "reports", u64_json (r->reports));
  json_object_object_add (obj, "dropped-reports",
                          u64_json (r->dropped_reports));
  if (r->has_report)
    {
      json_object_object_add (obj, "report-age-ms",
                              u64_json (r->report_age_ms));
      json_object_object_add (obj, "guest-scans", u64_json (r->guest_scans));
    }
  json_object_object_add (obj, "cgroup-count", u64_json (r->cgroups->len));
  json_object_object_add (obj, "stale", u64_json (report_stale_bytes (r)));
  for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
    {
      guint64 totals[KSTALED_N_BUCKETS];

      for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
        totals[b] = kstaled_report_idle_bytes (r, b, 1u << k);
      json_object_object_add (obj, idle_kind_json[k], histogram_json (totals));
    }
  for (guint i = 0; i < largest->len; i++)
    json_object_array_add (cgroups,
                           cgroup_to_json (g_ptr_array_index (largest, i)));
  json_object_object_add (obj, "cgroups", cgroups);
  return obj;
}

static json_object *
decision_to_json (const char *domain, const KstaledDecision *d, gint64 time)
{
  json_object *obj = json_object_new_object ();
  g_autofree gchar *line = kstaled_decision_format (domain, d);

  json_object_object_add (obj, "time", time_json (time));
  json_object_object_add (obj, "action", json_object_new_string (
                            kstaled_action_to_string (d->action)));
  json_object_object_add (obj, "reason", json_object_new_string (
                            kstaled_reason_to_string (d->reason)));
  json_object_object_add (obj, "actual-kib", u64_json (d->actual_kib));
  json_object_object_add (obj, "new-kib", u64_json (d->new_kib));
  json_object_object_add (obj, "max-kib", u64_json (d->max_kib));
  if (d->has_estimate)
    {
      json_object_object_add (obj, "target-kib", u64_json (d->target_kib));
      json_object_object_add (obj, "working-set-kib",
                              u64_json (d->working_set_kib));
      json_object_object_add (obj, "idle-kib", u64_json (d->idle_kib));
      json_object_object_add (obj, "headroom-kib", u64_json (d->headroom_kib));
      json_object_object_add (obj, "floor-kib", u64_json (d->floor_kib));
    }
  json_object_object_add (obj, "log", json_object_new_string (line));
  return obj;
}

static json_object *
domain_to_json (const KstaledDomainStatus *s)
{
  json_object *obj = json_object_new_object ();
  json_object *counters = json_object_new_object ();

  json_object_object_add (obj, "name", json_object_new_string (s->name));
  json_object_object_add (obj, "enabled", json_object_new_boolean (s->enabled));
  json_object_object_add (obj, "device",
                          json_object_new_string (device_names[s->device]));
  json_object_object_add (obj, "error", s->last_error
                          ? json_object_new_string (s->last_error) : NULL);
  json_object_object_add (obj, "report",
                          s->report ? report_to_json (s->report) : NULL);
  json_object_object_add (obj, "decision", s->has_decision
                          ? decision_to_json (s->name, &s->decision,
                                              s->decision_time)
                          : NULL);
  if (s->has_action)
    {
      json_object *action = decision_to_json (s->name, &s->action,
                                              s->action_time);

      json_object_object_add (action, "dry-run",
                              json_object_new_boolean (s->action_dry_run));
      json_object_object_add (obj, "last-action", action);
    }
  else
    json_object_object_add (obj, "last-action", NULL);
  json_object_object_add (counters, "polls", u64_json (s->polls_total));
  json_object_object_add (counters, "poll-errors",
                          u64_json (s->poll_errors_total));
  json_object_object_add (counters, "early-reports",
                          u64_json (s->early_reports_total));
  json_object_object_add (counters, "inflations",
                          u64_json (s->actions_total[KSTALED_ACTION_INFLATE]));
  json_object_object_add (counters, "deflations",
                          u64_json (s->actions_total[KSTALED_ACTION_DEFLATE]));
  json_object_object_add (obj, "counters", counters);
  return obj;
}

json_object *
kstaled_status_to_json (GPtrArray *domains, const KstaledConfig *config,
                        gint64 now)
{
  json_object *root = json_object_new_object ();
  json_object *list = json_object_new_array ();

  json_object_object_add (root, "version",
                          json_object_new_int (KSTALED_STATUS_VERSION));
  json_object_object_add (root, "time", time_json (now));
  json_object_object_add (root, "poll-interval",
                          u64_json (config->poll_interval));
  json_object_object_add (root, "dry-run",
                          json_object_new_boolean (config->dry_run));
  for (guint i = 0; i < domains->len; i++)
    json_object_array_add (list, domain_to_json (g_ptr_array_index (domains,
                                                                    i)));
  json_object_object_add (root, "domains", list);
  return root;
}

gboolean
kstaled_status_write_file (const char *path, json_object *state,
                           GError **error)
{
  g_autofree gchar *dir = g_path_get_dirname (path);
  /* Compact, and without json-c's default escaping of '/', which would
   * double the size of every cgroup path. */
  const char *text = json_object_to_json_string_ext (
    state, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

  /* Domain names and guest cgroup paths are for the agent's group (and
   * root), not for every local user. */
  if (g_mkdir_with_parents (dir, 0750) < 0)
    {
      int saved_errno = errno;

      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved_errno),
                   "cannot create %s: %s", dir, g_strerror (saved_errno));
      return FALSE;
    }
  /* g_file_set_contents writes a temporary file and renames it over @path,
   * so kstaled-ctl never sees a half-written state. */
  return g_file_set_contents_full (path, text, -1,
                                   G_FILE_SET_CONTENTS_CONSISTENT, 0640, error);
}

struct _KstaledStateWriter {
  GMainContext *context;
  guint interval_ms;
  KstaledStateFunc func;
  gpointer user_data;
  gchar *path;                  /* of the pending write */
  GSource *timer;               /* set while a write is pending */
  gint64 last_write;            /* monotonic, microseconds; 0: none yet */
  gchar *last_error;            /* logged once until a write works */
};

KstaledStateWriter *
kstaled_state_writer_new (GMainContext *context, guint interval_ms,
                          KstaledStateFunc func, gpointer user_data)
{
  KstaledStateWriter *writer = g_new0 (KstaledStateWriter, 1);

  writer->context = g_main_context_ref (context);
  writer->interval_ms = interval_ms;
  writer->func = func;
  writer->user_data = user_data;
  return writer;
}

static void
write_now (KstaledStateWriter *writer)
{
  g_autoptr (json_object) state = NULL;
  g_autoptr (GError) error = NULL;

  /* A reload may have emptied the path since the write was scheduled. */
  if (writer->path[0] == '\0')
    return;
  state = writer->func (writer->user_data);
  writer->last_write = g_get_monotonic_time ();
  if (kstaled_status_write_file (writer->path, state, &error))
    {
      if (writer->last_error != NULL)
        g_message ("the state file %s is written again", writer->path);
      g_clear_pointer (&writer->last_error, g_free);
      return;
    }
  if (g_strcmp0 (writer->last_error, error->message) != 0)
    g_warning ("cannot write the state file: %s", error->message);
  g_free (writer->last_error);
  writer->last_error = g_strdup (error->message);
}

static gboolean
write_due (gpointer data)
{
  KstaledStateWriter *writer = data;

  g_clear_pointer (&writer->timer, g_source_unref);
  write_now (writer);
  return G_SOURCE_REMOVE;
}

void
kstaled_state_writer_schedule (KstaledStateWriter *writer, const char *path)
{
  gint64 since_ms;

  g_free (writer->path);
  writer->path = g_strdup (path);
  if (writer->timer != NULL || path[0] == '\0')
    return;
  since_ms = (g_get_monotonic_time () - writer->last_write) / 1000;
  if (writer->last_write == 0 || since_ms >= writer->interval_ms)
    {
      write_now (writer);
      return;
    }
  writer->timer = g_timeout_source_new ((guint) (writer->interval_ms
                                                 - since_ms));
  g_source_set_callback (writer->timer, write_due, writer, NULL);
  g_source_attach (writer->timer, writer->context);
}

void
kstaled_state_writer_free (KstaledStateWriter *writer)
{
  if (writer == NULL)
    return;
  if (writer->timer != NULL)
    {
      g_source_destroy (writer->timer);
      g_clear_pointer (&writer->timer, g_source_unref);
      write_now (writer);
    }
  g_main_context_unref (writer->context);
  g_free (writer->path);
  g_free (writer->last_error);
  g_free (writer);
}

json_object *
kstaled_status_read_file (const char *path, GError **error)
{
  g_autofree gchar *data = NULL;
  g_autoptr (json_tokener) tok = json_tokener_new ();
  g_autoptr (json_object) root = NULL;
  json_object *version, *domains;
  gsize len;

  if (!g_file_get_contents (path, &data, &len, error))
    return NULL;
  if (len > KSTALED_STATUS_MAX_FILE_LEN)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                   "%s: %" G_GSIZE_FORMAT " bytes is too large for a state "
                   "file", path, len);
      return NULL;
    }
  root = json_tokener_parse_ex (tok, data, (int) len);
  if (root == NULL || !json_object_is_type (root, json_type_object) ||
      !json_object_object_get_ex (root, "version", &version) ||
      json_object_get_int (version) != KSTALED_STATUS_VERSION ||
      !json_object_object_get_ex (root, "domains", &domains) ||
      !json_object_is_type (domains, json_type_array))
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                   "%s: not a version %d kstaled-agent state file", path,
                   KSTALED_STATUS_VERSION);
      return NULL;
    }
  return g_steal_pointer (&root);
}

/* Member @key of @obj if it has type @type, else NULL. */
static json_object *
member (json_object *obj, const char *key, json_type type)
{
  json_object *m;

  if (obj == NULL || !json_object_object_get_ex (obj, key, &m) ||
      !json_object_is_type (m, type))
    return NULL;
  return m;
}

static const char *
member_string (json_object *obj, const char *key, const char *fallback)
{
  json_object *m = member (obj, key, json_type_string);

  return m ? json_object_get_string (m) : fallback;
}

/* "-" when absent, else KiB as MiB. */
static void
append_mib (GString *out, json_object *obj, const char *key)
{
  json_object *m = member (obj, key, json_type_int);

  if (m)
    g_string_append_printf (out, " %9" G_GUINT64_FORMAT,
                            json_object_get_uint64 (m) / KIB);
  else
    g_string_append_printf (out, " %9s", "-");
}

/* A longer cgroup path gets a line of its own, so that the numbers stay in
 * their columns whatever the guest calls its cgroups. */
#define MAX_PATH_COLUMN 32

/* One line per idle kind of a histogram set (a cgroup or the totals), the
 * first headed by @label, with @stale (bytes) if not NULL. */
static void
append_histogram_rows (GString *out, json_object *obj, const char *label,
                       int width, json_object *stale)
{
  if ((int) strlen (label) > width)
    {
      g_string_append_printf (out, "  %s\n", label);
      label = "";
    }
  for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
    {
      json_object *hist = member (obj, idle_kind_json[k], json_type_array);

      g_string_append_printf (out, "  %-*s %-10s", width, k == 0 ? label : "",
                              idle_kind_labels[k]);
      if (k == 0 && stale)
        g_string_append_printf (out, " %9" G_GUINT64_FORMAT,
                                json_object_get_uint64 (stale) / KIB / KIB);
      else
        g_string_append_printf (out, " %9s", "");
      for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
        {
          json_object *v = hist ? json_object_array_get_idx (hist, b) : NULL;

          if (v && json_object_is_type (v, json_type_int))
            g_string_append_printf (out, " %7" G_GUINT64_FORMAT,
                                    json_object_get_uint64 (v) / KIB / KIB);
          else
            g_string_append_printf (out, " %7s", "-");
        }
      g_string_append_c (out, '\n');
    }
}

static void
append_histograms (GString *out, json_object *report)
{
  json_object *cgroups = member (report, "cgroups", json_type_array);
  json_object *count = member (report, "cgroup-count", json_type_int);
  g_autofree gchar *all = NULL;
  gsize n = cgroups ? json_object_array_length (cgroups) : 0;
  int width;

  if (report == NULL)
    return;
  all = g_strdup_printf ("all %" G_GUINT64_FORMAT,
                         count ? json_object_get_uint64 (count) : 0);
  width = MAX ((int) strlen (all), (int) strlen ("cgroup"));
  for (gsize i = 0; i < n; i++)
    {
      int len = (int) strlen (member_string (json_object_array_get_idx (
                                               cgroups, i), "path", "?"));

      if (len <= MAX_PATH_COLUMN)
        width = MAX (width, len);
    }
  g_string_append_printf (out, "  %-*s %-10s %9s", width, "cgroup",
                          "idle MiB", "stale MiB");
  for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
    {
      g_autofree gchar *scans = g_strdup_printf (">=%u", kstaled_bucket_scans[b]);

      g_string_append_printf (out, " %7s", scans);
    }
  g_string_append (out, "  (scans)\n");
  append_histogram_rows (out, report, all, width,
                         member (report, "stale", json_type_int));
  for (gsize i = 0; i < n; i++)
    {
      json_object *cg = json_object_array_get_idx (cgroups, i);

      append_histogram_rows (out, cg, member_string (cg, "path", "?"), width,
                             member (cg, "stale", json_type_int));
    }
  if (count && json_object_get_uint64 (count) > n)
    g_string_append_printf (out, "  (the %" G_GSIZE_FORMAT " largest of %"
                            G_GUINT64_FORMAT " cgroups by memory usage)\n",
                            n, json_object_get_uint64 (count));
}

gint64
kstaled_status_age (json_object *state, gint64 now, gboolean *stale)
{
  json_object *interval = member (state, "poll-interval", json_type_int);
  g_autoptr (GDateTime) time = NULL;
  gint64 age;

  *stale = FALSE;
  time = g_date_time_new_from_iso8601 (member_string (state, "time", ""),
                                       NULL);
  if (time == NULL)
    return -1;
  age = MAX (0, now / G_USEC_PER_SEC - g_date_time_to_unix (time));
  *stale = interval && age > 3 * json_object_get_int64 (interval);
  return age;
}

gboolean
kstaled_status_filter (json_object *state, const char *const *names,
                       GError **error)
{
  json_object *domains = member (state, "domains", json_type_array);
  json_object *kept = json_object_new_array ();

  for (guint i = 0; names[i]; i++)
    {
      gboolean found = FALSE;

      for (gsize d = 0; domains && d < json_object_array_length (domains); d++)
        {
          json_object *dom = json_object_array_get_idx (domains, d);

          if (g_strcmp0 (member_string (dom, "name", NULL), names[i]) == 0)
            {
              json_object_array_add (kept, json_object_get (dom));
              found = TRUE;
              break;
            }
        }
      if (!found)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                       "the agent does not know a domain \"%s\"", names[i]);
          json_object_put (kept);
          return FALSE;
        }
    }
  json_object_object_add (state, "domains", kept);
  return TRUE;
}

static void
append_state_header (GString *out, json_object *state, gint64 now)
{
  json_object *interval = member (state, "poll-interval", json_type_int);
  json_object *dry_run = member (state, "dry-run", json_type_boolean);
  gboolean stale;
  gint64 age = kstaled_status_age (state, now, &stale);

  g_string_append_printf (out, "State of %s", member_string (state, "time",
                                                             "?"));
  if (age >= 0)
    g_string_append_printf (out, ", %" G_GINT64_FORMAT " s old", age);
  if (interval)
    g_string_append_printf (out, " (poll interval %" G_GINT64_FORMAT " s)",
                            json_object_get_int64 (interval));
  if (dry_run && json_object_get_boolean (dry_run))
    g_string_append (out, ", dry run: no balloon is changed");
  g_string_append_c (out, '\n');
  if (stale)
    g_string_append (out, "WARNING: the state is older than three poll "
                     "intervals: kstaled-agent is stopped, stuck or cut "
                     "off from libvirt, and these figures are out of "
                     "date.\n");
  g_string_append_c (out, '\n');
}

gchar *
kstaled_status_format_table (json_object *state, gint64 now)
{
  GString *out = g_string_new (NULL);
  json_object *domains = member (state, "domains", json_type_array);
  gsize n = domains ? json_object_array_length (domains) : 0;
  int width = (int) strlen ("DOMAIN");

  append_state_header (out, state, now);
  for (gsize i = 0; i < n; i++)
    width = MAX (width, (int) strlen (member_string (
      json_object_array_get_idx (domains, i), "name", "?")));
  g_string_append_printf (out, "%-*s %-8s %9s %9s %9s %9s %9s %9s  %s\n",
                          width, "DOMAIN", "DEVICE", "ACTUAL", "TARGET", "WSS",
                          "IDLE", "FLOOR", "MAX", "LAST ACTION (MiB)");
  for (gsize i = 0; i < n; i++)
    {
      json_object *dom = json_object_array_get_idx (domains, i);
      json_object *decision = member (dom, "decision", json_type_object);
      json_object *action = member (dom, "last-action", json_type_object);
      json_object *enabled = member (dom, "enabled", json_type_boolean);
      const char *error = member_string (dom, "error", NULL);

      g_string_append_printf (out, "%-*s %-8s", width,
                              member_string (dom, "name", "?"),
                              enabled && !json_object_get_boolean (enabled)
                              ? "disabled"
                              : member_string (dom, "device", "?"));
      append_mib (out, decision, "actual-kib");
      append_mib (out, decision, "target-kib");
      append_mib (out, decision, "working-set-kib");
      append_mib (out, decision, "idle-kib");
      append_mib (out, decision, "floor-kib");
      append_mib (out, decision, "max-kib");
      if (action)
        {
          json_object *from = member (action, "actual-kib", json_type_int);
          json_object *to = member (action, "new-kib", json_type_int);
          json_object *dry = member (action, "dry-run", json_type_boolean);

          g_string_append_printf (out, "  %s%s %" G_GUINT64_FORMAT " -> %"
                                  G_GUINT64_FORMAT " (%s) at %s",
                                  dry && json_object_get_boolean (dry)
                                  ? "dry-run " : "",
                                  member_string (action, "action", "?"),
                                  from ? json_object_get_uint64 (from) / KIB
                                       : 0,
                                  to ? json_object_get_uint64 (to) / KIB : 0,
                                  member_string (action, "reason", "?"),
                                  member_string (action, "time", "?"));
        }
      else
        g_string_append (out, "  none");
      g_string_append_c (out, '\n');
      if (error)
        g_string_append_printf (out, "  error: %s\n", error);
      append_histograms (out, member (dom, "report", json_type_object));
    }
  return g_string_free (out, FALSE);
}

/* Appends @value as a Prometheus label value: valid UTF-8, with backslash,
 * double quote and newline escaped and other control characters replaced,
 * since cgroup paths come from the guest. */
static void
append_label_value (GString *out, const char *value)
{
  g_autofree gchar *valid = g_utf8_make_valid (value, -1);

  for (const char *p = valid; *p; p++)
    {
      if (*p == '\\' || *p == '"')
        g_string_append_c (out, '\\');
      if (*p == '\n')
        g_string_append (out, "\\n");
      else if ((guchar) *p < 0x20 || *p == 0x7f)
        g_string_append_c (out, '?');
      else
        g_string_append_c (out, *p);
    }
}

static void
begin_metric (GString *out, const char *name, const char *type,
              const char *help)
{
  g_string_append_printf (out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
                          name, type);
}

static void
sample_start (GString *out, const char *name, const KstaledDomainStatus *s)
{
  g_string_append_printf (out, "%s{domain=\"", name);
  append_label_value (out, s->name);
  g_string_append_c (out, '"');
}

static void
sample_end (GString *out, guint64 value)
{
  g_string_append_printf (out, "} %" G_GUINT64_FORMAT "\n", value);
}

/* A guest's paths may be KSTALED_MAX_PATH_LEN bytes, and each is repeated
 * in 26 series: longer ones are cut, and keep their inode to stay
 * distinct. */
#define MAX_CGROUP_LABEL_LEN 128

static void
cgroup_sample_start (GString *out, const char *name,
                     const KstaledDomainStatus *s, const KstaledCgroup *cg)
{
  sample_start (out, name, s);
  g_string_append (out, ",cgroup=\"");
  if (strlen (cg->path) <= MAX_CGROUP_LABEL_LEN)
    append_label_value (out, cg->path);
  else
    {
      /* Room for "...#" and a 20-digit inode; whole characters only. */
      const char *end = cg->path + MAX_CGROUP_LABEL_LEN - 24;
      g_autofree gchar *cut = NULL;

      while (end > cg->path && (*end & 0xc0) == 0x80)
        end--;
      cut = g_strndup (cg->path, (gsize) (end - cg->path));
      append_label_value (out, cut);
      g_string_append_printf (out, "...#%" G_GUINT64_FORMAT, cg->inode);
    }
  g_string_append_c (out, '"');
}

/* One sample per domain of the guint64 member @field. */
#define domain_counter(out, domains, name, help, field) \
  G_STMT_START { \
    begin_metric (out, name, "counter", help); \
    for (guint i_ = 0; i_ < (domains)->len; i_++) \
      { \
        const KstaledDomainStatus *s_ = g_ptr_array_index (domains, i_); \
        sample_start (out, name, s_); \
        sample_end (out, s_->field); \
      } \
  } G_STMT_END

/* One sample per listed cgroup of every domain of the guint64 member
 * @field; @largest holds each domain's list. */
#define cgroup_gauge(out, domains, largest, name, help, field) \
  G_STMT_START { \
    begin_metric (out, name, "gauge", help); \
    for (guint i_ = 0; i_ < (domains)->len; i_++) \
      { \
        const KstaledDomainStatus *s_ = g_ptr_array_index (domains, i_); \
        GPtrArray *cgroups_ = g_ptr_array_index (largest, i_); \
        for (guint c_ = 0; c_ < cgroups_->len; c_++) \
          { \
            const KstaledCgroup *cg_ = g_ptr_array_index (cgroups_, c_); \
            cgroup_sample_start (out, name, s_, cg_); \
            sample_end (out, cg_->field); \
          } \
      } \
  } G_STMT_END

typedef enum {
  DECISION_ACTUAL,
  DECISION_TARGET,
  DECISION_WORKING_SET,
  DECISION_IDLE,
  DECISION_FLOOR,
  DECISION_MAX,
} DecisionField;

static const struct {
  const char *name;
  const char *help;
  gboolean needs_estimate;
} decision_metrics[] = {
  [DECISION_ACTUAL] = { "kstaled_domain_balloon_bytes",
                        "Memory the balloon leaves the guest.", FALSE },
  [DECISION_TARGET] = { "kstaled_domain_target_bytes",
                        "Memory the policy aims to leave the guest.", TRUE },
  [DECISION_WORKING_SET] = { "kstaled_domain_working_set_bytes",
                             "Guest memory not idle for idle-age scans.",
                             TRUE },
  [DECISION_IDLE] = { "kstaled_domain_idle_bytes",
                      "Reclaimable guest memory idle for idle-age scans.",
                      TRUE },
  [DECISION_FLOOR] = { "kstaled_domain_floor_bytes",
                       "Memory the agent never takes from the guest.", TRUE },
  [DECISION_MAX] = { "kstaled_domain_max_bytes",
                     "Maximum memory of the domain.", FALSE },
};

static guint64
decision_field (const KstaledDecision *d, DecisionField field)
{
  switch (field)
    {
    case DECISION_ACTUAL: return d->actual_kib;
    case DECISION_TARGET: return d->target_kib;
    case DECISION_WORKING_SET: return d->working_set_kib;
    case DECISION_IDLE: return d->idle_kib;
    case DECISION_FLOOR: return d->floor_kib;
    case DECISION_MAX: return d->max_kib;
    }
  g_assert_not_reached ();
}

/* The value of a per-domain gauge, FALSE if the domain has none. */
typedef gboolean (*DomainValueFunc) (const KstaledDomainStatus *s,
                                     guint64 *value);

static void
domain_gauge (GString *out, GPtrArray *domains, const char *name,
              const char *help, DomainValueFunc get)
{
  begin_metric (out, name, "gauge", help);
  for (guint i = 0; i < domains->len; i++)
    {
      const KstaledDomainStatus *s = g_ptr_array_index (domains, i);
      guint64 value;

      if (!get (s, &value))
        continue;
      sample_start (out, name, s);
      sample_end (out, value);
    }
}

static gboolean
last_decision_seconds (const KstaledDomainStatus *s, guint64 *value)
{
  *value = (guint64) (s->decision_time / G_USEC_PER_SEC);
  return s->has_decision;
}

static gboolean
report_cgroups (const KstaledDomainStatus *s, guint64 *value)
{
  *value = s->report ? s->report->cgroups->len : 0;
  return s->report != NULL;
}

static gboolean
report_stale (const KstaledDomainStatus *s, guint64 *value)
{
  *value = s->report ? report_stale_bytes (s->report) : 0;
  return s->report != NULL;
}

static void
append_bucket_labels (GString *out, KstaledIdleKind kind, guint bucket)
{
  g_string_append_printf (out, ",kind=\"%s\",min_scans=\"%u\"",
                          idle_kind_labels[kind], kstaled_bucket_scans[bucket]);
}

/* Per-cgroup series for the @n largest cgroups of each domain: a guest's
 * paths become label values, so their number is the operator's choice. */
static void
append_cgroup_metrics (GString *out, GPtrArray *domains, guint n)
{
  g_autoptr (GPtrArray) largest =
    g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);

  for (guint i = 0; i < domains->len; i++)
    {
      const KstaledDomainStatus *s = g_ptr_array_index (domains, i);

      g_ptr_array_add (largest, s->report ? largest_cgroups (s->report, n)
                                          : g_ptr_array_new ());
    }
  cgroup_gauge (out, domains, largest, "kstaled_cgroup_memory_usage_bytes",
                "Memory charged to the guest cgroup.", memory_usage);
  cgroup_gauge (out, domains, largest, "kstaled_cgroup_stale_bytes",
                "Memory of the guest cgroup idle for stale-page-age scans.",
                stale);
  begin_metric (out, "kstaled_cgroup_idle_bytes", "gauge",
                "Memory of the guest cgroup idle for at least min_scans "
                "scans, by kind.");
  for (guint i = 0; i < domains->len; i++)
    {
      const KstaledDomainStatus *s = g_ptr_array_index (domains, i);
      GPtrArray *cgroups = g_ptr_array_index (largest, i);

      for (guint c = 0; c < cgroups->len; c++)
        {
          const KstaledCgroup *cg = g_ptr_array_index (cgroups, c);

          for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
            for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
              {
                cgroup_sample_start (out, "kstaled_cgroup_idle_bytes", s, cg);
                append_bucket_labels (out, k, b);
                sample_end (out, cg->idle[k][b]);
              }
        }
    }
}

gchar *
kstaled_status_format_metrics (GPtrArray *domains,
                               const KstaledConfig *config)
{
  GString *out = g_string_new (NULL);

  begin_metric (out, "kstaled_domain_managed", "gauge",
                "1 if the agent manages the domain, 0 if it leaves it alone.");
  for (guint i = 0; i < domains->len; i++)
    {
      const KstaledDomainStatus *s = g_ptr_array_index (domains, i);

      sample_start (out, "kstaled_domain_managed", s);
      sample_end (out, s->enabled && (s->device == KSTALED_DEVICE_PRESENT ||
                                      s->device == KSTALED_DEVICE_NOT_NEEDED));
    }

  for (guint f = 0; f < G_N_ELEMENTS (decision_metrics); f++)
    {
      begin_metric (out, decision_metrics[f].name, "gauge",
                    decision_metrics[f].help);
      for (guint i = 0; i < domains->len; i++)
        {
          const KstaledDomainStatus *s = g_ptr_array_index (domains, i);

          if (!s->has_decision || (decision_metrics[f].needs_estimate &&
                                   !s->decision.has_estimate))
            continue;
          sample_start (out, decision_metrics[f].name, s);
          sample_end (out, decision_field (&s->decision, f) * KIB);
        }
    }

  begin_metric (out, "kstaled_domain_balloon_changes_total", "counter",
                "Balloon changes the agent made (or, dry-run, would make).");
  for (guint i = 0; i < domains->len; i++)
    {
      const KstaledDomainStatus *s = g_ptr_array_index (domains, i);

      for (KstaledAction a = KSTALED_ACTION_DEFLATE;
           a <= KSTALED_ACTION_INFLATE; a++)
        {
          sample_start (out, "kstaled_domain_balloon_changes_total", s);
          g_string_append_printf (out, ",action=\"%s\"",
                                  kstaled_action_to_string (a));
          sample_end (out, s->actions_total[a]);
        }
    }

  domain_counter (out, domains, "kstaled_domain_polls_total",
                  "Times the agent queried the domain.", polls_total);
  domain_counter (out, domains, "kstaled_domain_poll_errors_total",
                  "Queries of the domain that failed or were rejected.",
                  poll_errors_total);
  domain_counter (out, domains, "kstaled_domain_early_reports_total",
                  "KSTALED_EARLY_REPORT events received from the domain.",
                  early_reports_total);

  domain_gauge (out, domains, "kstaled_domain_last_decision_timestamp_seconds",
                "When the policy last decided on the domain.",
                last_decision_seconds);
  /* The report, summed over its cgroups: a fixed number of series per
   * domain whatever the guest reports. */
  domain_gauge (out, domains, "kstaled_domain_report_cgroups",
                "Cgroups in the domain's last kstaled report.",
                report_cgroups);
  domain_gauge (out, domains, "kstaled_domain_stale_bytes",
                "Guest memory idle for stale-page-age scans, all cgroups.",
                report_stale);
  begin_metric (out, "kstaled_domain_report_idle_bytes", "gauge",
                "Guest memory idle for at least min_scans scans, by kind, "
                "all cgroups.");
  for (guint i = 0; i < domains->len; i++)
    {
      const KstaledDomainStatus *s = g_ptr_array_index (domains, i);

      for (guint k = 0; s->report && k < KSTALED_N_IDLE_KINDS; k++)
        for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
          {
            sample_start (out, "kstaled_domain_report_idle_bytes", s);
            append_bucket_labels (out, k, b);
            sample_end (out, kstaled_report_idle_bytes (s->report, b, 1u << k));
          }
    }

  if (config->metrics_cgroups > 0)
    append_cgroup_metrics (out, domains, config->metrics_cgroups);
  return g_string_free (out, FALSE);
}
