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

typedef struct {
  KstaledDomainStatus *status;
  int id;                       /* libvirt domain id: changes on restart */
  KstaledPolicyState policy;
  guint64 pending_stale_drop;   /* bytes, from early reports */
  gboolean rebooted;
  gboolean stats_period_set;
  gboolean logged_disabled;
} AgentDomain;

struct _KstaledAgent {
  KstaledAgentOptions options;   /* its strings are agent-owned copies */
  gchar *config_file;
  gboolean config_required;     /* given on the command line */
  KstaledConfig *config;
  GMainContext *context;
  GMainLoop *loop;

  virConnectPtr conn;
  guint generation;             /* of conn; events of older ones are stale */
  int lifecycle_id, reboot_id, early_report_id;
  guint poll_source;
  guint reconnect_source;
  guint reconnect_delay_s;

  GHashTable *domains;          /* name -> AgentDomain */
  KstaledHost *host;            /* the host arbiter */
  KstaledMetricsServer *metrics;
  KstaledStateWriter *state_writer;
};

typedef enum {
  EVENT_CLOSED,
  EVENT_LIFECYCLE,
  EVENT_REBOOT,
  EVENT_EARLY_REPORT,
} EventKind;

/* A libvirt callback's arguments, copied for the main context. */
typedef struct {
  KstaledAgent *agent;
  guint generation;
  EventKind kind;
  gchar *domain;
  int event, detail;
  gchar *details;
  gint64 emitted_us;            /* wall clock, from QEMU */
} AgentEvent;

/* What each callback registration carries as its opaque pointer. */
typedef struct {
  KstaledAgent *agent;
  guint generation;
} Registration;

static void poll_domain (KstaledAgent *agent, virDomainPtr dom);
static void connect_to_libvirt (KstaledAgent *agent);

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

static gpointer
event_loop_thread (gpointer data)
{
  (void) data;
  for (;;)
    if (virEventRunDefaultImpl () < 0)
      g_error ("libvirt event loop failed: %s", libvirt_error ());
  return NULL;
}

static void
start_libvirt_event_loop (void)
{
  static gsize started;

  if (g_once_init_enter (&started))
    {
      virSetErrorFunc (NULL, ignore_libvirt_error);
      if (virEventRegisterDefaultImpl () < 0)
        g_error ("cannot set up the libvirt event loop: %s",
                 libvirt_error ());
      g_thread_unref (g_thread_new ("libvirt-events", event_loop_thread,
                                    NULL));
      g_once_init_leave (&started, 1);
    }
}

/* --- domains ------------------------------------------------------------ */

