#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-host.h"

#include <gio/gio.h>
#include <stdlib.h>
#include <string.h>

#include "kstaled-baselines.h"

/* /proc/meminfo and the cgroup files are a few KiB; anything larger is not
 * what we think it is. */
#define MAX_FILE_LEN (64 * 1024)

typedef struct {
  KstaledVmRecord record;
  guint64 round;                /* the last round that recorded it */
} Entry;

struct _KstaledHost {
  KstaledHostConfig config;     /* of the current round; source unused */
  guint64 round;
  gchar *read_error;            /* the last failure, logged once */
  KstaledHostLevel level;
  KstaledHostReading reading;
  guint64 deflate_budget_kib;
  GHashTable *records;          /* domain name -> Entry */
};

void
kstaled_host_config_init (KstaledHostConfig *config)
{
  *config = (KstaledHostConfig) {
    .source = g_strdup (""),
    .low_percent = 20,
    .critical_percent = 5,
    .psi_full_permille = 10,
    .reserve_kib = 256 * 1024,
  };
}

void
kstaled_host_config_clear (KstaledHostConfig *config)
{
  g_clear_pointer (&config->source, g_free);
}

static gboolean
parse_error (GError **error, const char *what)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s", what);
  return FALSE;
}

/* "Key:   12345 kB" lines; returns the value of @key in KiB. */
static gboolean
meminfo_value (const char *text, const char *key, guint64 *kib)
{
  gsize key_len = strlen (key);

  for (const char *line = text; line != NULL && *line != '\0';)
    {
      const char *end = strchr (line, '\n');

      if (strncmp (line, key, key_len) == 0 && line[key_len] == ':')
        {
          g_autofree gchar *value = g_strndup (line + key_len + 1,
                                               end ? (gsize) (end - line) -
                                               key_len - 1 : strlen (line));

          g_strstrip (value);
          if (!g_str_has_suffix (value, " kB"))
            return FALSE;
          value[strlen (value) - 3] = '\0';
          return g_ascii_string_to_unsigned (value, 10, 0, G_MAXUINT64 / 1024,
                                             kib, NULL);
        }
      line = end ? end + 1 : NULL;
    }
  return FALSE;
}

gboolean
kstaled_host_parse_meminfo (const char *text, KstaledHostReading *reading,
                            GError **error)
{
  guint64 total, available;

  if (!meminfo_value (text, "MemTotal", &total) ||
      !meminfo_value (text, "MemAvailable", &available))
    return parse_error (error, "no MemTotal or MemAvailable in kB");
  if (total == 0 || available > total)
    return parse_error (error, "MemAvailable above MemTotal");
  reading->total_kib = total;
  reading->available_kib = available;
  return TRUE;
}

/* "avg10=1.23" as 0.1 % units, rounded down. */
static gboolean
parse_avg10 (const char *line, guint *permille)
{
  const char *p = strstr (line, " avg10=");
  char *end;
  double value;

  if (p == NULL)
    return FALSE;
  value = g_ascii_strtod (p + strlen (" avg10="), &end);
  /* written so that NaN fails too */
  if (end == p + strlen (" avg10=") || !(value >= 0 && value <= 100))
    return FALSE;
  *permille = (guint) (value * 10);
  return TRUE;
}

gboolean
kstaled_host_parse_pressure (const char *text, KstaledHostReading *reading,
                             GError **error)
{
  g_auto (GStrv) lines = g_strsplit (text, "\n", 0);
  gboolean some = FALSE, full = FALSE;

  for (guint i = 0; lines[i]; i++)
    {
      if (g_str_has_prefix (lines[i], "some "))
        some = parse_avg10 (lines[i], &reading->psi_some_permille);
      else if (g_str_has_prefix (lines[i], "full "))
        full = parse_avg10 (lines[i], &reading->psi_full_permille);
    }
  if (!some || !full)
    return parse_error (error, "no \"some\" and \"full\" avg10 lines");
  reading->has_psi = TRUE;
  return TRUE;
}

/* "max" is G_MAXUINT64; otherwise bytes, returned in KiB.  cgroup v1
 * writes no limit as a huge number (PAGE_COUNTER_MAX pages): a pebibyte
 * or more is no limit too. */
