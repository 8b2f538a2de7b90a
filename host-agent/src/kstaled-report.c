#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-report.h"

#include <string.h>

#include "kstaled-autocleanups.h"

/* Deepest valid reply: root, return, cgroups, cgroup, histogram, number. */
#define KSTALED_MAX_JSON_DEPTH 8

const guint kstaled_bucket_scans[KSTALED_N_BUCKETS] = {
  1, 2, 5, 15, 30, 60, 120, 240
};

static const char *const idle_kind_names[KSTALED_N_IDLE_KINDS] = {
  [KSTALED_IDLE_CLEAN] = "idle-clean",
  [KSTALED_IDLE_DIRTY_FILE] = "idle-dirty-file",
  [KSTALED_IDLE_DIRTY_SWAP] = "idle-dirty-swap",
};

G_DEFINE_QUARK (kstaled-report-error-quark, kstaled_report_error)

int
kstaled_bucket_index (guint scans)
{
  for (guint i = 0; i < KSTALED_N_BUCKETS; i++)
    if (kstaled_bucket_scans[i] == scans)
      return (int) i;
  return -1;
}

const char *
kstaled_idle_kind_to_string (KstaledIdleKind kind)
{
  g_return_val_if_fail (kind < KSTALED_N_IDLE_KINDS, NULL);
  return idle_kind_names[kind];
}

static void
kstaled_cgroup_free (gpointer data)
{
  KstaledCgroup *cg = data;

  g_free (cg->path);
  g_free (cg);
}

void
kstaled_report_free (KstaledReport *report)
{
  if (report == NULL)
    return;
  g_free (report->qom_path);
  g_clear_pointer (&report->cgroups, g_ptr_array_unref);
  g_free (report);
}

/* Parses @json completely: anything after the value, a truncated value or
 * nesting deeper than @depth is an error. */
static json_object *
parse_json (const char *json, gsize len, gsize max_len, int depth,
            GError **error)
{
  g_autoptr (json_tokener) tok = NULL;
  g_autoptr (json_object) root = NULL;
  enum json_tokener_error jerr;

  if (json == NULL || len == 0)
    {
      g_set_error_literal (error, KSTALED_REPORT_ERROR,
                           KSTALED_REPORT_ERROR_MALFORMED, "empty reply");
      return NULL;
    }
  if (len > max_len)
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TOO_LARGE,
                   "reply of %" G_GSIZE_FORMAT " bytes exceeds the limit of %"
                   G_GSIZE_FORMAT, len, max_len);
      return NULL;
    }

  tok = json_tokener_new_ex (depth);
  if (tok == NULL)
    g_error ("out of memory allocating a JSON tokener");
  json_tokener_set_flags (tok, JSON_TOKENER_STRICT);
  root = json_tokener_parse_ex (tok, json, (int) len);
  jerr = json_tokener_get_error (tok);
  if (jerr == json_tokener_continue)
    {
      g_set_error_literal (error, KSTALED_REPORT_ERROR,
                           KSTALED_REPORT_ERROR_MALFORMED,
                           "truncated JSON");
      return NULL;
    }
  if (jerr != json_tokener_success || root == NULL)
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_MALFORMED,
                   "invalid JSON at offset %" G_GSIZE_FORMAT ": %s",
                   json_tokener_get_parse_end (tok),
                   jerr == json_tokener_success ? "null value"
                   : json_tokener_error_desc (jerr));
      return NULL;
    }
  if (json_tokener_get_parse_end (tok) != len)
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_MALFORMED,
                   "trailing data at offset %" G_GSIZE_FORMAT,
                   json_tokener_get_parse_end (tok));
      return NULL;
    }
  return g_steal_pointer (&root);
}

