#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-agent.h"

#include <gio/gio.h>
#include <glib-unix.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <string.h>

#include "kstaled-autocleanups.h"
#include "kstaled-config.h"
#include "kstaled-domain.h"
#include "kstaled-log.h"
#include "kstaled-metrics.h"
#include "kstaled-status.h"

#define QUERY_KSTALED "{\"execute\":\"query-kstaled\"}"
#define EARLY_REPORT_EVENT "KSTALED_EARLY_REPORT"
#define RECONNECT_MIN_S 1
#define RECONNECT_MAX_S 30
/* libvirt keepalive: a libvirtd that stops answering for 5 * 3 s is gone
 * even if its socket stays open. */
#define KEEPALIVE_INTERVAL_S 5
#define KEEPALIVE_COUNT 3
/* libvirt waits for a QEMU monitor reply without a deadline (a stopped
 * QEMU, or one whose big lock is held by stuck storage, never answers) and
 * for another call's domain job up to 30 s.  A healthy domain answers the
 * agent's calls in milliseconds, even under TCG: one that has not within
 * this many seconds is unresponsive. */
#define DOMAIN_DEADLINE_S 10
/* Threads for domain I/O.  Each unresponsive domain keeps one more, stuck
 * in libvirt until its QEMU answers, so that it never takes one from the
 * others. */
#define DOMAIN_WORKERS 4

typedef enum {
  JOB_LIST,                     /* the running domains */
  JOB_POLL,                     /* one domain's XML, statistics and report */
  JOB_SET_BALLOON,
} JobKind;

/* What outlives the agent refers to it through this: a worker stuck in
 * libvirt finishes its job after the agent is gone, and a callback queued
 * on the context may be dispatched then. */
typedef struct {
  KstaledAgent *agent;          /* NULL once the agent is freed */
} AgentRef;

/* One piece of libvirt I/O, done by a worker thread.  The worker touches
 * only the job's own fields; the agent and its domains belong to the main
 * thread, which gets the job back (finish_job) when the worker is done. */
typedef struct {
  AgentRef *agent_ref;
  GMainContext *context;
  guint generation;             /* of the connection it was made on */
  JobKind kind;
  gboolean urgent;              /* a deflation may follow: goes first */
  guint64 sequence;             /* submission order */
  gint64 submitted_us;
  gint64 started_us;            /* when a worker took it */
  gboolean stuck;               /* counted in agent->stuck_jobs */
  virConnectPtr conn;           /* JOB_LIST */
  gchar *uri;                   /* the others: looked up by the worker */
  unsigned char uuid[VIR_UUID_BUFLEN];
  virDomainPtr dom;             /* on the worker's connection */
  gchar *name;

  /* What to do. */
  gboolean read_xml;
  gboolean needs_device;        /* the kstaled policy: no device, no poll */
  /* FALSE once known absent and not needed: no monitor command. */
  gboolean query_device;
  guint stats_period;           /* seconds; 0: leave it */
  gchar *device_command;        /* kstaled-set-config to send, or NULL */
  KstaledDecision decision;     /* JOB_SET_BALLOON: its new_kib */

  /* What came of it. */
  GPtrArray *errors;            /* "what: libvirt's message" */
  virDomainPtr *doms;           /* JOB_LIST */
  int ndoms;
  gboolean stats_period_set;
  gboolean has_xml;
  KstaledDomainXml xml;
  gboolean has_stats;
  KstaledDomainStats stats;
  gboolean migrating;
  gboolean queried;
  KstaledReport *report;
  GError *report_error;
  KstaledGuestCounters counters;
  gboolean device_configured;
  gboolean balloon_set;
} Job;

typedef struct {
  KstaledDomainStatus *status;
  virDomainPtr dom;
  int id;                       /* libvirt domain id: changes on restart */
  KstaledPolicyState policy;
  guint64 pending_stale_drop;   /* bytes, from early reports */
  gboolean rebooted;
  gboolean stats_period_set;
  gboolean logged_disabled;
  gboolean xml_read;            /* device and deflate_on_oom are known */
  gboolean deflate_on_oom;
  gboolean halted;              /* paused, migrating, shutting down... */
  Job *job;                     /* in flight, or NULL */
  GSource *deadline;
  gint64 unresponsive_since_us;
  gboolean poll_again;          /* a poll was asked for during the job */
  gboolean urgent_again;
  gchar *device_command;        /* the settings the policy wants, to send */
} AgentDomain;

struct _KstaledAgent {
  AgentRef *ref;
  KstaledAgentOptions options;   /* its strings are agent-owned copies */
  gchar *config_file;
  gboolean config_required;     /* given on the command line */
  KstaledConfig *config;
  GMainContext *context;
  GMainLoop *loop;

  virConnectPtr conn;
  guint generation;             /* of conn; jobs of older ones are stale */
  guint poll_source;
  guint reconnect_source;
  guint reconnect_delay_s;

  GThreadPool *workers;
  guint64 job_sequence;
  guint jobs_in_flight;
  guint stuck_jobs;
  gboolean listing;             /* a JOB_LIST is in flight */

  GHashTable *domains;          /* name -> AgentDomain */
  KstaledHost *host;            /* the host arbiter */
  KstaledMetricsServer *metrics;
  KstaledStateWriter *state_writer;
};

static void connect_to_libvirt (KstaledAgent *agent);
static void schedule_poll (KstaledAgent *agent, AgentDomain *d,
                           gboolean urgent);

static const char *
libvirt_error (void)
{
  const char *msg = virGetLastErrorMessage ();

  return msg ? msg : "unknown libvirt error";
}

/* libvirt prints every error to stderr by default; the agent reports the
 * ones that matter itself, with context. */
static void
ignore_libvirt_error (void *data, virErrorPtr error)
{
  (void) data;
  (void) error;
}

/* libvirt 9.0's default event implementation (vireventglib.c) attaches
 * every watch and timeout to GLib's default main context, and
 * virEventRunDefaultImpl only iterates that context.  The agent runs its
 * main loop on the same context, so libvirt's callbacks arrive on the main
 * thread beside everything else and need no hand-over. */
static void
register_libvirt_events (void)
{
  static gsize registered;

  if (g_once_init_enter (&registered))
    {
      virSetErrorFunc (NULL, ignore_libvirt_error);
      if (virEventRegisterDefaultImpl () < 0)
        g_error ("cannot set up the libvirt event loop: %s",
                 libvirt_error ());
      g_once_init_leave (&registered, 1);
    }
}

/* --- sources on the main context ---------------------------------------- */

static guint
attach_source (KstaledAgent *agent, GSource *source, GSourceFunc func)
{
  guint id;

  g_source_set_callback (source, func, agent, NULL);
  id = g_source_attach (source, agent->context);
  g_source_unref (source);
  return id;
}

static void
remove_source (KstaledAgent *agent, guint *id)
{
  GSource *source;

  if (*id == 0)
    return;
  source = g_main_context_find_source_by_id (agent->context, *id);
  if (source != NULL)
    g_source_destroy (source);
  *id = 0;
}

