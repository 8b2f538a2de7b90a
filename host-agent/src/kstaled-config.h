/* Agent configuration from a GKeyFile: [agent] for the daemon, [policy] for
 * the policy defaults, [domain NAME] to override policy keys per domain.
 * Unknown groups and keys are errors, so that a typo does not silently leave
 * a default in force. */
#pragma once

#include <glib.h>

#include "kstaled-policy.h"

G_BEGIN_DECLS

#define KSTALED_DEFAULT_CONFIG_FILE "/etc/kstaled-agent.conf"
#define KSTALED_DEFAULT_URI "qemu:///system"
#define KSTALED_DEFAULT_STATE_FILE "/run/kstaled-agent/state.json"
#define KSTALED_DEFAULT_METRICS_ADDRESS "127.0.0.1"
/* Per-cgroup series cost about 26 samples of up to 2 KiB each per cgroup
 * (the path is a label): more than this many per domain is a mistake. */
#define KSTALED_MAX_METRICS_CGROUPS 64

typedef struct {
  gboolean enabled;
  KstaledPolicyConfig policy;
} KstaledDomainConfig;

typedef struct {
  gchar *uri;
  guint poll_interval;          /* seconds */
  guint metrics_port;           /* 0: no metrics endpoint */
  gchar *metrics_address;       /* an IPv4 or IPv6 address to bind */
  gchar *metrics_token_file;    /* empty: no authorization */
  guint metrics_cgroups;        /* per-cgroup series for this many of each
                                 * domain's largest cgroups; 0: none */
  gchar *state_file;            /* empty: none */
  gboolean dry_run;
  guint balloon_stats_period;   /* seconds; 0: do not set it */
  KstaledHostConfig host;
  KstaledDomainConfig defaults;
  GHashTable *domains;          /* name -> KstaledDomainConfig */
} KstaledConfig;

KstaledConfig *kstaled_config_new (void);
KstaledConfig *kstaled_config_load_data (const char *data, gsize len,
                                         GError **error);
/* A missing file is a G_FILE_ERROR_NOENT error; the caller decides whether
 * defaults will do. */
KstaledConfig *kstaled_config_load_file (const char *path, GError **error);
void kstaled_config_free (KstaledConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KstaledConfig, kstaled_config_free)

const KstaledDomainConfig *kstaled_config_for_domain (const KstaledConfig *config,
                                                      const char *name);

G_END_DECLS