static json_object *
get_member (json_object *obj, const char *where, const char *key,
            json_type type, gboolean required, GError **error)
{
  json_object *member = NULL;

  if (!json_object_object_get_ex (obj, key, &member))
    {
      if (required)
        g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_MISSING,
                     "%s: missing member \"%s\"", where, key);
      return NULL;
    }
  /* json-c represents null as a NULL object, whose type is json_type_null */
  if (!json_object_is_type (member, type))
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TYPE,
                   "%s.%s: expected %s, got %s", where, key,
                   json_type_to_name (type),
                   json_type_to_name (json_object_get_type (member)));
      return NULL;
    }
  return member;
}

/* Reads a JSON integer in [0, max].  Doubles (including NaN and Infinity)
 * are rejected by type; json-c saturates overflowing literals to INT64_MAX
 * or INT64_MIN, which the range check rejects because max < INT64_MAX. */
static gboolean
json_to_u64 (json_object *value, const char *where, guint64 max,
             guint64 *out, GError **error)
{
  gint64 v;

  if (!json_object_is_type (value, json_type_int))
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TYPE,
                   "%s: expected an integer, got %s", where,
                   json_type_to_name (json_object_get_type (value)));
      return FALSE;
    }
  v = json_object_get_int64 (value);
  if (v < 0 || (guint64) v > max)
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_RANGE,
                   "%s: %" G_GINT64_FORMAT " is outside 0..%" G_GUINT64_FORMAT,
                   where, v, max);
      return FALSE;
    }
  *out = (guint64) v;
  return TRUE;
}

/* Returns FALSE with @error set on a bad member; FALSE with @error unset
 * when an optional member is absent. */
static gboolean
get_u64 (json_object *obj, const char *where, const char *key,
         gboolean required, guint64 max, guint64 *out, GError **error)
{
  json_object *member;
  g_autofree gchar *member_where = NULL;

  if (!json_object_object_get_ex (obj, key, &member))
    {
      if (required)
        g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_MISSING,
                     "%s: missing member \"%s\"", where, key);
      return FALSE;
    }
  member_where = g_strdup_printf ("%s.%s", where, key);
  return json_to_u64 (member, member_where, max, out, error);
}

/* Accepts printable UTF-8 of bounded length without embedded NULs, so the
 * string is safe to put into logs, metric labels and tables. */
static gchar *
get_string (json_object *obj, const char *where, const char *key,
            gsize max_len, GError **error)
{
  json_object *member;
  const char *s;
  gsize len;

  member = get_member (obj, where, key, json_type_string, TRUE, error);
  if (member == NULL)
    return NULL;
  s = json_object_get_string (member);
  len = (gsize) json_object_get_string_len (member);
  if (len == 0 || len > max_len)
    {
      g_set_error (error, KSTALED_REPORT_ERROR, len ? KSTALED_REPORT_ERROR_TOO_LARGE
                   : KSTALED_REPORT_ERROR_RANGE,
                   "%s.%s: length %" G_GSIZE_FORMAT " is outside 1..%"
                   G_GSIZE_FORMAT, where, key, len, max_len);
      return NULL;
    }
  if (strlen (s) != len || !g_utf8_validate (s, (gssize) len, NULL))
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_RANGE,
                   "%s.%s: not valid UTF-8 text", where, key);
      return NULL;
    }
  for (const char *p = s; *p; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);
      if (g_unichar_iscntrl (c))
        {
          g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_RANGE,
                       "%s.%s: contains control character U+%04X", where, key,
                       c);
          return NULL;
        }
    }
  return g_strndup (s, len);
}

