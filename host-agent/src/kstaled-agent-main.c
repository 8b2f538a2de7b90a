/* kstaled-agent: command line of the daemon; the work is in kstaled-agent.c. */
#include <locale.h>
#include <stdlib.h>

#include "kstaled-agent.h"

int
main (int argc, char **argv)
{
  g_autofree gchar *config_file = NULL;
  g_autofree gchar *uri = NULL;
  g_autofree gchar *state_file = NULL;
  gint metrics_port = -1;
  gboolean dry_run = FALSE, once = FALSE, verbose = FALSE;
  const GOptionEntry entries[] = {
    { "config", 'c', 0, G_OPTION_ARG_FILENAME, &config_file,
      "Configuration file (default " "/etc/kstaled-agent.conf" ")", "FILE" },
    { "uri", 'u', 0, G_OPTION_ARG_STRING, &uri,
      "libvirt connection URI (default qemu:///system)", "URI" },
    { "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run,
      "Log decisions without changing any balloon", NULL },
    { "once", '1', 0, G_OPTION_ARG_NONE, &once,
      "Poll every running domain once, then exit", NULL },
    { "metrics-port", 'm', 0, G_OPTION_ARG_INT, &metrics_port,
      "Serve Prometheus metrics on PORT of metrics-address (0: off)",
      "PORT" },
    { "state-file", 's', 0, G_OPTION_ARG_FILENAME, &state_file,
      "Where kstaled-ctl finds the daemon's state (empty: none)", "FILE" },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose,
      "Log every decision and debugging detail", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new (NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledAgent) agent = NULL;
  KstaledAgentOptions options;

  setlocale (LC_ALL, "");
  g_option_context_set_summary (ctx, "Balloons libvirt domains down to the "
                                "working set their kstaled devices report.");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("kstaled-agent: %s\n", error->message);
      return 2;
    }
  if (metrics_port > 65535)
    {
      g_printerr ("kstaled-agent: --metrics-port %d is not a port\n",
                  metrics_port);
      return 2;
    }
  /* g_log_writer_default logs to the journal when stderr is connected to
   * it (JOURNAL_STREAM), else to stderr. */
  if (verbose)
    g_log_set_debug_enabled (TRUE);

  options = (KstaledAgentOptions) {
    .config_file = config_file,
    .uri = uri,
    .state_file = state_file,
    .metrics_port = metrics_port,
    .dry_run = dry_run,
    .once = once,
  };
  agent = kstaled_agent_new (&options, &error);
  if (agent == NULL || !kstaled_agent_run (agent, &error))
    {
      g_printerr ("kstaled-agent: %s\n", error->message);
      return EXIT_FAILURE;
    }
  return EXIT_SUCCESS;
}