/* --- domains ------------------------------------------------------------ */

static void
clear_deadline (AgentDomain *d)
{
  if (d->deadline == NULL)
    return;
  g_source_destroy (d->deadline);
  g_clear_pointer (&d->deadline, g_source_unref);
}

static void
agent_domain_free (AgentDomain *d)
{
  /* A job in flight finds the domain gone when it comes back. */
  clear_deadline (d);
  g_clear_pointer (&d->dom, virDomainFree);
  g_free (d->device_command);
  kstaled_domain_status_free (d->status);
  g_free (d);
}

static AgentDomain *
lookup_domain (KstaledAgent *agent, virDomainPtr dom)
{
  const char *name = virDomainGetName (dom);
  int id = (int) virDomainGetID (dom);
  AgentDomain *d = g_hash_table_lookup (agent->domains, name);

  /* A new id is a new run of the domain (perhaps while libvirtd was away):
   * nothing learnt about the old one holds. */
  if (d != NULL && d->id != id)
    {
      g_hash_table_remove (agent->domains, name);
      d = NULL;
    }
  if (d == NULL)
    {
      d = g_new0 (AgentDomain, 1);
      d->status = kstaled_domain_status_new (name);
      d->id = id;
      g_hash_table_insert (agent->domains, g_strdup (name), d);
    }
  /* The handle of the current connection (after a reconnect, the old one's
   * is useless). */
  if (d->dom != dom)
    {
      virDomainRef (dom);
      g_clear_pointer (&d->dom, virDomainFree);
      d->dom = dom;
    }
  return d;
}

static gint
compare_status (gconstpointer a, gconstpointer b)
{
  const KstaledDomainStatus *const *sa = a, *const *sb = b;

  return g_strcmp0 ((*sa)->name, (*sb)->name);
}

/* The statuses of all known domains, by name; the array does not own them. */
static GPtrArray *
domain_statuses (KstaledAgent *agent)
{
  GPtrArray *list = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, agent->domains);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (list, ((AgentDomain *) value)->status);
  g_ptr_array_sort (list, compare_status);
  return list;
}

static json_object *
render_state (gpointer data)
{
  KstaledAgent *agent = data;
  g_autoptr (GPtrArray) list = domain_statuses (agent);

  return kstaled_status_to_json (list, agent->config, g_get_real_time ());
}

static void
write_state (KstaledAgent *agent)
{
  kstaled_state_writer_schedule (agent->state_writer,
                                 agent->config->state_file);
}

static gchar *
render_metrics (gpointer data)
{
  KstaledAgent *agent = data;
  g_autoptr (GPtrArray) list = domain_statuses (agent);

  return kstaled_status_format_metrics (list, agent->config);
}

/* Records a failed step of a poll, logging it when it differs from the last
 * one, so that a broken domain does not flood the log. */
static void
set_domain_error (AgentDomain *d, const char *text)
{
  d->status->poll_errors_total++;
  if (g_strcmp0 (text, d->status->last_error) != 0)
    kstaled_log_domain (G_LOG_LEVEL_WARNING, d->status->name, NULL, "error",
                        "domain=%s: %s", d->status->name, text);
  g_free (d->status->last_error);
  d->status->last_error = g_strdup (text);
}

/* --- worker side: libvirt I/O only --------------------------------------- */

static void G_GNUC_PRINTF (2, 3)
job_error (Job *job, const char *format, ...)
{
  va_list args;
  gchar *what;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  g_ptr_array_add (job->errors, g_strdup_printf ("%s: %s", what,
                                                 libvirt_error ()));
  g_free (what);
}

/* Each worker talks to libvirt over a connection of its own, so that a
 * call stuck on a stopped QEMU holds up only the connection it is on.  On
 * a shared one it holds up the others' calls: libvirtd reads at most
 * max_client_requests (5) calls of a connection at a time; and in libvirt
 * 9.0's client the thread that waits on the socket for everyone, here the
 * stuck call's, misses a wake-up (g_main_loop_quit before its
 * g_main_loop_run) now and then, and another thread's call is then not
 * sent until the next keepalive, seconds later.  Later libvirt wakes it
 * with an idle source instead. */
typedef struct {
  virConnectPtr conn;
  guint generation;             /* of the agent's connection when opened */
} WorkerConnection;

static void
worker_connection_free (gpointer data)
{
  WorkerConnection *wc = data;

  g_clear_pointer (&wc->conn, virConnectClose);
  g_free (wc);
}

static GPrivate worker_connection = G_PRIVATE_INIT (worker_connection_free);

/* The job's domain on this worker's connection, which is opened again
 * when it has died or the agent has reconnected since. */
static gboolean
lookup_job_domain (Job *job)
{
  WorkerConnection *wc = g_private_get (&worker_connection);

  if (wc == NULL)
    {
      wc = g_new0 (WorkerConnection, 1);
      g_private_set (&worker_connection, wc);
    }
  if (wc->conn != NULL && (wc->generation != job->generation ||
                           virConnectIsAlive (wc->conn) != 1))
    g_clear_pointer (&wc->conn, virConnectClose);
  if (wc->conn == NULL)
    {
      wc->conn = virConnectOpen (job->uri);
      if (wc->conn == NULL)
        {
          job_error (job, "connecting to %s failed", job->uri);
          return FALSE;
        }
      wc->generation = job->generation;
    }
  job->dom = virDomainLookupByUUID (wc->conn, job->uuid);
  if (job->dom == NULL)
    {
      job_error (job, "looking up the domain failed");
      return FALSE;
    }
  return TRUE;
}

static void
list_domains (Job *job)
{
  job->ndoms = virConnectListAllDomains (job->conn, &job->doms,
                                         VIR_CONNECT_LIST_DOMAINS_ACTIVE);
  if (job->ndoms < 0)
    job_error (job, "listing the domains failed");
}

/* Whether libvirt runs a migration of the domain, in or out. */
static gboolean
migrating (Job *job)
{
  virTypedParameterPtr params = NULL;
  int type, nparams = 0, operation = 0;
  gboolean ret;

  if (virDomainGetJobStats (job->dom, &type, &params, &nparams, 0) < 0)
    {
      /* Drivers without jobs (test:///) do not migrate either. */
      if (virGetLastErrorCode () != VIR_ERR_NO_SUPPORT)
        job_error (job, "reading the domain's job failed");
      return FALSE;
    }
  ret = type != VIR_DOMAIN_JOB_NONE &&
        virTypedParamsGetInt (params, nparams, VIR_DOMAIN_JOB_OPERATION,
                              &operation) == 1 &&
        (operation == VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN ||
         operation == VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT);
  virTypedParamsFree (params, nparams);
  return ret;
}