static gboolean
parse_histogram (json_object *cgroup, const char *where, KstaledIdleKind kind,
                 guint64 out[KSTALED_N_BUCKETS], GError **error)
{
  const char *key = idle_kind_names[kind];
  json_object *array;
  gsize n;

  array = get_member (cgroup, where, key, json_type_array, TRUE, error);
  if (array == NULL)
    return FALSE;
  n = json_object_array_length (array);
  if (n != KSTALED_N_BUCKETS)
    {
      g_set_error (error, KSTALED_REPORT_ERROR,
                   n > KSTALED_N_BUCKETS ? KSTALED_REPORT_ERROR_TOO_LARGE
                   : KSTALED_REPORT_ERROR_RANGE,
                   "%s.%s: %" G_GSIZE_FORMAT " entries instead of %d", where,
                   key, n, KSTALED_N_BUCKETS);
      return FALSE;
    }
  for (guint i = 0; i < KSTALED_N_BUCKETS; i++)
    {
      g_autofree gchar *entry_where = g_strdup_printf ("%s.%s[%u]", where,
                                                       key, i);

      if (!json_to_u64 (json_object_array_get_idx (array, i), entry_where,
                        KSTALED_MAX_BYTES, &out[i], error))
        return FALSE;
      if (i > 0 && out[i] > out[i - 1])
        {
          g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_RANGE,
                       "%s: %" G_GUINT64_FORMAT " exceeds the previous entry %"
                       G_GUINT64_FORMAT " (buckets are cumulative)",
                       entry_where, out[i], out[i - 1]);
          return FALSE;
        }
    }
  return TRUE;
}

static KstaledCgroup *
parse_cgroup (json_object *obj, guint index, GError **error)
{
  g_autofree gchar *where = g_strdup_printf ("return.cgroups[%u]", index);
  KstaledCgroup *cg;
  GError *local_error = NULL;

  if (!json_object_is_type (obj, json_type_object))
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TYPE,
                   "%s: expected object, got %s", where,
                   json_type_to_name (json_object_get_type (obj)));
      return NULL;
    }

  cg = g_new0 (KstaledCgroup, 1);
  cg->path = get_string (obj, where, "path", KSTALED_MAX_PATH_LEN, error);
  if (cg->path == NULL)
    goto fail;
  if (cg->path[0] != '/')
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_RANGE,
                   "%s.path: not an absolute cgroup path", where);
      goto fail;
    }
  if (!get_u64 (obj, where, "inode", TRUE, G_MAXINT64 - 1, &cg->inode, error) ||
      !get_u64 (obj, where, "scans", TRUE, KSTALED_MAX_COUNT, &cg->scans,
                error) ||
      !get_u64 (obj, where, "stale", TRUE, KSTALED_MAX_BYTES, &cg->stale,
                error) ||
      !get_u64 (obj, where, "memory-usage", TRUE, KSTALED_MAX_BYTES,
                &cg->memory_usage, error))
    goto fail;
  cg->has_memory_limit = get_u64 (obj, where, "memory-limit", FALSE,
                                  KSTALED_MAX_BYTES, &cg->memory_limit,
                                  &local_error);
  if (local_error != NULL)
    {
      g_propagate_error (error, local_error);
      goto fail;
    }
  for (guint kind = 0; kind < KSTALED_N_IDLE_KINDS; kind++)
    if (!parse_histogram (obj, where, kind, cg->idle[kind], error))
      goto fail;
  return cg;

fail:
  kstaled_cgroup_free (cg);
  return NULL;
}

/* Reads an optional member; TRUE when present and valid. */
static gboolean
get_optional_u64 (json_object *obj, const char *where, const char *key,
                  guint64 max, guint64 *out, gboolean *present, GError **error)
{
  GError *local_error = NULL;

  *present = get_u64 (obj, where, key, FALSE, max, out, &local_error);
  if (local_error != NULL)
    {
      g_propagate_error (error, local_error);
      return FALSE;
    }
  return TRUE;
}

