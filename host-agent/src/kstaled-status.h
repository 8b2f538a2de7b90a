/* What the daemon knows about each domain, and its three renderings: the
 * state file (JSON, read by kstaled-ctl), the kstaled-ctl table, and the
 * Prometheus metrics.  Pure functions of KstaledDomainStatus, no I/O except
 * kstaled_status_write_file and the state writer.
 *
 * A guest chooses how many cgroups it reports (up to KSTALED_MAX_CGROUPS)
 * and their paths, so neither rendering grows with the report: both carry
 * per-domain totals, and per-cgroup detail only for a bounded number of the
 * largest cgroups by memory usage. */
#pragma once

#include <glib.h>
#include <json-c/json.h>

#include "kstaled-config.h"
#include "kstaled-policy.h"
#include "kstaled-report.h"

G_BEGIN_DECLS

#define KSTALED_STATUS_VERSION 2
/* The state file is the daemon's; still, kstaled-ctl bounds what it reads. */
#define KSTALED_STATUS_MAX_FILE_LEN (64 * 1024 * 1024)
/* Cgroups per domain the state file details (kstaled-ctl's table): the
 * largest by memory usage. */
#define KSTALED_STATUS_STATE_CGROUPS 16
/* At most one state file write per this many milliseconds. */
#define KSTALED_STATUS_WRITE_INTERVAL_MS 1000

typedef enum {
  KSTALED_DEVICE_UNKNOWN,           /* not queried yet */
  KSTALED_DEVICE_PRESENT,
  KSTALED_DEVICE_ABSENT,            /* left alone */
  KSTALED_DEVICE_NOT_NEEDED,        /* absent; its policy (a baseline) needs none */
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

/* The state document: {"version": 2, "time": …, "poll-interval": …,
 * "dry-run": …, "domains": [ … ]}, domains in the order of @domains; @now is
 * wall-clock microseconds. */
json_object *kstaled_status_to_json (GPtrArray *domains,
                                     const KstaledConfig *config, gint64 now);
/* Writes @state to @path atomically (temporary file and rename), compact,
 * readable by the owner and its group only, creating its directory. */
gboolean kstaled_status_write_file (const char *path, json_object *state,
                                    GError **error);
/* Reads and checks the top level of a state document. */
json_object *kstaled_status_read_file (const char *path, GError **error);

/* The kstaled-ctl table of a state document: a header with the state's age
 * (and a warning when it is older than three poll intervals), then one row
 * per domain, its columns as wide as the longest value; @now is wall-clock
 * microseconds. */
gchar *kstaled_status_format_table (json_object *state, gint64 now);
/* The age of @state in seconds at @now, or -1 if it has no valid time;
 * *@stale is TRUE when that is more than three of its poll intervals. */
gint64 kstaled_status_age (json_object *state, gint64 now, gboolean *stale);
/* Removes the domains not named in @names from @state; FALSE with @error
 * naming the first of @names that @state does not have. */
gboolean kstaled_status_filter (json_object *state, const char *const *names,
                                GError **error);

/* Prometheus text exposition format (version 0.0.4): per-domain series,
 * plus per-cgroup series for config->metrics_cgroups cgroups per domain. */
gchar *kstaled_status_format_metrics (GPtrArray *domains,
                                      const KstaledConfig *config);

/* Coalesces state file writes: the first request after a quiet interval
 * writes at once, later ones within KSTALED_STATUS_WRITE_INTERVAL_MS (or
 * @interval_ms) of it make one write at the end of that interval, so a
 * burst of polls and early reports costs at most one write per interval. */
typedef json_object *(*KstaledStateFunc) (gpointer user_data);
typedef struct _KstaledStateWriter KstaledStateWriter;

/* Its timer runs in @context; @func renders the document when it is due. */
KstaledStateWriter *kstaled_state_writer_new (GMainContext *context,
                                              guint interval_ms,
                                              KstaledStateFunc func,
                                              gpointer user_data);
/* Asks for the state to be written to @path (empty: nowhere). */
void kstaled_state_writer_schedule (KstaledStateWriter *writer,
                                    const char *path);
/* Makes a pending write first. */
void kstaled_state_writer_free (KstaledStateWriter *writer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KstaledStateWriter, kstaled_state_writer_free)

G_END_DECLS