static void
agent_domain_free (AgentDomain *d)
{
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
set_domain_error (AgentDomain *d, const char *what, const char *message)
{
  g_autofree gchar *text = g_strdup_printf ("%s: %s", what, message);

  d->status->poll_errors_total++;
  if (g_strcmp0 (text, d->status->last_error) != 0)
    g_warning ("domain=%s: %s", d->status->name, text);
  g_free (d->status->last_error);
  d->status->last_error = g_steal_pointer (&text);
}

static void
read_balloon_stats (virDomainPtr dom, KstaledBalloonStats *st)
{
  virDomainMemoryStatStruct stats[VIR_DOMAIN_MEMORY_STAT_NR];
  int n = virDomainMemoryStats (dom, stats, VIR_DOMAIN_MEMORY_STAT_NR, 0);

  *st = (KstaledBalloonStats) { 0 };
  for (int i = 0; i < n; i++)
    {
      guint64 v = stats[i].val;

      switch (stats[i].tag)
        {
        case VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON:
          st->has_actual = TRUE, st->actual = v;
          break;
        case VIR_DOMAIN_MEMORY_STAT_AVAILABLE:
          st->has_available = TRUE, st->available = v;
          break;
        case VIR_DOMAIN_MEMORY_STAT_USABLE:
          st->has_usable = TRUE, st->usable = v;
          break;
        case VIR_DOMAIN_MEMORY_STAT_UNUSED:
          st->has_unused = TRUE, st->unused = v;
          break;
        case VIR_DOMAIN_MEMORY_STAT_SWAP_IN:
          st->has_swap_in = TRUE, st->swap_in = v;
          break;
        case VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT:
          st->has_major_fault = TRUE, st->major_fault = v;
          break;
        case VIR_DOMAIN_MEMORY_STAT_RSS:
          st->has_rss = TRUE, st->rss = v;
          break;
        default:
          break;
        }
    }
}

/* Queries the device; FALSE if the domain has none and is left alone. */
static gboolean
query_report (AgentDomain *d, virDomainPtr dom)
{
  g_autofree gchar *reply = NULL;
  g_autoptr (GError) error = NULL;
  KstaledReport *report;

  if (virDomainQemuMonitorCommand (dom, QUERY_KSTALED, &reply, 0) < 0)
    {
      set_domain_error (d, "query-kstaled failed", libvirt_error ());
      g_clear_pointer (&d->status->report, kstaled_report_free);
      return TRUE;
    }
  report = kstaled_report_parse (reply, strlen (reply), &error);
  if (g_error_matches (error, KSTALED_REPORT_ERROR,
                       KSTALED_REPORT_ERROR_NO_DEVICE))
    {
      g_message ("domain=%s has no kstaled device; leaving it alone (%s)",
                 d->status->name, error->message);
      d->status->device = KSTALED_DEVICE_ABSENT;
      return FALSE;
    }
  d->status->device = KSTALED_DEVICE_PRESENT;
  g_clear_pointer (&d->status->report, kstaled_report_free);
  if (report == NULL)
    {
      set_domain_error (d, "rejected query-kstaled reply", error->message);
      return TRUE;
    }
  d->status->report = report;
  if (d->status->last_error != NULL)
    {
      g_message ("domain=%s: query-kstaled works again", d->status->name);
      g_clear_pointer (&d->status->last_error, g_free);
    }
  return TRUE;
}

/* The balloon's counters libvirt 9.0 does not name; unset on failure. */
static void
read_guest_counters (AgentDomain *d, virDomainPtr dom,
                     KstaledGuestCounters *counters)
{
  g_autofree gchar *reply = NULL;
  g_autoptr (GError) error = NULL;

  *counters = (KstaledGuestCounters) { 0 };
  if (virDomainQemuMonitorCommand (dom, KSTALED_GUEST_STATS_COMMAND, &reply,
                                   0) < 0)
    g_debug ("domain=%s: no balloon guest-stats: %s", d->status->name,
             libvirt_error ());
  else if (!kstaled_guest_counters_parse (reply, strlen (reply), counters,
                                          &error))
    g_debug ("domain=%s: rejected balloon guest-stats: %s", d->status->name,
             error->message);
}

/* Gives the device the scan period and stale page age the policy wants. */
static void
configure_device (KstaledAgent *agent, AgentDomain *d, virDomainPtr dom,
                  const KstaledDecision *decision)
{
  g_autofree gchar *command = kstaled_device_config_command (decision,
                                                             d->status->report);
  g_autofree gchar *reply = NULL;

  if (command == NULL || agent->config->dry_run)
    return;
  if (virDomainQemuMonitorCommand (dom, command, &reply, 0) < 0)
    set_domain_error (d, "kstaled-set-config failed", libvirt_error ());
  else
    g_message ("domain=%s: device set to scan every %u s, stale after %u "
               "scans", d->status->name, decision->scan_seconds,
               decision->stale_page_age);
}

static void
apply_decision (KstaledAgent *agent, AgentDomain *d, virDomainPtr dom,
                const KstaledDecision *decision)
{
  KstaledDomainStatus *s = d->status;
  g_autofree gchar *line = kstaled_decision_format (s->name, decision);
  gboolean news = !s->has_decision || s->decision.reason != decision->reason;

  s->has_decision = TRUE;
  s->decision = *decision;
  s->decision_time = g_get_real_time ();
  if (decision->action == KSTALED_ACTION_NONE)
    {
      /* Unchanged no-action decisions are only news when debugging. */
      if (news)
        g_message ("%s", line);
      else
        g_debug ("%s", line);
      return;
    }
  g_message ("%s%s", agent->config->dry_run ? "dry-run: " : "", line);
  if (!agent->config->dry_run &&
      virDomainSetMemoryFlags (dom, decision->new_kib,
                               VIR_DOMAIN_AFFECT_LIVE) < 0)
    {
      set_domain_error (d, "setting the balloon failed", libvirt_error ());
      return;
    }
  s->has_action = TRUE;
  s->action = *decision;
  s->action_time = s->decision_time;
  s->action_dry_run = agent->config->dry_run;
  s->actions_total[decision->action]++;
}

static void
poll_domain (KstaledAgent *agent, virDomainPtr dom)
{
  AgentDomain *d = lookup_domain (agent, dom);
  const KstaledDomainConfig *dc =
    kstaled_config_for_domain (agent->config, d->status->name);
  KstaledPolicyInput input = { 0 };
  KstaledDecision decision;
  unsigned long max_kib;

  d->status->enabled = dc->enabled;
  if (!dc->enabled)
    {
      if (!d->logged_disabled)
        g_message ("domain=%s is disabled in the configuration; leaving it "
                   "alone", d->status->name);
      d->logged_disabled = TRUE;
      return;
    }
  d->logged_disabled = FALSE;
  if (d->status->device == KSTALED_DEVICE_ABSENT)
    return;

  d->status->polls_total++;
  if (!d->stats_period_set && agent->config->balloon_stats_period > 0 &&
      !agent->config->dry_run)
    {
      if (virDomainSetMemoryStatsPeriod (dom,
                                         (int) agent->config->balloon_stats_period,
                                         VIR_DOMAIN_AFFECT_LIVE) < 0)
        set_domain_error (d, "setting the balloon statistics period failed",
                          libvirt_error ());
      d->stats_period_set = TRUE;
    }
  if (!query_report (d, dom))
    return;

  read_balloon_stats (dom, &input.stats);
  read_guest_counters (d, dom, &input.counters);
  max_kib = virDomainGetMaxMemory (dom);
  if (max_kib == 0)
    set_domain_error (d, "reading the maximum memory failed",
                      libvirt_error ());
  input.report = d->status->report;
  input.max_memory_kib = max_kib;
  input.early_stale_drop = d->pending_stale_drop;
  input.now_us = g_get_monotonic_time ();
  input.rebooted = d->rebooted;
  input.domain = d->status->name;
  input.host = agent->host;
  kstaled_policy_decide (&dc->policy, &input, &d->policy, &decision);
  configure_device (agent, d, dom, &decision);
  d->pending_stale_drop = 0;
  d->rebooted = FALSE;
  apply_decision (agent, d, dom, &decision);
}

static void
poll_domain_by_name (KstaledAgent *agent, const char *name)
{
  g_autoptr (virDomain) dom = NULL;

  if (agent->conn == NULL)
    return;
  dom = virDomainLookupByName (agent->conn, name);
  if (dom == NULL)
    {
      g_debug ("domain=%s vanished before its poll: %s", name,
               libvirt_error ());
      return;
    }
  poll_domain (agent, dom);
  write_state (agent);
}

static void
poll_all (KstaledAgent *agent)
{
  virDomainPtr *doms = NULL;
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  gpointer key;
  int n;

  kstaled_host_poll (agent->host, &agent->config->host);
  n = virConnectListAllDomains (agent->conn, &doms,
                                VIR_CONNECT_LIST_DOMAINS_ACTIVE);
  if (n < 0)
    {
      g_warning ("listing the domains of %s failed: %s", agent->config->uri,
                 libvirt_error ());
      return;
    }
  for (int i = 0; i < n; i++)
    {
      poll_domain (agent, doms[i]);
      g_hash_table_add (seen, (gpointer) virDomainGetName (doms[i]));
    }
  /* Domains that stopped without our seeing the event. */
  g_hash_table_iter_init (&iter, agent->domains);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (!g_hash_table_contains (seen, key))
      {
        g_message ("domain=%s is no longer running; forgetting it",
                   (const char *) key);
        g_hash_table_iter_remove (&iter);
      }
  write_state (agent);
  for (int i = 0; i < n; i++)
    virDomainFree (doms[i]);
  free (doms);
}

/* Sources go to the agent's own context: libvirt's event loop iterates
 * the default one. */
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

static gboolean
poll_timeout (gpointer data)
{
  poll_all (data);
  return G_SOURCE_CONTINUE;
}

/* --- libvirt events, handed from the event-loop thread ---------------- */

static void
agent_event_free (gpointer data)
{
  AgentEvent *ev = data;

  g_free (ev->domain);
  g_free (ev->details);
  g_free (ev);
}

static void
handle_lifecycle (KstaledAgent *agent, const AgentEvent *ev)
{
  switch (ev->event)
    {
    case VIR_DOMAIN_EVENT_STARTED:
      g_message ("domain=%s started", ev->domain);
      g_hash_table_remove (agent->domains, ev->domain);
      poll_domain_by_name (agent, ev->domain);
      break;
    case VIR_DOMAIN_EVENT_STOPPED:
      g_message ("domain=%s stopped (detail %d); forgetting it", ev->domain,
                 ev->detail);
      g_hash_table_remove (agent->domains, ev->domain);
      write_state (agent);
      break;
    default:
      g_debug ("domain=%s lifecycle event %d detail %d", ev->domain,
               ev->event, ev->detail);
      break;
    }
}

static void
handle_early_report (KstaledAgent *agent, const AgentEvent *ev)
{
  AgentDomain *d = g_hash_table_lookup (agent->domains, ev->domain);
  g_autoptr (GError) error = NULL;
  guint64 drop;

  if (d == NULL || d->status->device != KSTALED_DEVICE_PRESENT)
    {
      g_debug ("domain=%s: early report from a domain not managed",
               ev->domain);
      return;
    }
  if (!kstaled_early_report_parse (ev->details, strlen (ev->details), &drop,
                                   &error))
    {
      set_domain_error (d, "rejected " EARLY_REPORT_EVENT, error->message);
      return;
    }
  d->status->early_reports_total++;
  d->pending_stale_drop = d->pending_stale_drop > G_MAXUINT64 - drop
                          ? G_MAXUINT64 : d->pending_stale_drop + drop;
  g_message ("domain=%s " EARLY_REPORT_EVENT " stale-drop-kib=%"
             G_GUINT64_FORMAT " delay-ms=%" G_GINT64_FORMAT, ev->domain,
             drop / 1024, (g_get_real_time () - ev->emitted_us) / 1000);
  poll_domain_by_name (agent, ev->domain);
}

static void disconnect_from_libvirt (KstaledAgent *agent);

static void
schedule_reconnect (KstaledAgent *agent);

static gboolean
handle_event (gpointer data)
{
  AgentEvent *ev = data;
  KstaledAgent *agent = ev->agent;

  if (ev->generation != agent->generation || agent->conn == NULL)
    return G_SOURCE_REMOVE;
  switch (ev->kind)
    {
    case EVENT_CLOSED:
      g_warning ("connection to %s closed (reason %d); reconnecting",
                 agent->config->uri, ev->event);
      disconnect_from_libvirt (agent);
      schedule_reconnect (agent);
      break;
    case EVENT_LIFECYCLE:
      handle_lifecycle (agent, ev);
      break;
    case EVENT_REBOOT:
      {
        AgentDomain *d = g_hash_table_lookup (agent->domains, ev->domain);

        g_message ("domain=%s rebooted", ev->domain);
        if (d != NULL)
          d->rebooted = TRUE;
        poll_domain_by_name (agent, ev->domain);
      }
      break;
    case EVENT_EARLY_REPORT:
      handle_early_report (agent, ev);
      break;
    }
  return G_SOURCE_REMOVE;
}

static void
post_event (Registration *reg, EventKind kind, virDomainPtr dom, int event,
            int detail, const char *details, gint64 emitted_us)
{
  AgentEvent *ev = g_new0 (AgentEvent, 1);

  ev->agent = reg->agent;
  ev->generation = reg->generation;
  ev->kind = kind;
  ev->domain = dom ? g_strdup (virDomainGetName (dom)) : NULL;
  ev->event = event;
  ev->detail = detail;
  /* One byte over the parser's limit is enough for it to refuse. */
  ev->details = g_strndup (details ? details : "", KSTALED_MAX_EVENT_LEN + 1);
  ev->emitted_us = emitted_us;
  g_main_context_invoke_full (reg->agent->context, G_PRIORITY_DEFAULT,
                              handle_event, ev, agent_event_free);
}

static void
on_close (virConnectPtr conn, int reason, void *opaque)
{
  (void) conn;
  post_event (opaque, EVENT_CLOSED, NULL, reason, 0, NULL, 0);
}

static int
on_lifecycle (virConnectPtr conn, virDomainPtr dom, int event, int detail,
              void *opaque)
{
  (void) conn;
  post_event (opaque, EVENT_LIFECYCLE, dom, event, detail, NULL, 0);
  return 0;
}

static int
on_reboot (virConnectPtr conn, virDomainPtr dom, void *opaque)
{
  (void) conn;
  post_event (opaque, EVENT_REBOOT, dom, 0, 0, NULL, 0);
  return 0;
}

static void
on_qemu_event (virConnectPtr conn, virDomainPtr dom, const char *event,
               long long seconds, unsigned int micros, const char *details,
               void *opaque)
{
  (void) conn;
  (void) event;
  post_event (opaque, EVENT_EARLY_REPORT, dom, 0, 0, details,
              (gint64) seconds * G_USEC_PER_SEC + micros);
}

/* --- connection ---------------------------------------------------------- */

static Registration *
registration_new (KstaledAgent *agent)
{
  Registration *reg = g_new (Registration, 1);

  reg->agent = agent;
  reg->generation = agent->generation;
  return reg;
}

static gboolean
register_events (KstaledAgent *agent, GError **error)
{
  const char *what;

  if (virConnectRegisterCloseCallback (agent->conn, on_close,
                                       registration_new (agent), g_free) < 0)
    what = "close callback";
  else if (virConnectSetKeepAlive (agent->conn, KEEPALIVE_INTERVAL_S,
                                   KEEPALIVE_COUNT) < 0)
    what = "keepalive";
  else if ((agent->lifecycle_id = virConnectDomainEventRegisterAny (
              agent->conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
              VIR_DOMAIN_EVENT_CALLBACK (on_lifecycle),
              registration_new (agent), g_free)) < 0)
    what = "lifecycle events";
  else if ((agent->reboot_id = virConnectDomainEventRegisterAny (
              agent->conn, NULL, VIR_DOMAIN_EVENT_ID_REBOOT,
              VIR_DOMAIN_EVENT_CALLBACK (on_reboot),
              registration_new (agent), g_free)) < 0)
    what = "reboot events";
  else if ((agent->early_report_id = virConnectDomainQemuMonitorEventRegister (
              agent->conn, NULL, EARLY_REPORT_EVENT, on_qemu_event,
              registration_new (agent), g_free, 0)) < 0)
    what = EARLY_REPORT_EVENT " events";
  else
    return TRUE;
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
               "cannot subscribe to %s on %s: %s", what, agent->config->uri,
               libvirt_error ());
  return FALSE;
}

