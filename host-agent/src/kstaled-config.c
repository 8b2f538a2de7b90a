#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-config.h"

#include <string.h>

#define DOMAIN_GROUP_PREFIX "domain "
#define KIB_PER_MIB G_GUINT64_CONSTANT (1024)
/* Sizes above this many MiB (1 PiB) are typos, and would overflow KiB. */
#define MAX_MIB (G_GUINT64_CONSTANT (1) << 30)

KstaledConfig *
kstaled_config_new (void)
{
  KstaledConfig *config = g_new0 (KstaledConfig, 1);

  config->uri = g_strdup (KSTALED_DEFAULT_URI);
  config->poll_interval = 10;
  config->state_file = g_strdup (KSTALED_DEFAULT_STATE_FILE);
  config->metrics_address = g_strdup (KSTALED_DEFAULT_METRICS_ADDRESS);
  config->metrics_token_file = g_strdup ("");
  config->balloon_stats_period = 5;
  config->defaults.enabled = TRUE;
  kstaled_policy_config_init (&config->defaults.policy);
  kstaled_host_config_init (&config->host);
  config->domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                           g_free);
  return config;
}

void
kstaled_config_free (KstaledConfig *config)
{
  if (config == NULL)
    return;
  g_free (config->uri);
  g_free (config->state_file);
  g_free (config->metrics_address);
  g_free (config->metrics_token_file);
  kstaled_host_config_clear (&config->host);
  g_hash_table_unref (config->domains);
  g_free (config);
}

static gboolean
read_uint (GKeyFile *kf, const char *group, const char *key, guint64 min,
           guint64 max, guint64 *out, GError **error)
{
  g_autofree gchar *value = NULL;
  g_autoptr (GError) local_error = NULL;

  if (!g_key_file_has_key (kf, group, key, NULL))
    return TRUE;
  value = g_key_file_get_value (kf, group, key, error);
  if (value == NULL)
    return FALSE;
  g_strstrip (value);
  if (!g_ascii_string_to_unsigned (value, 10, min, max, out, &local_error))
    {
      g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                   "[%s] %s: %s", group, key, local_error->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_guint (GKeyFile *kf, const char *group, const char *key, guint min,
            guint max, guint *out, GError **error)
{
  guint64 value = *out;

  if (!read_uint (kf, group, key, min, max, &value, error))
    return FALSE;
  *out = (guint) value;
  return TRUE;
}

static gboolean
read_mib (GKeyFile *kf, const char *group, const char *key, guint64 min_mib,
          guint64 *kib, GError **error)
{
  guint64 mib = *kib / KIB_PER_MIB;

  if (!read_uint (kf, group, key, min_mib, MAX_MIB, &mib, error))
    return FALSE;
  *kib = mib * KIB_PER_MIB;
  return TRUE;
}

static gboolean
read_bool (GKeyFile *kf, const char *group, const char *key, gboolean *out,
           GError **error)
{
  GError *local_error = NULL;
  gboolean value;

  if (!g_key_file_has_key (kf, group, key, NULL))
    return TRUE;
  value = g_key_file_get_boolean (kf, group, key, &local_error);
  if (local_error != NULL)
    {
      g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                   "[%s] %s: %s", group, key, local_error->message);
      g_error_free (local_error);
      return FALSE;
    }
  *out = value;
  return TRUE;
}

static gboolean
check_keys (GKeyFile *kf, const char *group, const char *const *allowed,
            GError **error)
{
  g_auto (GStrv) keys = g_key_file_get_keys (kf, group, NULL, error);

  if (keys == NULL)
    return FALSE;
  for (guint i = 0; keys[i]; i++)
    if (!g_strv_contains (allowed, keys[i]))
      {
        g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_KEY_NOT_FOUND,
                     "[%s]: unknown key \"%s\"", group, keys[i]);
        return FALSE;
      }
  return TRUE;
}

static const char *const policy_keys[] = {
  "enabled", "policy", "scan-seconds", "cold-age", "min-cold-age",
  "max-cold-age", "relaxed-cold-age", "adapt-interval",
  "promotion-target-ppm", "headroom-percent", "headroom-mib",
  "critical-headroom-mib", "min-memory-mib", "shares", "hysteresis-mib",
  "hysteresis-percent", "max-step-mib", "max-report-age", "stale-drop-mib",
  "emergency-stale-drop-percent", "swap-in-rate-kib", "major-fault-rate",
  "alloc-stall-rate", "shortfall-gain", "pressure-holdoff",
  "max-pressure-holdoff", "pressure-memory", "swap-backed-reclaim-percent",
  NULL
};

static const char *const agent_keys[] = {
  "uri", "poll-interval", "metrics-port", "metrics-address",
  "metrics-cgroups", "metrics-token-file", "state-file", "dry-run",
  "balloon-stats-period", "host-memory", "host-low-percent",
  "host-critical-percent", "host-psi-full-permille", "host-reserve-mib", NULL
};

