/* The agent's log lines about one domain, with the domain, and the action
 * and reason when there are any, as structured fields: in the journal,
 * journalctl KSTALED_DOMAIN=web1 lists one domain's lines, and
 * MESSAGE_ID=KSTALED_BALLOON_CHANGE_MESSAGE_ID the balloon changes.  The
 * text keeps its key=value form for stderr. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define KSTALED_BALLOON_CHANGE_MESSAGE_ID "16618fdf4eb6497b949b0024e37e9732"

/* @action is a kstaled_action_to_string() name or NULL; any action but
 * "none" marks a balloon change. */
void kstaled_log_domain (GLogLevelFlags level, const char *domain,
                         const char *action, const char *reason,
                         const char *format, ...) G_GNUC_PRINTF (5, 6);

G_END_DECLS