static gboolean
cgroup_limit_kib (const char *text, guint64 *kib)
{
  g_autofree gchar *value = g_strstrip (g_strdup (text));
  guint64 bytes;

  if (g_str_equal (value, "max"))
    {
      *kib = G_MAXUINT64;
      return TRUE;
    }
  if (!g_ascii_string_to_unsigned (value, 10, 0, G_MAXUINT64, &bytes, NULL))
    return FALSE;
  *kib = bytes >= (G_GUINT64_CONSTANT (1) << 50) ? G_MAXUINT64 : bytes / 1024;
  return TRUE;
}

/* The inactive file cache of memory.stat, in KiB: v1's hierarchical
 * "total_inactive_file" (its "inactive_file" is the cgroup's own only),
 * or v2's "inactive_file", which is hierarchical already. */
static gboolean
cgroup_inactive_file_kib (const char *stat, guint64 *kib)
{
  g_auto (GStrv) lines = g_strsplit (stat, "\n", 0);
  const char *value = NULL;
  guint64 bytes;

  for (guint i = 0; lines[i]; i++)
    {
      if (g_str_has_prefix (lines[i], "total_inactive_file "))
        {
          value = lines[i] + strlen ("total_inactive_file ");
          break;
        }
      if (g_str_has_prefix (lines[i], "inactive_file "))
        value = lines[i] + strlen ("inactive_file ");
    }
  if (value == NULL ||
      !g_ascii_string_to_unsigned (value, 10, 0, G_MAXUINT64, &bytes, NULL))
    return FALSE;
  *kib = bytes / 1024;
  return TRUE;
}

gboolean
kstaled_host_parse_cgroup (const char *max, const char *high,
                           const char *current, const char *stat,
                           KstaledHostReading *reading, GError **error)
{
  guint64 max_kib, high_kib, current_kib, inactive_file_kib, used_kib;

  if (!cgroup_limit_kib (max, &max_kib) ||
      !cgroup_limit_kib (high, &high_kib) ||
      !cgroup_limit_kib (current, &current_kib) || current_kib == G_MAXUINT64)
    return parse_error (error, "memory.max, memory.high or memory.current "
                        "is not a number of bytes");
  if (!cgroup_inactive_file_kib (stat, &inactive_file_kib))
    return parse_error (error, "memory.stat has no inactive_file line");
  reading->total_kib = MIN (max_kib, high_kib);
  if (reading->total_kib == G_MAXUINT64 || reading->total_kib == 0)
    return parse_error (error, "the cgroup has neither memory.max nor "
                        "memory.high: it gives the VMs no budget");
  /* The cgroup's inactive page cache (disk images read through the host's
   * cache, say) is reclaimed before any VM's memory and is no memory the
   * VMs use: the "working set" of cAdvisor and the kubelet likewise. */
  used_kib = current_kib > inactive_file_kib ? current_kib - inactive_file_kib
                                             : 0;
  reading->available_kib = reading->total_kib > used_kib
                           ? reading->total_kib - used_kib : 0;
  return TRUE;
}

static gchar *
read_small_file (const char *dir, const char *name, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  gchar *text;
  gsize len;

  if (!g_file_get_contents (path, &text, &len, error))
    return NULL;
  if (len > MAX_FILE_LEN || strlen (text) != len)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "%s: not a small text file", path);
      g_free (text);
      return NULL;
    }
  return text;
}

/* A cgroup v2 directory (memory.max, memory.high, memory.current), or a
 * cgroup v1 one (memory.limit_in_bytes, memory.soft_limit_in_bytes,
 * memory.usage_in_bytes), as hosts with the hybrid hierarchy (Debian 12
 * without systemd) have; memory.stat in both.  v1's soft limit is the
 * budget memory.high is on v2: it throttles nothing and kills nothing. */