static gboolean
read_mode (GKeyFile *kf, const char *group, KstaledPolicyMode *mode,
           GError **error)
{
  g_autofree gchar *value = NULL;

  if (!g_key_file_has_key (kf, group, "policy", NULL))
    return TRUE;
  value = g_key_file_get_string (kf, group, "policy", error);
  if (value == NULL)
    return FALSE;
  if (!kstaled_mode_from_string (g_strstrip (value), mode))
    {
      g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                   "[%s] policy: \"%s\" is not kstaled, mom, proxmox or "
                   "static", group, value);
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_domain_config (GKeyFile *kf, const char *group, KstaledDomainConfig *dc,
                    GError **error)
{
  KstaledPolicyConfig *p = &dc->policy;

  if (!check_keys (kf, group, policy_keys, error) ||
      !read_bool (kf, group, "enabled", &dc->enabled, error) ||
      !read_mode (kf, group, &p->mode, error) ||
      !read_guint (kf, group, "scan-seconds", 1, 3600, &p->scan_seconds,
                   error) ||
      !read_guint (kf, group, "cold-age", 1, 86400 * 7, &p->cold_age, error) ||
      !read_guint (kf, group, "min-cold-age", 1, 86400 * 7, &p->min_cold_age,
                   error) ||
      !read_guint (kf, group, "max-cold-age", 1, 86400 * 7, &p->max_cold_age,
                   error) ||
      !read_guint (kf, group, "relaxed-cold-age", 1, 86400 * 7,
                   &p->relaxed_cold_age, error) ||
      !read_guint (kf, group, "adapt-interval", 1, 86400,
                   &p->adapt_interval, error) ||
      !read_guint (kf, group, "promotion-target-ppm", 1, 1000000,
                   &p->promotion_target_ppm, error) ||
      !read_guint (kf, group, "headroom-percent", 0, 1000,
                   &p->headroom_percent, error) ||
      !read_mib (kf, group, "headroom-mib", 0, &p->headroom_kib, error) ||
      !read_mib (kf, group, "critical-headroom-mib", 0,
                 &p->critical_headroom_kib, error) ||
      !read_mib (kf, group, "min-memory-mib", 0, &p->min_memory_kib, error) ||
      !read_guint (kf, group, "shares", 0, 50000, &p->shares, error) ||
      !read_mib (kf, group, "hysteresis-mib", 0, &p->hysteresis_kib, error) ||
      !read_guint (kf, group, "hysteresis-percent", 0, 100,
                   &p->hysteresis_percent, error) ||
      !read_mib (kf, group, "max-step-mib", 1, &p->max_step_kib, error) ||
      !read_guint (kf, group, "max-report-age", 1, 86400, &p->max_report_age,
                   error) ||
      !read_mib (kf, group, "stale-drop-mib", 0, &p->stale_drop_kib, error) ||
      !read_guint (kf, group, "emergency-stale-drop-percent", 0, 100,
                   &p->emergency_stale_drop_percent, error) ||
      !read_uint (kf, group, "swap-in-rate-kib", 0, MAX_MIB,
                  &p->swap_in_rate_kib, error) ||
      !read_uint (kf, group, "major-fault-rate", 0, MAX_MIB,
                  &p->major_fault_rate, error) ||
      !read_uint (kf, group, "alloc-stall-rate", 0, MAX_MIB,
                  &p->alloc_stall_rate, error) ||
      !read_guint (kf, group, "shortfall-gain", 0, 1000, &p->shortfall_gain,
                   error) ||
      !read_guint (kf, group, "pressure-holdoff", 0, 86400,
                   &p->pressure_holdoff, error) ||
      !read_guint (kf, group, "max-pressure-holdoff", 0, 86400 * 7,
                   &p->max_pressure_holdoff, error) ||
      !read_guint (kf, group, "pressure-memory", 0, 86400 * 7,
                   &p->pressure_memory, error) ||
      !read_guint (kf, group, "swap-backed-reclaim-percent", 0, 100,
                   &p->swap_backed_reclaim_percent, error))
    return FALSE;
  if (p->min_cold_age > p->cold_age || p->cold_age > p->max_cold_age)
    {
      g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                   "[%s] cold-age: %u s is not within min-cold-age %u s and "
                   "max-cold-age %u s", group, p->cold_age, p->min_cold_age,
                   p->max_cold_age);
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_string (GKeyFile *kf, const char *group, const char *key, gchar **out,
             GError **error)
{
  gchar *value;

  if (!g_key_file_has_key (kf, group, key, NULL))
    return TRUE;
  value = g_key_file_get_string (kf, group, key, error);
  if (value == NULL)
    return FALSE;
  g_free (*out);
  *out = value;
  return TRUE;
}

/* "meminfo": the host's /proc; "none": no host arbiter; an absolute path:
 * a cgroup directory whose limit is the budget (kstaled-host.c). */
static gboolean
read_host_memory (GKeyFile *kf, KstaledHostConfig *host, GError **error)
{
  g_autofree gchar *value = NULL;

  if (!read_string (kf, "agent", "host-memory", &value, error))
    return FALSE;
  if (value == NULL)
    return TRUE;
  g_free (host->source);
  host->source = NULL;
  if (g_str_equal (value, "meminfo"))
    host->source = g_strdup ("");
  else if (g_path_is_absolute (value))
    host->source = g_steal_pointer (&value);
  else if (!g_str_equal (value, "none"))
    {
      g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                   "[agent] host-memory: \"%s\" is not meminfo, none or a "
                   "cgroup directory", value);
      return FALSE;
    }
  return TRUE;
}

KstaledConfig *
kstaled_config_load_data (const char *data, gsize len, GError **error)
{
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  g_autoptr (KstaledConfig) config = kstaled_config_new ();
  g_auto (GStrv) groups = NULL;

  if (!g_key_file_load_from_data (kf, data, len, G_KEY_FILE_NONE, error))
    return NULL;

  if (g_key_file_has_group (kf, "agent"))
    {
      if (!check_keys (kf, "agent", agent_keys, error) ||
          !read_string (kf, "agent", "uri", &config->uri, error) ||
          !read_guint (kf, "agent", "poll-interval", 1, 3600,
                       &config->poll_interval, error) ||
          !read_guint (kf, "agent", "metrics-port", 0, 65535,
                       &config->metrics_port, error) ||
          !read_string (kf, "agent", "metrics-address",
                        &config->metrics_address, error) ||
          !read_string (kf, "agent", "metrics-token-file",
                        &config->metrics_token_file, error) ||
          !read_guint (kf, "agent", "metrics-cgroups", 0,
                       KSTALED_MAX_METRICS_CGROUPS, &config->metrics_cgroups,
                       error) ||
          !read_string (kf, "agent", "state-file", &config->state_file,
                        error) ||
          !read_bool (kf, "agent", "dry-run", &config->dry_run, error) ||
          !read_guint (kf, "agent", "balloon-stats-period", 0, 3600,
                       &config->balloon_stats_period, error) ||
          !read_host_memory (kf, &config->host, error) ||
          !read_guint (kf, "agent", "host-low-percent", 0, 100,
                       &config->host.low_percent, error) ||
          !read_guint (kf, "agent", "host-critical-percent", 0, 100,
                       &config->host.critical_percent, error) ||
          !read_guint (kf, "agent", "host-psi-full-permille", 0, 1000,
                       &config->host.psi_full_permille, error) ||
          !read_mib (kf, "agent", "host-reserve-mib", 0,
                     &config->host.reserve_kib, error))
        return NULL;
      if (!g_hostname_is_ip_address (config->metrics_address))
        {
          g_set_error (error, G_KEY_FILE_ERROR,
                       G_KEY_FILE_ERROR_INVALID_VALUE,
                       "[agent] metrics-address: \"%s\" is not an IPv4 or "
                       "IPv6 address", config->metrics_address);
          return NULL;
        }
    }
  /* [policy] first: the domain groups start from its values. */
  if (g_key_file_has_group (kf, "policy") &&
      !read_domain_config (kf, "policy", &config->defaults, error))
    return NULL;

  groups = g_key_file_get_groups (kf, NULL);
  for (guint i = 0; groups[i]; i++)
    {
      const char *group = groups[i];
      const char *name;
      KstaledDomainConfig *dc;

      if (g_str_equal (group, "agent") || g_str_equal (group, "policy"))
        continue;
      if (!g_str_has_prefix (group, DOMAIN_GROUP_PREFIX) ||
          group[strlen (DOMAIN_GROUP_PREFIX)] == '\0')
        {
          g_set_error (error, G_KEY_FILE_ERROR,
                       G_KEY_FILE_ERROR_GROUP_NOT_FOUND,
                       "unknown group [%s] (expected [agent], [policy] or "
                       "[domain NAME])", group);
          return NULL;
        }
      name = group + strlen (DOMAIN_GROUP_PREFIX);
      dc = g_new (KstaledDomainConfig, 1);
      *dc = config->defaults;
      g_hash_table_replace (config->domains, g_strdup (name), dc);
      if (!read_domain_config (kf, group, dc, error))
        return NULL;
    }
  return g_steal_pointer (&config);
}

KstaledConfig *
kstaled_config_load_file (const char *path, GError **error)
{
  g_autofree gchar *data = NULL;
  gsize len;
  KstaledConfig *config;
  GError *local_error = NULL;

  if (!g_file_get_contents (path, &data, &len, error))
    return NULL;
  config = kstaled_config_load_data (data, len, &local_error);
  if (config == NULL)
    g_propagate_prefixed_error (error, local_error, "%s: ", path);
  return config;
}

const KstaledDomainConfig *
kstaled_config_for_domain (const KstaledConfig *config, const char *name)
{
  const KstaledDomainConfig *dc = g_hash_table_lookup (config->domains, name);

  return dc ? dc : &config->defaults;
}
