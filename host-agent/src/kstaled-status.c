#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-status.h"

#include <errno.h>

#include "kstaled-autocleanups.h"

#define KIB G_GUINT64_CONSTANT (1024)

static const char *const device_names[] = {
  [KSTALED_DEVICE_UNKNOWN] = "unknown",
  [KSTALED_DEVICE_PRESENT] = "present",
  [KSTALED_DEVICE_ABSENT] = "absent",
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

static json_object *
report_to_json (const KstaledReport *r)
{
  json_object *obj = json_object_new_object ();
  json_object *cgroups = json_object_new_array ();

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
  for (guint i = 0; i < r->cgroups->len; i++)
    {
      const KstaledCgroup *cg = g_ptr_array_index (r->cgroups, i);
      json_object *c = json_object_new_object ();

      json_object_object_add (c, "path", json_object_new_string (cg->path));
      json_object_object_add (c, "inode", u64_json (cg->inode));
      json_object_object_add (c, "scans", u64_json (cg->scans));
      json_object_object_add (c, "stale", u64_json (cg->stale));
      json_object_object_add (c, "memory-usage", u64_json (cg->memory_usage));
      if (cg->has_memory_limit)
        json_object_object_add (c, "memory-limit",
                                u64_json (cg->memory_limit));
      for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
        {
          json_object *hist = json_object_new_array_ext (KSTALED_N_BUCKETS);

          for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
            json_object_array_add (hist, u64_json (cg->idle[k][b]));
          json_object_object_add (c, idle_kind_json[k], hist);
        }
      json_object_array_add (cgroups, c);
    }
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
kstaled_status_to_json (GPtrArray *domains, gboolean dry_run, gint64 now)
{
  json_object *root = json_object_new_object ();
  json_object *list = json_object_new_array ();

  json_object_object_add (root, "version",
                          json_object_new_int (KSTALED_STATUS_VERSION));
  json_object_object_add (root, "time", time_json (now));
  json_object_object_add (root, "dry-run", json_object_new_boolean (dry_run));
  for (guint i = 0; i < domains->len; i++)
    json_object_array_add (list, domain_to_json (g_ptr_array_index (domains,
                                                                    i)));
  json_object_object_add (root, "domains", list);
  return root;
}

gboolean
kstaled_status_write_file (const char *path, GPtrArray *domains,
                           gboolean dry_run, GError **error)
{
  g_autoptr (json_object) root = kstaled_status_to_json (domains, dry_run,
                                                         g_get_real_time ());
  g_autofree gchar *dir = g_path_get_dirname (path);
  const char *text = json_object_to_json_string_ext (root,
                                                     JSON_C_TO_STRING_PRETTY);

  if (g_mkdir_with_parents (dir, 0755) < 0)
    {
      int saved_errno = errno;

      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved_errno),
                   "cannot create %s: %s", dir, g_strerror (saved_errno));
      return FALSE;
    }
  /* g_file_set_contents writes a temporary file and renames it over @path,
   * so kstaled-ctl never sees a half-written state. */
  return g_file_set_contents_full (path, text, -1,
                                   G_FILE_SET_CONTENTS_CONSISTENT, 0644, error);
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

static void
append_histograms (GString *out, json_object *report)
{
  json_object *cgroups = member (report, "cgroups", json_type_array);

  if (cgroups == NULL || json_object_array_length (cgroups) == 0)
    return;
  g_string_append_printf (out, "  %-24s %-15s %9s", "cgroup", "idle MiB",
                          "stale MiB");
  for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
    {
      g_autofree gchar *scans = g_strdup_printf (">=%u scans",
                                                 kstaled_bucket_scans[b]);

      g_string_append_printf (out, " %11s", scans);
    }
  g_string_append_c (out, '\n');
  for (gsize i = 0; i < json_object_array_length (cgroups); i++)
    {
      json_object *cg = json_object_array_get_idx (cgroups, i);
      json_object *stale = member (cg, "stale", json_type_int);

      for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
        {
          json_object *hist = member (cg, idle_kind_json[k], json_type_array);

          g_string_append_printf (out, "  %-24s %-15s",
                                  k == 0 ? member_string (cg, "path", "?") : "",
                                  idle_kind_labels[k]);
          if (k == 0 && stale)
            g_string_append_printf (out, " %9" G_GUINT64_FORMAT,
                                    json_object_get_uint64 (stale) / KIB
                                    / KIB);
          else
            g_string_append_printf (out, " %9s", "");
          for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
            {
              json_object *v = hist ? json_object_array_get_idx (hist, b)
                                    : NULL;

              if (v && json_object_is_type (v, json_type_int))
                g_string_append_printf (out, " %11" G_GUINT64_FORMAT,
                                        json_object_get_uint64 (v) / KIB
                                        / KIB);
              else
                g_string_append_printf (out, " %11s", "-");
            }
          g_string_append_c (out, '\n');
        }
    }
}

gchar *
kstaled_status_format_table (json_object *state)
{
  GString *out = g_string_new (NULL);
  json_object *domains = member (state, "domains", json_type_array);

  g_string_append_printf (out, "%-20s %-8s %9s %9s %9s %9s %9s %9s  %s\n",
                          "DOMAIN", "DEVICE", "ACTUAL", "TARGET", "WSS",
                          "IDLE", "FLOOR", "MAX", "LAST ACTION (MiB)");
  for (gsize i = 0; domains && i < json_object_array_length (domains); i++)
    {
      json_object *dom = json_object_array_get_idx (domains, i);
      json_object *decision = member (dom, "decision", json_type_object);
      json_object *action = member (dom, "last-action", json_type_object);
      json_object *enabled = member (dom, "enabled", json_type_boolean);
      const char *error = member_string (dom, "error", NULL);

      g_string_append_printf (out, "%-20s %-8s", member_string (dom, "name",
                                                                "?"),
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

static void
cgroup_sample_start (GString *out, const char *name,
                     const KstaledDomainStatus *s, const KstaledCgroup *cg)
{
  sample_start (out, name, s);
  g_string_append (out, ",cgroup=\"");
  append_label_value (out, cg->path);
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

/* One sample per cgroup of every domain of the guint64 member @field. */
#define cgroup_gauge(out, domains, name, help, field) \
  G_STMT_START { \
    begin_metric (out, name, "gauge", help); \
    for (guint i_ = 0; i_ < (domains)->len; i_++) \
      { \
        const KstaledDomainStatus *s_ = g_ptr_array_index (domains, i_); \
        for (guint c_ = 0; s_->report && c_ < s_->report->cgroups->len; c_++) \
          { \
            const KstaledCgroup *cg_ = \
              g_ptr_array_index (s_->report->cgroups, c_); \
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

gchar *
kstaled_status_format_metrics (GPtrArray *domains)
{
  GString *out = g_string_new (NULL);

  begin_metric (out, "kstaled_domain_managed", "gauge",
                "1 if the agent manages the domain, 0 if it leaves it alone.");
  for (guint i = 0; i < domains->len; i++)
    {
      const KstaledDomainStatus *s = g_ptr_array_index (domains, i);

      sample_start (out, "kstaled_domain_managed", s);
      sample_end (out, s->enabled && s->device == KSTALED_DEVICE_PRESENT);
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
  cgroup_gauge (out, domains, "kstaled_cgroup_memory_usage_bytes",
                "Memory charged to the guest cgroup.", memory_usage);
  cgroup_gauge (out, domains, "kstaled_cgroup_stale_bytes",
                "Memory of the guest cgroup idle for stale-page-age scans.",
                stale);

  begin_metric (out, "kstaled_cgroup_idle_bytes", "gauge",
                "Memory of the guest cgroup idle for at least min_scans "
                "scans, by kind.");
  for (guint i = 0; i < domains->len; i++)
    {
      const KstaledDomainStatus *s = g_ptr_array_index (domains, i);

      for (guint c = 0; s->report && c < s->report->cgroups->len; c++)
        {
          const KstaledCgroup *cg = g_ptr_array_index (s->report->cgroups, c);

          for (guint k = 0; k < KSTALED_N_IDLE_KINDS; k++)
            for (guint b = 0; b < KSTALED_N_BUCKETS; b++)
              {
                cgroup_sample_start (out, "kstaled_cgroup_idle_bytes", s, cg);
                g_string_append_printf (out, ",kind=\"%s\",min_scans=\"%u\"",
                                        idle_kind_labels[k],
                                        kstaled_bucket_scans[b]);
                sample_end (out, cg->idle[k][b]);
              }
        }
    }
  return g_string_free (out, FALSE);
}