static gboolean
read_cgroup (const char *dir, KstaledHostReading *reading, GError **error)
{
  g_autofree gchar *v2_max = g_build_filename (dir, "memory.max", NULL);
  g_autofree gchar *v1_soft = g_build_filename (dir,
                                                "memory.soft_limit_in_bytes",
                                                NULL);
  const gboolean v2 = g_file_test (v2_max, G_FILE_TEST_EXISTS);
  g_autofree gchar *max = read_small_file (dir, v2 ? "memory.max"
                                                   : "memory.limit_in_bytes",
                                           error);
  g_autofree gchar *high = max == NULL ? NULL
                           : v2 ? read_small_file (dir, "memory.high", error)
                           : g_file_test (v1_soft, G_FILE_TEST_EXISTS)
                           ? read_small_file (dir,
                                              "memory.soft_limit_in_bytes",
                                              error)
                           : g_strdup ("max");
  g_autofree gchar *current = high == NULL ? NULL
                              : read_small_file (dir, v2 ? "memory.current"
                                                 : "memory.usage_in_bytes",
                                                 error);
  g_autofree gchar *stat = current == NULL ? NULL
                           : read_small_file (dir, "memory.stat", error);

  return stat != NULL &&
         kstaled_host_parse_cgroup (max, high, current, stat, reading, error);
}

gboolean
kstaled_host_read (const KstaledHostConfig *config,
                   KstaledHostReading *reading, GError **error)
{
  gboolean proc = config->source[0] == '\0' ||
                  g_str_equal (config->source, "/proc");
  g_autofree gchar *pressure = NULL;

  *reading = (KstaledHostReading) { 0 };
  if (proc)
    {
      g_autofree gchar *meminfo = read_small_file ("/proc", "meminfo", error);

      if (meminfo == NULL ||
          !kstaled_host_parse_meminfo (meminfo, reading, error))
        return FALSE;
      pressure = read_small_file ("/proc/pressure", "memory", NULL);
    }
  else if (!read_cgroup (config->source, reading, error))
    return FALSE;
  else
    pressure = read_small_file (config->source, "memory.pressure", NULL);
  /* Kernels without PSI (psi=0) have no pressure file: MemAvailable alone
   * then decides. */
  if (pressure != NULL &&
      !kstaled_host_parse_pressure (pressure, reading, error))
    return FALSE;
  return TRUE;
}

KstaledHost *
kstaled_host_new (void)
{
  KstaledHost *host = g_new0 (KstaledHost, 1);

  host->records = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         g_free);
  return host;
}

void
kstaled_host_free (KstaledHost *host)
{
  if (host == NULL)
    return;
  g_free (host->read_error);
  g_hash_table_unref (host->records);
  g_free (host);
}

static guint
permille_of (guint64 part, guint64 total)
{
  return total == 0 ? 1000 : (guint) MIN (part * 1000 / total, 1000);
}

/* A short host counts as relaxed again only KSTALED_HOST_RELAX_PERCENT
 * above low-percent: the memory it took would otherwise go straight back
 * to the guests, and be taken again, around the threshold. */
static KstaledHostLevel
classify (const KstaledHostConfig *config, const KstaledHostReading *r,
          KstaledHostLevel previous)
{
  guint free_permille = permille_of (r->available_kib, r->total_kib);
  guint low = config->low_percent;

  if (free_permille < config->critical_percent * 10 ||
      (r->has_psi && config->psi_full_permille > 0 &&
       r->psi_full_permille >= config->psi_full_permille))
    return KSTALED_HOST_CRITICAL;
  if (previous == KSTALED_HOST_SHORT || previous == KSTALED_HOST_CRITICAL)
    low = MIN (low + KSTALED_HOST_RELAX_PERCENT, 100);
  if (free_permille < low * 10)
    return KSTALED_HOST_SHORT;
  return KSTALED_HOST_RELAXED;
}

void
kstaled_host_begin_round (KstaledHost *host, const KstaledHostConfig *config,
                          const KstaledHostReading *reading)
{
  g_autoptr (GArray) vms = g_array_new (FALSE, TRUE, sizeof (KstaledVmRecord));
  g_autoptr (GPtrArray) entries = g_ptr_array_new ();
  guint64 target_free, shortfall = 0;
  GHashTableIter iter;
  gpointer value;

  host->config = *config;
  host->config.source = NULL;
  host->level = reading ? classify (config, reading, host->level)
                        : KSTALED_HOST_UNKNOWN;
  host->reading = reading ? *reading : (KstaledHostReading) { 0 };
  host->deflate_budget_kib = host->reading.available_kib > config->reserve_kib
                             ? host->reading.available_kib -
                               config->reserve_kib : 0;

  /* Domains no decision recorded in the last round are gone or disabled. */
  g_hash_table_iter_init (&iter, host->records);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Entry *e = value;

      if (e->round < host->round)
        {
          g_hash_table_iter_remove (&iter);
          continue;
        }
      e->record.take_kib = 0;
      e->record.has_proxmox_target = FALSE;
      g_ptr_array_add (entries, e);
      g_array_append_val (vms, e->record);
    }
  host->round++;
  if (reading == NULL || vms->len == 0)
    return;

  target_free = host->reading.total_kib / 100 * config->low_percent +
                host->reading.total_kib % 100 * config->low_percent / 100;
  if (host->reading.available_kib < target_free)
    shortfall = target_free - host->reading.available_kib;
  kstaled_host_allocate_shortfall ((KstaledVmRecord *) (void *) vms->data,
                                   vms->len, shortfall);
  kstaled_proxmox_allocate ((KstaledVmRecord *) (void *) vms->data, vms->len,
                            host->reading.total_kib,
                            host->reading.total_kib -
                            host->reading.available_kib);
  for (guint i = 0; i < vms->len; i++)
    ((Entry *) entries->pdata[i])->record =
      g_array_index (vms, KstaledVmRecord, i);
}