/* The statistics come from one virDomainListGetStats call per domain, not
 * one virConnectGetAllDomainStats call for all of them: on libvirt 9.0,
 * VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT skips a domain only while
 * another call holds its job, and takes the job of an idle one and asks its
 * QEMU for the balloon statistics (qemuDomainGetStatsBalloon), so a single
 * stopped QEMU would hold up every domain's statistics. */
static void
read_stats (Job *job)
{
  virDomainPtr doms[] = { job->dom, NULL };
  virDomainStatsRecordPtr *records = NULL;
  int n;

  /* NOWAIT: while another client holds the domain's job, only what libvirt
   * knows itself (state, balloon size), not a 30 s wait for the job. */
  n = virDomainListGetStats (doms, VIR_DOMAIN_STATS_STATE |
                             VIR_DOMAIN_STATS_BALLOON, &records,
                             VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT);
  if (n < 0)
    {
      job_error (job, "reading the statistics failed");
      return;
    }
  if (n == 1)
    {
      kstaled_domain_stats_from_params (records[0]->params,
                                        records[0]->nparams, &job->stats);
      job->has_stats = TRUE;
    }
  virDomainStatsRecordListFree (records);
}

/* The balloon's counters libvirt 9.0 does not name; unset on failure. */
static void
read_guest_counters (Job *job)
{
  g_autofree gchar *reply = NULL;
  g_autoptr (GError) error = NULL;

  if (virDomainQemuMonitorCommand (job->dom, KSTALED_GUEST_STATS_COMMAND,
                                   &reply, 0) < 0)
    g_debug ("domain=%s: no balloon guest-stats: %s", job->name,
             libvirt_error ());
  else if (!kstaled_guest_counters_parse (reply, strlen (reply),
                                          &job->counters, &error))
    g_debug ("domain=%s: rejected balloon guest-stats: %s", job->name,
             error->message);
}

/* Gives the device the scan period and stale page age the policy wanted
 * at the domain's last decision. */
static void
configure_device (Job *job)
{
  g_autofree gchar *reply = NULL;

  if (virDomainQemuMonitorCommand (job->dom, job->device_command, &reply,
                                   0) < 0)
    job_error (job, "kstaled-set-config failed");
  else
    job->device_configured = TRUE;
}

static void
poll_domain_io (Job *job)
{
  g_autofree gchar *reply = NULL;

  if (job->read_xml)
    {
      g_autofree gchar *xml = virDomainGetXMLDesc (job->dom, 0);
      g_autoptr (GError) error = NULL;

      if (xml == NULL)
        {
          job_error (job, "reading the domain XML failed");
          return;
        }
      if (!kstaled_domain_xml_parse (xml, -1, &job->xml, &error))
        {
          g_ptr_array_add (job->errors,
                           g_strdup_printf ("rejected the domain XML: %s",
                                            error->message));
          return;
        }
      job->has_xml = TRUE;
      if (!job->xml.has_device)
        {
          if (job->needs_device)
            return;
          job->query_device = FALSE;
        }
    }
  if (job->stats_period > 0)
    {
      if (virDomainSetMemoryStatsPeriod (job->dom, (int) job->stats_period,
                                         VIR_DOMAIN_AFFECT_LIVE) < 0)
        job_error (job, "setting the balloon statistics period failed");
      else
        job->stats_period_set = TRUE;
    }
  read_stats (job);
  if (!job->has_stats || !job->stats.has_state ||
      job->stats.state != VIR_DOMAIN_RUNNING)
    return;
  job->migrating = migrating (job);
  if (job->migrating)
    return;
  if (job->device_command != NULL)
    configure_device (job);
  /* A domain without the device gets no monitor command at all: libvirt
   * would taint it, and the baselines read only the balloon. */
  job->queried = TRUE;
  if (!job->query_device)
    return;
  read_guest_counters (job);
  if (virDomainQemuMonitorCommand (job->dom, QUERY_KSTALED, &reply, 0) < 0)
    {
      job_error (job, "query-kstaled failed");
      return;
    }
  /* Parsed here: a guest's reply may be megabytes of JSON. */
  job->report = kstaled_report_parse (reply, strlen (reply),
                                      &job->report_error);
}

static void
set_balloon_io (Job *job)
{
  if (virDomainSetMemoryFlags (job->dom, job->decision.new_kib,
                               VIR_DOMAIN_AFFECT_LIVE) < 0)
    job_error (job, "setting the balloon failed");
  else
    job->balloon_set = TRUE;
}

static gboolean finish_job (gpointer data);
static void job_free (gpointer data);

static void
run_job (gpointer data, gpointer user_data)
{
  Job *job = data;
  GSource *source;

  (void) user_data;
  job->started_us = g_get_monotonic_time ();
  if (job->kind == JOB_LIST)
    list_domains (job);
  else if (lookup_job_domain (job))
    {
      if (job->kind == JOB_POLL)
        poll_domain_io (job);
      else
        set_balloon_io (job);
    }
  /* Not g_main_context_invoke: when no thread owns the context, as once
   * the main loop has quit, it calls finish_job on this worker, beside the
   * main thread freeing the agent. */
  source = g_idle_source_new ();
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, finish_job, job, job_free);
  g_source_attach (source, job->context);
  g_source_unref (source);
}

/* Urgent jobs first, then in the order they came. */
static gint
compare_jobs (gconstpointer a, gconstpointer b, gpointer data)
{
  const Job *ja = a, *jb = b;

  (void) data;
  if (ja->urgent != jb->urgent)
    return ja->urgent ? -1 : 1;
  return ja->sequence < jb->sequence ? -1 : ja->sequence > jb->sequence;
}

/* --- main side: jobs ------------------------------------------------------ */

static Job *
job_new (KstaledAgent *agent, JobKind kind, AgentDomain *d)
{
  Job *job = g_new0 (Job, 1);

  job->agent_ref = g_atomic_rc_box_acquire (agent->ref);
  job->context = g_main_context_ref (agent->context);
  job->generation = agent->generation;
  job->kind = kind;
  job->errors = g_ptr_array_new_with_free_func (g_free);
  if (d != NULL)
    {
      job->uri = g_strdup (agent->config->uri);
      /* A local copy: no call to libvirtd. */
      if (virDomainGetUUID (d->dom, job->uuid) < 0)
        g_error ("domain=%s has no UUID: %s", d->status->name,
                 libvirt_error ());
      job->name = g_strdup (d->status->name);
    }
  else
    {
      job->conn = agent->conn;
      virConnectRef (job->conn);
    }
  return job;
}

static void
job_free (gpointer data)
{
  Job *job = data;

  for (int i = 0; i < job->ndoms; i++)
    virDomainFree (job->doms[i]);
  free (job->doms);
  g_clear_pointer (&job->report, kstaled_report_free);
  g_clear_error (&job->report_error);
  g_ptr_array_unref (job->errors);
  g_free (job->device_command);
  g_free (job->name);
  g_free (job->uri);
  g_clear_pointer (&job->dom, virDomainFree);
  g_clear_pointer (&job->conn, virConnectClose);
  g_main_context_unref (job->context);
  g_atomic_rc_box_release (job->agent_ref);
  g_free (job);
}

