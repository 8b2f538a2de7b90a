/* What the daemon knows about each domain, and its three renderings: the
 * state file (JSON, read by kstaled-ctl), the kstaled-ctl table, and the
 * Prometheus metrics.  Pure functions of KstaledDomainStatus, no I/O except
 * kstaled_status_write_file. */
#pragma once

#include <glib.h>
#include <json-c/json.h>

#include "kstaled-policy.h"
#include "kstaled-report.h"

G_BEGIN_DECLS

#define KSTALED_STATUS_VERSION 1
/* The state file is the daemon's; still, kstaled-ctl bounds what it reads. */
#define KSTALED_STATUS_MAX_FILE_LEN (64 * 1024 * 1024)

typedef enum {
  KSTALED_DEVICE_UNKNOWN,           /* not queried yet */
  KSTALED_DEVICE_PRESENT,
  KSTALED_DEVICE_ABSENT,            /* left alone */
} KstaledDevicePresence;

typedef struct {
  gchar *name;
  gboolean enabled;                 /* per the configuration */
  KstaledDevicePresence device;
  gchar *last_error;                /* of the last poll; NULL if it worked */
  /* Its libvirt calls have not returned within the agent's deadline; it
   * is skipped until they do. */
  gboolean unresponsive;
  KstaledReport *report;            /* last good report, or NULL */
  gboolean has_decision;
  KstaledDecision decision;         /* of the last poll */
  gint64 decision_time;             /* wall clock, microseconds */
  /* The last decision that changed (or, dry-run, would have changed) the
   * balloon. */
  gboolean has_action;
  KstaledDecision action;
  gint64 action_time;
  gboolean action_dry_run;
  guint64 actions_total[3];         /* by KstaledAction */
  guint64 polls_total;
  guint64 poll_errors_total;
  guint64 early_reports_total;
} KstaledDomainStatus;

KstaledDomainStatus *kstaled_domain_status_new (const char *name);
void kstaled_domain_status_free (KstaledDomainStatus *status);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KstaledDomainStatus, kstaled_domain_status_free)

/* The state document: {"version": 1, "time": …, "dry-run": …,
 * "domains": [ … ]}, domains in the order of @domains. */
json_object *kstaled_status_to_json (GPtrArray *domains, gboolean dry_run,
                                     gint64 now);
/* Writes the state document to @path atomically (temporary file and
 * rename), creating its directory. */
gboolean kstaled_status_write_file (const char *path, GPtrArray *domains,
                                    gboolean dry_run, GError **error);
/* Reads and checks the top level of a state document. */
json_object *kstaled_status_read_file (const char *path, GError **error);
/* The kstaled-ctl table of a state document. */
gchar *kstaled_status_format_table (json_object *state);

/* Prometheus text exposition format (version 0.0.4). */
gchar *kstaled_status_format_metrics (GPtrArray *domains);

G_END_DECLS