void
kstaled_host_poll (KstaledHost *host, const KstaledHostConfig *config)
{
  g_autoptr (GError) error = NULL;
  KstaledHostReading reading;

  if (config->source == NULL)
    {
      kstaled_host_begin_round (host, config, NULL);
      return;
    }
  if (!kstaled_host_read (config, &reading, &error))
    {
      if (g_strcmp0 (host->read_error, error->message) != 0)
        g_warning ("cannot read the host's memory, so no domain grows or "
                   "shrinks for the host's sake: %s", error->message);
      g_free (host->read_error);
      host->read_error = g_strdup (error->message);
      kstaled_host_begin_round (host, config, NULL);
      return;
    }
  if (host->read_error != NULL)
    g_message ("reading the host's memory works again");
  g_clear_pointer (&host->read_error, g_free);
  kstaled_host_begin_round (host, config, &reading);
}

KstaledHostLevel
kstaled_host_level (const KstaledHost *host)
{
  return host ? host->level : KSTALED_HOST_UNKNOWN;
}

guint
kstaled_host_free_permille (const KstaledHost *host)
{
  if (host == NULL || host->level == KSTALED_HOST_UNKNOWN)
    return 1000;
  return permille_of (host->reading.available_kib, host->reading.total_kib);
}

guint64
kstaled_host_grant (KstaledHost *host, guint64 want_kib)
{
  guint64 granted;

  if (host == NULL || host->level == KSTALED_HOST_UNKNOWN)
    return want_kib;
  granted = MIN (want_kib, host->deflate_budget_kib);
  host->deflate_budget_kib -= granted;
  return granted;
}

void
kstaled_host_record (KstaledHost *host, const char *domain,
                     const KstaledVmRecord *record)
{
  Entry *e = g_hash_table_lookup (host->records, domain);
  KstaledVmRecord results;

  if (e == NULL)
    {
      e = g_new0 (Entry, 1);
      g_hash_table_insert (host->records, g_strdup (domain), e);
    }
  /* Keep this round's results: they were computed for this domain. */
  results = e->record;
  e->record = *record;
  e->record.take_kib = results.take_kib;
  e->record.has_proxmox_target = results.has_proxmox_target;
  e->record.proxmox_target_kib = results.proxmox_target_kib;
  e->round = host->round;
}

const KstaledVmRecord *
kstaled_host_lookup (const KstaledHost *host, const char *domain)
{
  Entry *e = host ? g_hash_table_lookup (host->records, domain) : NULL;

  return e ? &e->record : NULL;
}

/* How cold a domain's memory is for the host, in 1/1000 of its memory and
 * scaled down by its shares: the higher, the earlier it gives. */
static guint64
coldness (const KstaledVmRecord *r)
{
  guint64 share = permille_of (r->long_cold_kib, MAX (r->actual_kib, 1));

  return share * 1000 / MAX (r->shares, 1);
}

static gint
compare_coldness (gconstpointer a, gconstpointer b, gpointer data)
{
  const KstaledVmRecord *vms = data;
  guint64 ca = coldness (&vms[*(const guint *) a]);
  guint64 cb = coldness (&vms[*(const guint *) b]);

  return ca < cb ? 1 : ca > cb ? -1 : 0;
}