static void
disconnect_from_libvirt (KstaledAgent *agent)
{
  if (agent->conn == NULL)
    return;
  remove_source (agent, &agent->poll_source);
  /* On a dead connection these fail; libvirt frees the registrations when
   * the connection goes either way. */
  if (agent->lifecycle_id >= 0)
    virConnectDomainEventDeregisterAny (agent->conn, agent->lifecycle_id);
  if (agent->reboot_id >= 0)
    virConnectDomainEventDeregisterAny (agent->conn, agent->reboot_id);
  if (agent->early_report_id >= 0)
    virConnectDomainQemuMonitorEventDeregister (agent->conn,
                                                agent->early_report_id);
  agent->lifecycle_id = agent->reboot_id = agent->early_report_id = -1;
  virConnectUnregisterCloseCallback (agent->conn, on_close);
  g_clear_pointer (&agent->conn, virConnectClose);
  agent->generation++;
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

/* Connects, subscribes and polls; TRUE if connected. */
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
  agent->context = g_main_context_new ();
  agent->loop = g_main_loop_new (agent->context, FALSE);
  agent->host = kstaled_host_new ();
  agent->state_writer = kstaled_state_writer_new (
    agent->context, KSTALED_STATUS_WRITE_INTERVAL_MS, render_state, agent);
  agent->domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) agent_domain_free);
  agent->lifecycle_id = agent->reboot_id = agent->early_report_id = -1;
  agent->reconnect_delay_s = RECONNECT_MIN_S;
  return g_steal_pointer (&agent);
}

gboolean
kstaled_agent_run (KstaledAgent *agent, GError **error)
{
  guint signals[3];
  gboolean ok = TRUE;

  start_libvirt_event_loop ();
  /* The metrics endpoint's I/O follows the thread-default context. */
  g_main_context_push_thread_default (agent->context);
  if (agent->options.once)
    {
      ok = try_connect (agent, error);
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