/* The pool's free function for the jobs it drops.  GLib (2.74 in Debian
 * 12, and its main branch too) also passes it the stop markers,
 * GUINT_TO_POINTER (1), that g_thread_pool_free pushes for workers that
 * were busy: they exit without popping theirs, and the last one to go
 * frees the queue, markers and all. */
static void
drop_queued_job (gpointer data)
{
  if (data != GUINT_TO_POINTER (1))
    job_free (data);
}

static void
submit_job (KstaledAgent *agent, Job *job)
{
  job->sequence = agent->job_sequence++;
  job->submitted_us = g_get_monotonic_time ();
  agent->jobs_in_flight++;
  g_thread_pool_push (agent->workers, job, NULL);
}

static gboolean
domain_deadline (gpointer data)
{
  AgentDomain *d = data;
  Job *job = d->job;
  KstaledAgent *agent = job->agent_ref->agent;

  g_clear_pointer (&d->deadline, g_source_unref);
  job->stuck = TRUE;
  agent->stuck_jobs++;
  g_thread_pool_set_max_threads (
    agent->workers, (gint) (DOMAIN_WORKERS + agent->stuck_jobs), NULL);
  d->unresponsive_since_us = job->submitted_us;
  d->status->unresponsive = TRUE;
  kstaled_log_domain (G_LOG_LEVEL_WARNING, d->status->name, NULL,
                      "unresponsive", "domain=%s is unresponsive: libvirt "
                      "has not answered for %d s; skipping it until it does",
                      d->status->name, DOMAIN_DEADLINE_S);
  write_state (agent);
  if (agent->options.once && agent->jobs_in_flight == agent->stuck_jobs &&
      !agent->listing)
    g_main_loop_quit (agent->loop);
  return G_SOURCE_REMOVE;
}

/* Hands the domain's I/O to a worker: at most one job per domain is in
 * flight, and it has DOMAIN_DEADLINE_S to come back. */
static void
submit_domain_job (KstaledAgent *agent, AgentDomain *d, Job *job)
{
  g_assert (d->job == NULL);
  d->job = job;
  d->deadline = g_timeout_source_new_seconds (DOMAIN_DEADLINE_S);
  g_source_set_callback (d->deadline, domain_deadline, d, NULL);
  g_source_attach (d->deadline, agent->context);
  submit_job (agent, job);
}

static void
record_action (KstaledAgent *agent, AgentDomain *d,
               const KstaledDecision *decision)
{
  KstaledDomainStatus *s = d->status;

  s->has_action = TRUE;
  s->action = *decision;
  s->action_time = s->decision_time;
  s->action_dry_run = agent->config->dry_run;
  s->actions_total[decision->action]++;
}

static void
apply_decision (KstaledAgent *agent, AgentDomain *d,
                const KstaledDecision *decision)
{
  KstaledDomainStatus *s = d->status;
  g_autofree gchar *line = kstaled_decision_format (s->name, decision);
  gboolean news = !s->has_decision || s->decision.reason != decision->reason;
  const char *action = kstaled_action_to_string (decision->action);
  const char *reason = kstaled_reason_to_string (decision->reason);
  Job *job;

  s->has_decision = TRUE;
  s->decision = *decision;
  s->decision_time = g_get_real_time ();
  if (decision->action == KSTALED_ACTION_NONE)
    {
      /* Unchanged no-action decisions are only news when debugging. */
      kstaled_log_domain (news ? G_LOG_LEVEL_MESSAGE : G_LOG_LEVEL_DEBUG,
                          s->name, action, reason, "%s", line);
      return;
    }
  kstaled_log_domain (G_LOG_LEVEL_MESSAGE, s->name, action, reason, "%s%s",
                      agent->config->dry_run ? "dry-run: " : "", line);
  if (agent->config->dry_run)
    {
      record_action (agent, d, decision);
      return;
    }
  job = job_new (agent, JOB_SET_BALLOON, d);
  job->decision = *decision;
  /* A guest under pressure gets its memory before anyone's poll. */
  job->urgent = decision->action == KSTALED_ACTION_DEFLATE;
  submit_domain_job (agent, d, job);
}

static const char *
state_name (int state)
{
  switch (state)
    {
    case VIR_DOMAIN_PAUSED:
      return "paused";
    case VIR_DOMAIN_SHUTDOWN:
      return "shutting down";
    case VIR_DOMAIN_SHUTOFF:
      return "shut off";
    case VIR_DOMAIN_CRASHED:
      return "crashed";
    case VIR_DOMAIN_PMSUSPENDED:
      return "suspended by the guest";
    default:
      return "not running";
    }
}

/* Whether the domain runs and no migration moves it: the only time its
 * balloon is the agent's to set. */
static gboolean
check_running (AgentDomain *d, const Job *job)
{
  const char *why = NULL;

  if (!job->stats.has_state)
    why = "in an unknown state";
  else if (job->stats.state != VIR_DOMAIN_RUNNING)
    why = state_name (job->stats.state);
  else if (job->migrating)
    why = "migrating";
  if (why == NULL)
    {
      if (d->halted)
        kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL,
                            "running", "domain=%s runs again; managing it",
                            d->status->name);
      d->halted = FALSE;
      return TRUE;
    }
  if (!d->halted)
    kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL, "halted",
                        "domain=%s is %s; not ballooning it",
                        d->status->name, why);
  d->halted = TRUE;
  return FALSE;
}

/* A domain whose XML has no kstaled device: the kstaled policy leaves it
 * alone, the baselines, which read only the balloon, manage it. */
static void
mark_without_device (AgentDomain *d, KstaledPolicyMode mode)
{
  if (mode == KSTALED_MODE_KSTALED)
    {
      kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL,
                          "no-device", "domain=%s has no kstaled device in "
                          "its XML; leaving it alone", d->status->name);
      d->status->device = KSTALED_DEVICE_ABSENT;
    }
  else
    {
      kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL,
                          "no-device", "domain=%s has no kstaled device in "
                          "its XML; policy=%s needs none", d->status->name,
                          kstaled_mode_to_string (mode));
      d->status->device = KSTALED_DEVICE_NOT_NEEDED;
    }
}

/* Takes the report from the job; FALSE if the device turned out absent. */
static gboolean
take_report (AgentDomain *d, Job *job)
{
  g_clear_pointer (&d->status->report, kstaled_report_free);
  if (g_error_matches (job->report_error, KSTALED_REPORT_ERROR,
                       KSTALED_REPORT_ERROR_NO_DEVICE))
    {
      kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL,
                          "no-device", "domain=%s has no kstaled device "
                          "though its XML gives it one; leaving it alone (%s)",
                          d->status->name, job->report_error->message);
      d->status->device = KSTALED_DEVICE_ABSENT;
      return FALSE;
    }
  if (job->report_error == NULL && job->report == NULL)
    return TRUE;                /* the query failed: logged already */
  d->status->device = KSTALED_DEVICE_PRESENT;
  if (job->report == NULL)
    {
      g_autofree gchar *text = g_strdup_printf (
        "rejected query-kstaled reply: %s", job->report_error->message);

      set_domain_error (d, text);
      return TRUE;
    }
  d->status->report = g_steal_pointer (&job->report);
  if (d->status->last_error != NULL)
    {
      kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL,
                          "recovered", "domain=%s: query-kstaled works again",
                          d->status->name);
      g_clear_pointer (&d->status->last_error, g_free);
    }
  return TRUE;
}

