#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-log.h"

#include <string.h>

/* syslog priorities, as g_log_structured() gives them. */
static const char *
log_priority (GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)
    return "3";
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    return "4";
  if (level & G_LOG_LEVEL_MESSAGE)
    return "5";
  if (level & G_LOG_LEVEL_INFO)
    return "6";
  return "7";
}

void
kstaled_log_domain (GLogLevelFlags level, const char *domain,
                    const char *action, const char *reason,
                    const char *format, ...)
{
  g_autofree gchar *message = NULL;
  GLogField fields[7];
  gsize n = 0;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  fields[n++] = (GLogField) { "GLIB_DOMAIN", G_LOG_DOMAIN, -1 };
  fields[n++] = (GLogField) { "PRIORITY", log_priority (level), -1 };
  fields[n++] = (GLogField) { "MESSAGE", message, -1 };
  fields[n++] = (GLogField) { "KSTALED_DOMAIN", domain, -1 };
  if (action != NULL)
    fields[n++] = (GLogField) { "KSTALED_ACTION", action, -1 };
  if (reason != NULL)
    fields[n++] = (GLogField) { "KSTALED_REASON", reason, -1 };
  if (action != NULL && strcmp (action, "none") != 0)
    fields[n++] = (GLogField) { "MESSAGE_ID",
                                KSTALED_BALLOON_CHANGE_MESSAGE_ID, -1 };
  g_log_structured_array (level, fields, n);
}