static gboolean
check_qmp_error (json_object *root, GError **error)
{
  json_object *err, *desc, *klass;

  if (!json_object_object_get_ex (root, "error", &err))
    return TRUE;
  if (json_object_is_type (err, json_type_object) &&
      json_object_object_get_ex (err, "desc", &desc) &&
      json_object_is_type (desc, json_type_string))
    {
      const char *cls = "Error";

      if (json_object_object_get_ex (err, "class", &klass) &&
          json_object_is_type (klass, json_type_string))
        cls = json_object_get_string (klass);
      /* A QEMU without the device's patches lacks the command; one with
       * them answers "No kstaled device" when the machine has none. */
      if (g_str_equal (cls, "CommandNotFound") ||
          g_str_equal (json_object_get_string (desc), "No kstaled device"))
        {
          g_set_error (error, KSTALED_REPORT_ERROR,
                       KSTALED_REPORT_ERROR_NO_DEVICE, "no kstaled device "
                       "(QMP %.64s: %.200s)", cls,
                       json_object_get_string (desc));
          return FALSE;
        }
      /* %.200s: the text is QEMU's, but bound what reaches the log. */
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_QMP,
                   "QMP %.64s: %.200s", cls, json_object_get_string (desc));
    }
  else
    g_set_error_literal (error, KSTALED_REPORT_ERROR,
                         KSTALED_REPORT_ERROR_QMP, "QMP error reply");
  return FALSE;
}

KstaledReport *
kstaled_report_parse (const char *json, gsize len, GError **error)
{
  g_autoptr (json_object) root = NULL;
  g_autoptr (KstaledReport) report = NULL;
  json_object *ret, *cgroups;
  guint64 value;
  gsize n;
  gboolean have_age, have_scans;

  root = parse_json (json, len, KSTALED_MAX_REPLY_LEN, KSTALED_MAX_JSON_DEPTH,
                     error);
  if (root == NULL)
    return NULL;
  if (!json_object_is_type (root, json_type_object))
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TYPE,
                   "reply: expected object, got %s",
                   json_type_to_name (json_object_get_type (root)));
      return NULL;
    }
  if (!check_qmp_error (root, error))
    return NULL;
  ret = get_member (root, "reply", "return", json_type_object, TRUE, error);
  if (ret == NULL)
    return NULL;

  report = g_new0 (KstaledReport, 1);
  report->cgroups = g_ptr_array_new_with_free_func (kstaled_cgroup_free);
  report->qom_path = get_string (ret, "return", "qom-path",
                                 KSTALED_MAX_PATH_LEN, error);
  if (report->qom_path == NULL)
    return NULL;
  if (!get_u64 (ret, "return", "scan-seconds", TRUE, G_MAXUINT32, &value,
                error))
    return NULL;
  report->scan_seconds = (guint) value;
  if (!get_u64 (ret, "return", "stale-page-age", TRUE, 255, &value, error))
    return NULL;
  report->stale_page_age = (guint) value;
  if (!get_u64 (ret, "return", "reports", TRUE, KSTALED_MAX_COUNT,
                &report->reports, error) ||
      !get_u64 (ret, "return", "dropped-reports", TRUE, KSTALED_MAX_COUNT,
                &report->dropped_reports, error))
    return NULL;
  if (!get_optional_u64 (ret, "return", "report-age-ms", KSTALED_MAX_COUNT,
                         &report->report_age_ms, &have_age, error) ||
      !get_optional_u64 (ret, "return", "guest-scans", KSTALED_MAX_COUNT,
                         &report->guest_scans, &have_scans, error))
    return NULL;
  if (have_age != have_scans)
    {
      g_set_error_literal (error, KSTALED_REPORT_ERROR,
                           KSTALED_REPORT_ERROR_MISSING,
                           "return: report-age-ms and guest-scans must be "
                           "present together");
      return NULL;
    }
  report->has_report = have_age;

  cgroups = get_member (ret, "return", "cgroups", json_type_array, TRUE,
                        error);
  if (cgroups == NULL)
    return NULL;
  n = json_object_array_length (cgroups);
  if (n > KSTALED_MAX_CGROUPS)
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TOO_LARGE,
                   "return.cgroups: %" G_GSIZE_FORMAT " entries exceed the "
                   "limit of %d", n, KSTALED_MAX_CGROUPS);
      return NULL;
    }
  for (gsize i = 0; i < n; i++)
    {
      KstaledCgroup *cg = parse_cgroup (json_object_array_get_idx (cgroups, i),
                                        (guint) i, error);
      if (cg == NULL)
        return NULL;
      g_ptr_array_add (report->cgroups, cg);
    }
  return g_steal_pointer (&report);
}

