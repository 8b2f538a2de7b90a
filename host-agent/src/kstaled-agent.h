/* The daemon: follows the domains of one libvirt connection, polls their
 * kstaled devices, runs the policy and sets their balloons.  The main
 * thread runs GLib's default main context, where libvirt's events, the
 * timers, the metrics endpoint and every decision happen; libvirt calls
 * that reach a domain's QEMU run in a pool of worker threads, one job per
 * domain at a time, so that a QEMU that does not answer holds up only its
 * own domain. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const char *config_file;      /* NULL: the default, which may be absent */
  /* Overrides of [agent] keys; NULL / -1 / FALSE: keep the file's. */
  const char *uri;
  const char *state_file;
  gint metrics_port;
  gboolean dry_run;
  gboolean once;                /* poll every domain once, then return */
} KstaledAgentOptions;

typedef struct _KstaledAgent KstaledAgent;

KstaledAgent *kstaled_agent_new (const KstaledAgentOptions *options,
                                 GError **error);
/* Runs until SIGINT or SIGTERM (SIGHUP reloads the configuration), or
 * after one round with --once.  FALSE with @error if it could not start. */
gboolean kstaled_agent_run (KstaledAgent *agent, GError **error);
void kstaled_agent_free (KstaledAgent *agent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KstaledAgent, kstaled_agent_free)

G_END_DECLS