guint64
kstaled_host_allocate_shortfall (KstaledVmRecord *vms, guint n,
                                 guint64 shortfall_kib)
{
  g_autofree guint *order = g_new (guint, MAX (n, 1));

  for (guint i = 0; i < n; i++)
    {
      order[i] = i;
      vms[i].take_kib = 0;
    }
  g_qsort_with_data (order, (gint) n, sizeof *order, compare_coldness, vms);
  for (guint i = 0; i < n && shortfall_kib > 0; i++)
    {
      KstaledVmRecord *r = &vms[order[i]];

      if (r->proxmox || r->shares == 0)
        continue;
      r->take_kib = MIN (r->reclaimable_kib, shortfall_kib);
      shortfall_kib -= r->take_kib;
    }
  return shortfall_kib;
}

/* The selected value of a sysfs choice ("always [madvise] never"), if it
 * is one of @known. */
static const char *
thp_choice (const char *text, const char *const *known)
{
  const char *open = strchr (text, '[');
  const char *close = open ? strchr (open, ']') : NULL;

  if (close == NULL)
    return NULL;
  for (guint i = 0; known[i]; i++)
    if (strlen (known[i]) == (gsize) (close - open - 1) &&
        strncmp (open + 1, known[i], close - open - 1) == 0)
      return known[i];
  return NULL;
}

gboolean
kstaled_host_parse_thp (const char *enabled, const char *pmd_enabled,
                        gboolean *huge_guest_ram, GError **error)
{
  static const char *const global[] = { "always", "madvise", "never", NULL };
  static const char *const per_size[] = { "always", "inherit", "madvise",
                                          "never", NULL };
  const char *choice = thp_choice (enabled, global);
  const char *pmd_choice = pmd_enabled ? thp_choice (pmd_enabled, per_size)
                                       : "inherit";

  if (choice == NULL || pmd_choice == NULL)
    return parse_error (error, "transparent_hugepage/enabled is none of "
                        "always, madvise, never (or inherit per size)");
  if (!g_str_equal (pmd_choice, "inherit"))
    choice = pmd_choice;
  *huge_guest_ram = !g_str_equal (choice, "never");
  return TRUE;
}

gchar *
kstaled_host_check_thp (const char *dir)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *pmd_size = NULL, *pmd_enabled = NULL, *enabled = NULL;
  gboolean huge_guest_ram;
  guint64 pmd_bytes;

  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    return NULL;
  pmd_size = read_small_file (dir, "hpage_pmd_size", NULL);
  if (pmd_size != NULL &&
      g_ascii_string_to_unsigned (g_strstrip (pmd_size), 10, 1, G_MAXUINT32,
                                  &pmd_bytes, NULL))
    {
      g_autofree gchar *name = g_strdup_printf ("hugepages-%" G_GUINT64_FORMAT
                                                "kB", pmd_bytes / 1024);
      g_autofree gchar *pmd_dir = g_build_filename (dir, name, NULL);

      /* Kernels before 6.8 have no per-size settings. */
      if (g_file_test (pmd_dir, G_FILE_TEST_IS_DIR))
        pmd_enabled = read_small_file (pmd_dir, "enabled", &error);
    }
  if (error == NULL)
    enabled = read_small_file (dir, "enabled", &error);
  if (enabled == NULL ||
      !kstaled_host_parse_thp (enabled, pmd_enabled, &huge_guest_ram, &error))
    return g_strdup_printf ("cannot tell whether guest RAM is backed by "
                            "huge pages: %s", error->message);
  if (!huge_guest_ram)
    return NULL;
  return g_strdup_printf ("transparent huge pages are on for guest RAM: "
                          "the host gets back little of what the balloons "
                          "free (4 KiB pages inside 2 MiB ones), and a "
                          "ballooned guest may cost it more than an "
                          "unballooned one.  Set %s/enabled to never on "
                          "hosts that balloon (docs/balloon-policy.md)", dir);
}

const char *
kstaled_host_level_to_string (KstaledHostLevel level)
{
  static const char *const names[] = {
    [KSTALED_HOST_UNKNOWN] = "unknown",
    [KSTALED_HOST_RELAXED] = "relaxed",
    [KSTALED_HOST_SHORT] = "short",
    [KSTALED_HOST_CRITICAL] = "critical",
  };

  g_return_val_if_fail (level < G_N_ELEMENTS (names), "unknown");
  return names[level];
}