guint64
kstaled_report_idle_bytes (const KstaledReport *report, guint bucket,
                           guint kinds)
{
  guint64 total = 0;

  g_return_val_if_fail (report != NULL, 0);
  g_return_val_if_fail (bucket < KSTALED_N_BUCKETS, 0);

  for (guint i = 0; i < report->cgroups->len; i++)
    {
      const KstaledCgroup *cg = g_ptr_array_index (report->cgroups, i);

      for (guint kind = 0; kind < KSTALED_N_IDLE_KINDS; kind++)
        if (kinds & (1u << kind))
          {
            guint64 add = cg->idle[kind][bucket];
            total = total > G_MAXUINT64 - add ? G_MAXUINT64 : total + add;
          }
    }
  return total;
}

gboolean
kstaled_early_report_parse (const char *json, gsize len, guint64 *stale_drop,
                            GError **error)
{
  g_autoptr (json_object) data = NULL;
  g_autofree gchar *qom_path = NULL;

  data = parse_json (json, len, KSTALED_MAX_EVENT_LEN, 4, error);
  if (data == NULL)
    return FALSE;
  if (!json_object_is_type (data, json_type_object))
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TYPE,
                   "event data: expected object, got %s",
                   json_type_to_name (json_object_get_type (data)));
      return FALSE;
    }
  qom_path = get_string (data, "data", "qom-path", KSTALED_MAX_PATH_LEN,
                         error);
  if (qom_path == NULL)
    return FALSE;
  return get_u64 (data, "data", "stale-drop", TRUE, KSTALED_MAX_BYTES,
                  stale_drop, error);
}

/* A guest-stats counter: absent, or -1 (QEMU's "not reported", which
 * json-c saturates), leaves it unset. */
static gboolean
get_guest_counter (json_object *stats, const char *key, guint64 *out,
                   gboolean *present, GError **error)
{
  json_object *member;

  *present = FALSE;
  if (json_object_object_get_ex (stats, key, &member) &&
      json_object_is_type (member, json_type_int) &&
      json_object_get_int64 (member) == G_MAXINT64)
    return TRUE;
  return get_optional_u64 (stats, "return.stats", key, KSTALED_MAX_COUNT, out,
                           present, error);
}

gboolean
kstaled_guest_counters_parse (const char *json, gsize len,
                              KstaledGuestCounters *counters, GError **error)
{
  g_autoptr (json_object) root = NULL;
  json_object *ret, *stats;

  *counters = (KstaledGuestCounters) { 0 };
  root = parse_json (json, len, KSTALED_MAX_EVENT_LEN, 4, error);
  if (root == NULL)
    return FALSE;
  if (!json_object_is_type (root, json_type_object))
    {
      g_set_error (error, KSTALED_REPORT_ERROR, KSTALED_REPORT_ERROR_TYPE,
                   "reply: expected object");
      return FALSE;
    }
  if (!check_qmp_error (root, error))
    return FALSE;
  ret = get_member (root, "reply", "return", json_type_object, TRUE, error);
  stats = ret ? get_member (ret, "return", "stats", json_type_object, TRUE,
                            error) : NULL;
  return stats != NULL &&
         get_guest_counter (stats, "stat-oom-kills", &counters->oom_kills,
                            &counters->has_oom_kills, error) &&
         get_guest_counter (stats, "stat-alloc-stalls",
                            &counters->alloc_stalls,
                            &counters->has_alloc_stalls, error);
}