static void
finish_poll (KstaledAgent *agent, AgentDomain *d, Job *job)
{
  const KstaledDomainConfig *dc =
    kstaled_config_for_domain (agent->config, d->status->name);
  KstaledPolicyInput input = { 0 };
  KstaledDecision decision;

  if (job->stats_period_set)
    d->stats_period_set = TRUE;
  if (job->device_configured)
    kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL,
                        "device-config", "domain=%s: device set: %s",
                        d->status->name, job->device_command);
  if (job->has_xml)
    {
      d->xml_read = TRUE;
      d->deflate_on_oom = job->xml.deflate_on_oom;
      if (!job->xml.has_device)
        {
          mark_without_device (d, dc->policy.mode);
          if (d->status->device == KSTALED_DEVICE_ABSENT)
            return;
        }
    }
  if (!job->has_stats || !check_running (d, job))
    return;
  if (!job->queried)
    return;
  if (d->status->device != KSTALED_DEVICE_NOT_NEEDED && !take_report (d, job))
    return;

  input.stats = job->stats.balloon;
  if (d->deflate_on_oom)
    kstaled_balloon_stats_exclude_balloon (&input.stats,
                                           job->stats.max_memory_kib);
  input.report = d->status->report;
  input.max_memory_kib = job->stats.max_memory_kib;
  input.early_stale_drop = d->pending_stale_drop;
  input.now_us = g_get_monotonic_time ();
  input.rebooted = d->rebooted;
  input.counters = job->counters;
  input.domain = d->status->name;
  input.host = agent->host;
  kstaled_policy_decide (&dc->policy, &input, &d->policy, &decision);
  /* Sent with the next poll; dry runs change nothing. */
  g_free (d->device_command);
  d->device_command = agent->config->dry_run ? NULL :
    kstaled_device_config_command (&decision, d->status->report);
  d->pending_stale_drop = 0;
  d->rebooted = FALSE;
  apply_decision (agent, d, &decision);
}

static void
finish_list (KstaledAgent *agent, Job *job)
{
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  gpointer key;

  agent->listing = FALSE;
  if (job->ndoms < 0)
    return;
  for (int i = 0; i < job->ndoms; i++)
    {
      schedule_poll (agent, lookup_domain (agent, job->doms[i]), FALSE);
      g_hash_table_add (seen, (gpointer) virDomainGetName (job->doms[i]));
    }
  /* Domains that stopped without our seeing the event. */
  g_hash_table_iter_init (&iter, agent->domains);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (!g_hash_table_contains (seen, key))
      {
        kstaled_log_domain (G_LOG_LEVEL_MESSAGE, key, NULL, "stopped",
                            "domain=%s is no longer running; forgetting it",
                            (const char *) key);
        g_hash_table_iter_remove (&iter);
      }
}

static const char *
job_kind_name (JobKind kind)
{
  static const char *const names[] = {
    [JOB_LIST] = "listing",
    [JOB_POLL] = "poll",
    [JOB_SET_BALLOON] = "balloon",
  };

  return names[kind];
}

/* Back on the main thread: what a worker found. */
static gboolean
finish_job (gpointer data)
{
  Job *job = data;
  KstaledAgent *agent = job->agent_ref->agent;
  AgentDomain *d = NULL;
  g_autofree gchar *text = NULL;

  if (agent == NULL)
    return G_SOURCE_REMOVE;     /* came back after the agent was freed */
  g_debug ("%s job of %s: queued %" G_GINT64_FORMAT " ms, ran %"
           G_GINT64_FORMAT " ms", job_kind_name (job->kind),
           job->name ? job->name : agent->config->uri,
           (job->started_us - job->submitted_us) / 1000,
           (g_get_monotonic_time () - job->started_us) / 1000);
  agent->jobs_in_flight--;
  if (job->stuck)
    {
      agent->stuck_jobs--;
      g_thread_pool_set_max_threads (
        agent->workers, (gint) (DOMAIN_WORKERS + agent->stuck_jobs), NULL);
    }
  if (job->kind == JOB_LIST)
    {
      if (job->generation != agent->generation)
        goto out;               /* of a connection gone since */
      for (guint i = 0; i < job->errors->len; i++)
        g_warning ("%s", (const char *) job->errors->pdata[i]);
      finish_list (agent, job);
      goto out;
    }
  d = g_hash_table_lookup (agent->domains, job->name);
  if (d == NULL || d->job != job)
    {
      d = NULL;                 /* the domain stopped or restarted since */
      goto out;
    }
  d->job = NULL;
  clear_deadline (d);
  if (d->status->unresponsive)
    {
      /* What it found is as old as the hang: poll afresh. */
      kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL,
                          "responsive", "domain=%s answers again after %"
                          G_GINT64_FORMAT " s; managing it", d->status->name,
                          (g_get_monotonic_time () - d->unresponsive_since_us)
                          / G_USEC_PER_SEC);
      d->status->unresponsive = FALSE;
      d->poll_again = TRUE;
      goto out;
    }
  if (job->generation != agent->generation)
    goto out;                   /* the next listing polls it afresh */
  if (job->errors->len > 0)
    {
      /* One line for all, so that the same failures log only once. */
      g_ptr_array_add (job->errors, NULL);
      text = g_strjoinv ("; ", (gchar **) job->errors->pdata);
      set_domain_error (d, text);
    }
  if (job->kind == JOB_POLL)
    finish_poll (agent, d, job);
  else if (job->balloon_set)
    record_action (agent, d, &job->decision);

out:
  if (d != NULL && d->job == NULL && d->poll_again)
    schedule_poll (agent, d, d->urgent_again);
  write_state (agent);
  if (agent->options.once && agent->jobs_in_flight == agent->stuck_jobs &&
      !agent->listing)
    g_main_loop_quit (agent->loop);
  return G_SOURCE_REMOVE;
}

/* Polls the domain now, or as soon as its job in flight is back; urgent
 * polls (early reports, reboots) go before the others. */
