/* libFuzzer harness for what a guest controls in the agent: the
 * query-kstaled reply, the KSTALED_EARLY_REPORT event data and the
 * balloon's guest-stats, and, for a reply the parser accepts, the state
 * file, table and metrics made from it.  Built and run by run-fuzz.sh. */
#include <stdint.h>
#include <string.h>

#include "kstaled-config.h"
#include "kstaled-policy.h"
#include "kstaled-report.h"
#include "kstaled-status.h"

static void
render (KstaledReport *report)
{
  g_autoptr (GPtrArray) domains = g_ptr_array_new_with_free_func (
    (GDestroyNotify) kstaled_domain_status_free);
  KstaledDomainStatus *s = kstaled_domain_status_new ("fuzz");
  g_autoptr (KstaledConfig) agent_config = kstaled_config_new ();
  KstaledPolicyConfig config;
  KstaledPolicyState state = { 0 };
  KstaledPolicyInput input = {
    .report = report,
    .max_memory_kib = 1024 * 1024,
    .now_us = G_USEC_PER_SEC,
    .stats = { .has_actual = TRUE, .actual = 1024 * 1024,
               .has_available = TRUE, .available = 1000 * 1024,
               .has_unused = TRUE, .unused = 100 * 1024 },
  };
  json_object *json;
  gchar *text;

  /* the per-cgroup metrics too */
  agent_config->metrics_cgroups = 4;
  kstaled_policy_config_init (&config);
  kstaled_policy_decide (&config, &input, &state, &s->decision);
  s->has_decision = TRUE;
  s->device = KSTALED_DEVICE_PRESENT;
  s->report = report;
  g_ptr_array_add (domains, s);

  json = kstaled_status_to_json (domains, agent_config, 0);
  text = kstaled_status_format_table (json, 0);
  g_free (text);
  json_object_put (json);
  text = kstaled_status_format_metrics (domains, agent_config);
  g_free (text);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  GError *error = NULL;
  KstaledReport *report;
  KstaledGuestCounters counters;
  guint64 drop;

  report = kstaled_report_parse ((const char *) data, size, &error);
  g_assert ((report == NULL) != (error == NULL));
  g_clear_error (&error);
  if (report != NULL)
    render (report);            /* frees it */

  if (!kstaled_early_report_parse ((const char *) data, size, &drop, &error))
    {
      g_assert (error != NULL);
      g_clear_error (&error);
    }
  else
    g_assert (drop <= KSTALED_MAX_BYTES);

  if (!kstaled_guest_counters_parse ((const char *) data, size, &counters,
                                     &error))
    {
      g_assert (error != NULL);
      g_clear_error (&error);
    }
  else
    g_assert (counters.oom_kills <= KSTALED_MAX_COUNT &&
              counters.alloc_stalls <= KSTALED_MAX_COUNT);
  return 0;
}
