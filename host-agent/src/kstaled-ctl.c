/* kstaled-ctl: prints the state kstaled-agent last wrote, as a table or
 * as JSON, for every domain or the ones named. */
#include <locale.h>
#include <stdlib.h>

#include "kstaled-autocleanups.h"
#include "kstaled-config.h"
#include "kstaled-status.h"

int
main (int argc, char **argv)
{
  g_autofree gchar *state_file = NULL;
  gboolean json = FALSE, version = FALSE;
  const GOptionEntry entries[] = {
    { "state-file", 's', 0, G_OPTION_ARG_FILENAME, &state_file,
      "The daemon's state file (default " KSTALED_DEFAULT_STATE_FILE ")",
      "FILE" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json,
      "Print the state as JSON", NULL },
    { "version", 'V', 0, G_OPTION_ARG_NONE, &version,
      "Print the version and exit", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx =
    g_option_context_new ("[status [DOMAIN…]]");
  g_autoptr (GError) error = NULL;
  g_autoptr (json_object) state = NULL;
  gint64 now = g_get_real_time ();
  gboolean stale;
  gint64 age;

  setlocale (LC_ALL, "");
  g_option_context_set_summary (ctx, "Shows each domain's idle memory "
                                "histograms, estimate, target and the "
                                "agent's last action.");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("kstaled-ctl: %s\n", error->message);
      return 2;
    }
  if (version)
    {
      g_print ("kstaled-ctl %s\n", KSTALED_VERSION);
      return EXIT_SUCCESS;
    }
  if (argc >= 2 && !g_str_equal (argv[1], "status"))
    {
      g_printerr ("kstaled-ctl: unknown command \"%s\" (only \"status\")\n",
                  argv[1]);
      return 2;
    }
  state = kstaled_status_read_file (state_file ? state_file
                                    : KSTALED_DEFAULT_STATE_FILE, &error);
  if (state == NULL)
    {
      g_printerr ("kstaled-ctl: %s (%s)\n", error->message,
                  g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_ACCES)
                  ? "only root and the kstaled group may read it"
                  : "is kstaled-agent running?");
      return EXIT_FAILURE;
    }
  if (argc > 2 &&
      !kstaled_status_filter (state, (const char *const *) argv + 2, &error))
    {
      g_printerr ("kstaled-ctl: %s\n", error->message);
      return EXIT_FAILURE;
    }
  age = kstaled_status_age (state, now, &stale);
  if (json)
    {
      /* The table says it in its header; JSON readers get it on stderr. */
      if (stale)
        g_printerr ("kstaled-ctl: warning: the state is %" G_GINT64_FORMAT
                    " s old, more than three poll intervals: kstaled-agent "
                    "is stopped, stuck or cut off from libvirt\n", age);
      g_print ("%s\n", json_object_to_json_string_ext (
                 state, JSON_C_TO_STRING_PRETTY |
                 JSON_C_TO_STRING_NOSLASHESCAPE));
    }
  else
    {
      g_autofree gchar *table = kstaled_status_format_table (state, now);

      g_print ("%s", table);
    }
  return EXIT_SUCCESS;
}