static void
schedule_poll (KstaledAgent *agent, AgentDomain *d, gboolean urgent)
{
  const KstaledDomainConfig *dc =
    kstaled_config_for_domain (agent->config, d->status->name);
  Job *job;

  if (d->dom == NULL)
    return;                     /* until the next listing after a reconnect */
  if (d->job != NULL)
    {
      d->poll_again = TRUE;
      d->urgent_again |= urgent;
      return;
    }
  d->poll_again = d->urgent_again = FALSE;
  d->status->enabled = dc->enabled;
  if (!dc->enabled)
    {
      if (!d->logged_disabled)
        kstaled_log_domain (G_LOG_LEVEL_MESSAGE, d->status->name, NULL,
                            "disabled", "domain=%s is disabled in the "
                            "configuration; leaving it alone",
                            d->status->name);
      d->logged_disabled = TRUE;
      return;
    }
  d->logged_disabled = FALSE;
  /* A reload may have changed whether its policy needs the device. */
  if ((d->status->device == KSTALED_DEVICE_ABSENT &&
       dc->policy.mode != KSTALED_MODE_KSTALED) ||
      (d->status->device == KSTALED_DEVICE_NOT_NEEDED &&
       dc->policy.mode == KSTALED_MODE_KSTALED))
    mark_without_device (d, dc->policy.mode);
  if (d->status->device == KSTALED_DEVICE_ABSENT)
    return;

  d->status->polls_total++;
  job = job_new (agent, JOB_POLL, d);
  job->urgent = urgent;
  job->read_xml = !d->xml_read;
  job->needs_device = dc->policy.mode == KSTALED_MODE_KSTALED;
  job->query_device = d->status->device != KSTALED_DEVICE_NOT_NEEDED;
  if (!d->stats_period_set && !agent->config->dry_run)
    job->stats_period = agent->config->balloon_stats_period;
  job->device_command = g_steal_pointer (&d->device_command);
  submit_domain_job (agent, d, job);
}

static void
poll_all (KstaledAgent *agent)
{
  if (agent->listing)
    return;
  agent->listing = TRUE;
  /* Read here, on the main thread, which alone owns the arbiter. */
  kstaled_host_poll (agent->host, &agent->config->host);
  submit_job (agent, job_new (agent, JOB_LIST, NULL));
}

static gboolean
poll_timeout (gpointer data)
{
  poll_all (data);
  return G_SOURCE_CONTINUE;
}

/* --- libvirt events, on the main thread ----------------------------------- */

static void disconnect_from_libvirt (KstaledAgent *agent);
static void schedule_reconnect (KstaledAgent *agent);

static const char *
close_reason (int reason)
{
  switch (reason)
    {
    case VIR_CONNECT_CLOSE_REASON_ERROR:
      return "an error";
    case VIR_CONNECT_CLOSE_REASON_EOF:
      return "end of file";
    case VIR_CONNECT_CLOSE_REASON_KEEPALIVE:
      return "keepalive timeout";
    default:
      return "client request";
    }
}

typedef struct {
  AgentRef *agent_ref;
  virConnectPtr conn;
  int reason;
} ConnectionClosed;

static void
connection_closed_free (gpointer data)
{
  ConnectionClosed *closed = data;

  virConnectClose (closed->conn);
  g_atomic_rc_box_release (closed->agent_ref);
  g_free (closed);
}

static gboolean
handle_connection_closed (gpointer data)
{
  ConnectionClosed *closed = data;
  KstaledAgent *agent = closed->agent_ref->agent;

  if (agent == NULL || closed->conn != agent->conn)
    return G_SOURCE_REMOVE;     /* an old connection's */
  g_warning ("connection to %s closed (%s); reconnecting", agent->config->uri,
             close_reason (closed->reason));
  disconnect_from_libvirt (agent);
  schedule_reconnect (agent);
  return G_SOURCE_REMOVE;
}

/* libvirt calls this from whichever thread finds the connection closed (a
 * worker's call, or the main loop's event dispatch or keepalive timer),
 * holding a lock that virConnectUnregisterCloseCallback takes: the main
 * loop handles it in a later iteration. */
static void
on_close (virConnectPtr conn, int reason, void *opaque)
{
  KstaledAgent *agent = opaque;
  ConnectionClosed *closed = g_new (ConnectionClosed, 1);
  GSource *source = g_idle_source_new ();

  closed->agent_ref = g_atomic_rc_box_acquire (agent->ref);
  closed->conn = conn;
  closed->reason = reason;
  virConnectRef (conn);
  /* Not g_main_context_invoke, which on the main thread would call it at
   * once, lock held. */
  g_source_set_callback (source, handle_connection_closed, closed,
                         connection_closed_free);
  g_source_attach (source, agent->context);
  g_source_unref (source);
}

static int
on_lifecycle (virConnectPtr conn, virDomainPtr dom, int event, int detail,
              void *opaque)
{
  KstaledAgent *agent = opaque;
  const char *name = virDomainGetName (dom);
  AgentDomain *d;

  if (conn != agent->conn)
    return 0;
  switch (event)
    {
    case VIR_DOMAIN_EVENT_STARTED:
      kstaled_log_domain (G_LOG_LEVEL_MESSAGE, name, NULL, "started",
                          "domain=%s started", name);
      g_hash_table_remove (agent->domains, name);
      schedule_poll (agent, lookup_domain (agent, dom), TRUE);
      break;
    case VIR_DOMAIN_EVENT_STOPPED:
      kstaled_log_domain (G_LOG_LEVEL_MESSAGE, name, NULL, "stopped",
                          "domain=%s stopped (detail %d); forgetting it", name,
                          detail);
      g_hash_table_remove (agent->domains, name);
      write_state (agent);
      break;
    case VIR_DOMAIN_EVENT_RESUMED:
      d = g_hash_table_lookup (agent->domains, name);
      if (d == NULL)
        break;
      /* A balloon asked for before the pause had no time to move: it gets
       * its whole settling time again, instead of the next step at once. */
      if (d->policy.request_kib != 0)
        d->policy.request_us = g_get_monotonic_time ();
      kstaled_log_domain (G_LOG_LEVEL_MESSAGE, name, NULL, "resumed",
                          "domain=%s resumed", name);
      schedule_poll (agent, d, FALSE);
      break;
    case VIR_DOMAIN_EVENT_SUSPENDED:
    case VIR_DOMAIN_EVENT_SHUTDOWN:
      /* The next poll finds it halted. */
      d = g_hash_table_lookup (agent->domains, name);
      if (d != NULL)
        schedule_poll (agent, d, FALSE);
      break;
    default:
      g_debug ("domain=%s lifecycle event %d detail %d", name, event, detail);
      break;
    }
  return 0;
}

static int
on_reboot (virConnectPtr conn, virDomainPtr dom, void *opaque)
{
  KstaledAgent *agent = opaque;
  const char *name = virDomainGetName (dom);
  AgentDomain *d;

  if (conn != agent->conn)
    return 0;
  d = lookup_domain (agent, dom);
  kstaled_log_domain (G_LOG_LEVEL_MESSAGE, name, NULL, "reboot",
                      "domain=%s rebooted", name);
  d->rebooted = TRUE;
  schedule_poll (agent, d, TRUE);
  return 0;
}

static void
on_early_report (virConnectPtr conn, virDomainPtr dom, const char *event,
                 long long seconds, unsigned int micros, const char *details,
                 void *opaque)
{
  KstaledAgent *agent = opaque;
  const char *name = virDomainGetName (dom);
  AgentDomain *d = g_hash_table_lookup (agent->domains, name);
  g_autoptr (GError) error = NULL;
  gint64 emitted_us = (gint64) seconds * G_USEC_PER_SEC + micros;
  guint64 drop;

  (void) event;
  if (conn != agent->conn)
    return;
  if (d == NULL || d->status->device != KSTALED_DEVICE_PRESENT)
    {
      g_debug ("domain=%s: early report from a domain not managed", name);
      return;
    }
  if (details == NULL ||
      !kstaled_early_report_parse (details, strnlen (details,
                                                     KSTALED_MAX_EVENT_LEN + 1),
                                   &drop, &error))
    {
      g_autofree gchar *text = g_strdup_printf (
        "rejected " EARLY_REPORT_EVENT ": %s",
        error ? error->message : "no data");

      set_domain_error (d, text);
      return;
    }
  d->status->early_reports_total++;
  d->pending_stale_drop = d->pending_stale_drop > G_MAXUINT64 - drop
                          ? G_MAXUINT64 : d->pending_stale_drop + drop;
  kstaled_log_domain (G_LOG_LEVEL_MESSAGE, name, NULL, "early-report",
                      "domain=%s " EARLY_REPORT_EVENT " stale-drop-kib=%"
                      G_GUINT64_FORMAT " delay-ms=%" G_GINT64_FORMAT, name,
                      drop / 1024, (g_get_real_time () - emitted_us) / 1000);
  schedule_poll (agent, d, TRUE);
}

/* --- connection ---------------------------------------------------------- */

static gboolean
register_events (KstaledAgent *agent, GError **error)
{
  const char *what;

  /* No free callbacks: the opaque is the agent, the callbacks run only
   * while its loop iterates the default context, and the subscriptions
   * are left to die with the connection (disconnect_from_libvirt). */
  if (virConnectRegisterCloseCallback (agent->conn, on_close, agent,
                                       NULL) < 0)
    what = "close callback";
  /* Local drivers (test:///, qemu:///embed) have no keepalive, nor a
   * daemon to lose. */
  else if (virConnectSetKeepAlive (agent->conn, KEEPALIVE_INTERVAL_S,
                                   KEEPALIVE_COUNT) < 0 &&
           virGetLastErrorCode () != VIR_ERR_NO_SUPPORT)
    what = "keepalive";
  else if (virConnectDomainEventRegisterAny (
             agent->conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
             VIR_DOMAIN_EVENT_CALLBACK (on_lifecycle), agent, NULL) < 0)
    what = "lifecycle events";
  else if (virConnectDomainEventRegisterAny (
             agent->conn, NULL, VIR_DOMAIN_EVENT_ID_REBOOT,
             VIR_DOMAIN_EVENT_CALLBACK (on_reboot), agent, NULL) < 0)
    what = "reboot events";
  else if (virConnectDomainQemuMonitorEventRegister (
             agent->conn, NULL, EARLY_REPORT_EVENT, on_early_report, agent,
             NULL, 0) < 0)
    what = EARLY_REPORT_EVENT " events";
  else
    return TRUE;
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
               "cannot subscribe to %s on %s: %s", what, agent->config->uri,
               libvirt_error ());
  return FALSE;
}

static void
forget_handle (gpointer key, gpointer value, gpointer data)
{
  AgentDomain *d = value;

  (void) key;
  (void) data;
  g_clear_pointer (&d->dom, virDomainFree);
  d->poll_again = FALSE;
}

static void
disconnect_from_libvirt (KstaledAgent *agent)
{
  if (agent->conn == NULL)
    return;
  remove_source (agent, &agent->poll_source);
  /* The event subscriptions are not undone: a connection goes when it
   * dies or the agent exits, and libvirtd drops a client's subscriptions
   * with it, while undoing them is a call to libvirtd each, which waited
   * 5 s apiece behind a worker's call to a stopped QEMU and so held up
   * SIGTERM.  The callbacks ignore what an old connection still sends. */
  virConnectUnregisterCloseCallback (agent->conn, on_close);
  /* The domains' handles go with the connection; the next listing gives
   * new ones.  Jobs in flight hold their own references, dropped with the
   * jobs, whose results no longer count. */
  g_hash_table_foreach (agent->domains, forget_handle, NULL);
  g_clear_pointer (&agent->conn, virConnectClose);
  agent->generation++;
  agent->listing = FALSE;
}

static gboolean
reconnect_timeout (gpointer data)
{
  KstaledAgent *agent = data;

  agent->reconnect_source = 0;
  connect_to_libvirt (agent);
  return G_SOURCE_REMOVE;
}

static void
schedule_reconnect (KstaledAgent *agent)
{
  if (agent->reconnect_source != 0)
    return;
  g_message ("reconnecting to %s in %u s", agent->config->uri,
             agent->reconnect_delay_s);
  agent->reconnect_source =
    attach_source (agent, g_timeout_source_new_seconds (agent->reconnect_delay_s),
                   reconnect_timeout);
  agent->reconnect_delay_s = MIN (agent->reconnect_delay_s * 2,
                                  RECONNECT_MAX_S);
}

/* Connects, subscribes and starts polling; TRUE if connected. */
static gboolean
try_connect (KstaledAgent *agent, GError **error)
{
  agent->conn = virConnectOpen (agent->config->uri);
  if (agent->conn == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                   "cannot connect to %s: %s", agent->config->uri,
                   libvirt_error ());
      return FALSE;
    }
  agent->generation++;
  if (!agent->options.once && !register_events (agent, error))
    {
      disconnect_from_libvirt (agent);
      return FALSE;
    }
  g_message ("connected to %s%s", agent->config->uri,
             agent->config->dry_run ? " (dry run: the balloons are left as "
                                      "they are)" : "");
  agent->reconnect_delay_s = RECONNECT_MIN_S;
  poll_all (agent);
  if (!agent->options.once)
    agent->poll_source =
      attach_source (agent,
                     g_timeout_source_new_seconds (agent->config->poll_interval),
                     poll_timeout);
  return TRUE;
}

static void
connect_to_libvirt (KstaledAgent *agent)
{
  g_autoptr (GError) error = NULL;

  if (!try_connect (agent, &error))
    {
      g_warning ("%s", error->message);
      schedule_reconnect (agent);
    }
}

/* --- configuration, signals, lifetime ----------------------------------- */

static KstaledConfig *
load_config (KstaledAgent *agent, GError **error)
{
  const KstaledAgentOptions *options = &agent->options;
  const char *file = agent->config_file;
  g_autoptr (GError) local_error = NULL;
  KstaledConfig *config = kstaled_config_load_file (file, &local_error);

  if (config == NULL)
    {
      /* Only the default file may be missing: defaults then apply. */
      if (agent->config_required ||
          !g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      g_info ("%s not found; using the defaults", file);
      config = kstaled_config_new ();
    }
  if (options->uri != NULL)
    {
      g_free (config->uri);
      config->uri = g_strdup (options->uri);
    }
  if (options->state_file != NULL)
    {
      g_free (config->state_file);
      config->state_file = g_strdup (options->state_file);
    }
  if (options->metrics_port >= 0)
    config->metrics_port = (guint) options->metrics_port;
  if (options->dry_run)
    config->dry_run = TRUE;
  return config;
}

static gboolean
on_quit_signal (gpointer data)
{
  KstaledAgent *agent = data;

  g_message ("exiting on signal");
  g_main_loop_quit (agent->loop);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_reload_signal (gpointer data)
{
  KstaledAgent *agent = data;
  g_autoptr (GError) error = NULL;
  KstaledConfig *config = load_config (agent, &error);

  if (config == NULL)
    {
      g_warning ("keeping the old configuration: %s", error->message);
      return G_SOURCE_CONTINUE;
    }
  /* The connection, poll timer and endpoint keep their settings. */
  if (g_strcmp0 (config->uri, agent->config->uri) != 0 ||
      config->poll_interval != agent->config->poll_interval ||
      config->metrics_port != agent->config->metrics_port ||
      g_strcmp0 (config->metrics_address, agent->config->metrics_address) ||
      g_strcmp0 (config->metrics_token_file,
                 agent->config->metrics_token_file))
    g_warning ("uri, poll-interval and metrics-port, -address and "
               "-token-file changes take effect at the next start");
  g_free (config->uri);
  config->uri = g_strdup (agent->config->uri);
  config->poll_interval = agent->config->poll_interval;
  config->metrics_port = agent->config->metrics_port;
  g_free (config->metrics_address);
  config->metrics_address = g_strdup (agent->config->metrics_address);
  g_free (config->metrics_token_file);
  config->metrics_token_file = g_strdup (agent->config->metrics_token_file);
  kstaled_config_free (agent->config);
  agent->config = config;
  g_message ("reloaded %s", agent->config_file);
  return G_SOURCE_CONTINUE;
}

KstaledAgent *
kstaled_agent_new (const KstaledAgentOptions *options, GError **error)
{
  g_autoptr (KstaledAgent) agent = g_new0 (KstaledAgent, 1);

  agent->ref = g_atomic_rc_box_new0 (AgentRef);
  agent->ref->agent = agent;
  agent->options = *options;
  agent->options.config_file = NULL;
  agent->options.uri = g_strdup (options->uri);
  agent->options.state_file = g_strdup (options->state_file);
  agent->config_required = options->config_file != NULL;
  agent->config_file = g_strdup (options->config_file
                                 ? options->config_file
                                 : KSTALED_DEFAULT_CONFIG_FILE);
  agent->config = load_config (agent, error);
  if (agent->config == NULL)
    return NULL;
  /* libvirt's events run on the default context (register_libvirt_events). */
  agent->context = g_main_context_ref (g_main_context_default ());
  agent->loop = g_main_loop_new (agent->context, FALSE);
  agent->host = kstaled_host_new ();
  agent->state_writer = kstaled_state_writer_new (
    agent->context, KSTALED_STATUS_WRITE_INTERVAL_MS, render_state, agent);
  /* Exclusive: its threads wait for jobs instead of going back to GLib's
   * shared pool after half a second idle, so a job never waits for a
   * thread to be started. */
  agent->workers = g_thread_pool_new_full (run_job, NULL, drop_queued_job,
                                           DOMAIN_WORKERS, TRUE, NULL);
  g_thread_pool_set_sort_function (agent->workers, compare_jobs, NULL);
  agent->domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) agent_domain_free);
  agent->reconnect_delay_s = RECONNECT_MIN_S;
  return g_steal_pointer (&agent);
}

gboolean
kstaled_agent_run (KstaledAgent *agent, GError **error)
{
  guint signals[3];
  gboolean ok = TRUE;
  g_autofree gchar *thp_warning = kstaled_host_check_thp (KSTALED_HOST_THP_DIR);

  /* Once per start: the administrator's to fix, not the agent's. */
  if (thp_warning != NULL)
    g_warning ("%s", thp_warning);
  register_libvirt_events ();
  /* The metrics endpoint's I/O follows the thread-default context. */
  g_main_context_push_thread_default (agent->context);
  if (agent->options.once)
    {
      /* Until every domain's job is back or past its deadline. */
      ok = try_connect (agent, error);
      if (ok)
        g_main_loop_run (agent->loop);
      write_state (agent);
      disconnect_from_libvirt (agent);
      goto out;
    }
  if (agent->config->metrics_port > 0)
    {
      agent->metrics = kstaled_metrics_server_new (
        agent->config->metrics_address, (guint16) agent->config->metrics_port,
        agent->config->metrics_token_file, render_metrics, agent, error);
      if (agent->metrics == NULL)
        {
          ok = FALSE;
          goto out;
        }
      g_message ("metrics at %s",
                 kstaled_metrics_server_get_url (agent->metrics));
    }
  signals[0] = attach_source (agent, g_unix_signal_source_new (SIGINT),
                              on_quit_signal);
  signals[1] = attach_source (agent, g_unix_signal_source_new (SIGTERM),
                              on_quit_signal);
  signals[2] = attach_source (agent, g_unix_signal_source_new (SIGHUP),
                              on_reload_signal);
  connect_to_libvirt (agent);
  g_main_loop_run (agent->loop);
  for (guint i = 0; i < G_N_ELEMENTS (signals); i++)
    remove_source (agent, &signals[i]);
  remove_source (agent, &agent->reconnect_source);
  disconnect_from_libvirt (agent);
  g_clear_pointer (&agent->metrics, kstaled_metrics_server_free);
out:
  g_main_context_pop_thread_default (agent->context);
  return ok;
}

void
kstaled_agent_free (KstaledAgent *agent)
{
  if (agent == NULL)
    return;
  disconnect_from_libvirt (agent);
  remove_source (agent, &agent->reconnect_source);
  /* Queued jobs are dropped; a worker stuck in libvirt is not waited for.
   * Its job, back after this, finds the agent gone. */
  agent->ref->agent = NULL;
  g_atomic_rc_box_release (agent->ref);
  if (agent->workers != NULL)
    g_thread_pool_free (agent->workers, TRUE, FALSE);
  g_clear_pointer (&agent->metrics, kstaled_metrics_server_free);
  /* Its pending write renders the domains. */
  g_clear_pointer (&agent->state_writer, kstaled_state_writer_free);
  g_clear_pointer (&agent->domains, g_hash_table_unref);
  g_clear_pointer (&agent->loop, g_main_loop_unref);
  g_clear_pointer (&agent->context, g_main_context_unref);
  kstaled_config_free (agent->config);
  kstaled_host_free (agent->host);
  g_free ((gchar *) agent->options.uri);
  g_free ((gchar *) agent->options.state_file);
  g_free (agent->config_file);
  g_free (agent);
}
