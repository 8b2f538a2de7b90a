/* Config tests: defaults, overrides, per-domain inheritance, rejection. */
#include <string.h>

#include "kstaled-config.h"

static KstaledConfig *
load (const char *text, GError **error)
{
  return kstaled_config_load_data (text, strlen (text), error);
}

static void
test_defaults (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledConfig) c = load ("", &error);

  g_assert_no_error (error);
  g_assert_cmpstr (c->uri, ==, "qemu:///system");
  g_assert_cmpuint (c->poll_interval, ==, 10);
  g_assert_cmpuint (c->metrics_port, ==, 0);
  g_assert_cmpstr (c->metrics_address, ==, "127.0.0.1");
  g_assert_cmpuint (c->metrics_cgroups, ==, 0);
  g_assert_false (c->dry_run);
  g_assert_true (c->defaults.enabled);
  g_assert_cmpint (c->defaults.policy.mode, ==, KSTALED_MODE_KSTALED);
  g_assert_cmpuint (c->defaults.policy.cold_age, ==, 120);
  g_assert_cmpuint (c->defaults.policy.scan_seconds, ==, 4);
  g_assert_cmpstr (c->host.source, ==, "");
  g_assert_cmpuint (c->host.low_percent, ==, 20);
  g_assert_true (kstaled_config_for_domain (c, "any") == &c->defaults);
}

static void
test_overrides (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledConfig) c = load (
    "[agent]\n"
    "uri=qemu+ssh://host/system\n"
    "poll-interval=3\n"
    "metrics-port=9187\n"
    "metrics-address=::1\n"
    "metrics-cgroups=10\n"
    "metrics-token-file=/etc/kstaled-agent/metrics-token\n"
    "dry-run=true\n"
    "state-file=\n"
    "host-memory=/sys/fs/cgroup/machine.slice\n"
    "host-low-percent=30\n"
    "[policy]\n"
    "policy=mom\n"
    "cold-age=15\n"
    "min-cold-age=10\n"
    "headroom-mib=256\n"
    "min-memory-mib=1024\n"
    "swap-backed-reclaim-percent=50\n"
    "[domain web 1]\n"
    "min-memory-mib=2048\n"
    "[domain batch]\n"
    "enabled=false\n"
    "[domain fixed]\n"
    "policy=static\n", &error);
  const KstaledDomainConfig *web;

  g_assert_no_error (error);
  g_assert_cmpstr (c->uri, ==, "qemu+ssh://host/system");
  g_assert_cmpuint (c->poll_interval, ==, 3);
  g_assert_cmpuint (c->metrics_port, ==, 9187);
  g_assert_cmpstr (c->metrics_address, ==, "::1");
  g_assert_cmpuint (c->metrics_cgroups, ==, 10);
  g_assert_cmpstr (c->metrics_token_file, ==,
                   "/etc/kstaled-agent/metrics-token");
  g_assert_true (c->dry_run);
  g_assert_cmpstr (c->state_file, ==, "");
  g_assert_cmpuint (c->defaults.policy.cold_age, ==, 15);
  g_assert_cmpstr (c->host.source, ==, "/sys/fs/cgroup/machine.slice");
  g_assert_cmpuint (c->host.low_percent, ==, 30);
  g_assert_cmpuint (c->defaults.policy.min_memory_kib, ==, 1024 * 1024);
  g_assert_cmpuint (c->defaults.policy.swap_backed_reclaim_percent, ==, 50);

  web = kstaled_config_for_domain (c, "web 1");
  g_assert_true (web->enabled);
  g_assert_cmpuint (web->policy.min_memory_kib, ==, 2048 * 1024);
  /* inherited from [policy], whatever the group order */
  g_assert_cmpuint (web->policy.cold_age, ==, 15);
  g_assert_cmpint (web->policy.mode, ==, KSTALED_MODE_MOM);
  g_assert_cmpint (kstaled_config_for_domain (c, "fixed")->policy.mode, ==,
                   KSTALED_MODE_STATIC);
  g_assert_cmpuint (web->policy.headroom_kib, ==, 256 * 1024);
  g_assert_false (kstaled_config_for_domain (c, "batch")->enabled);
}

static void
test_policy_after_domain (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledConfig) c = load ("[domain a]\nheadroom-percent=5\n"
                                      "[policy]\ncold-age=60\n", &error);

  g_assert_no_error (error);
  g_assert_cmpuint (kstaled_config_for_domain (c, "a")->policy.cold_age, ==,
                    60);
  g_assert_cmpuint (kstaled_config_for_domain (c, "a")->policy.headroom_percent,
                    ==, 5);
}

static void
test_rejects (void)
{
  const char *bad[] = {
    "[agent]\npoll-interval=0\n",
    "[agent]\npoll-interval=-1\n",
    "[agent]\npoll-interval=10s\n",
    "[agent]\nmetrics-port=65536\n",
    "[agent]\npoll-intervall=10\n",
    "[agent]\nmetrics-address=localhost\n",
    "[agent]\nmetrics-address=127.0.0.1:9187\n",
    "[agent]\nmetrics-cgroups=65\n",
    "[agent]\ndry-run=maybe\n",
    "[policy]\nidle-age=5\n",
    "[policy]\ncold-age=0\n",
    "[policy]\ncold-age=30\n",
    "[policy]\ncold-age=2000\n",
    "[policy]\npolicy=ksm\n",
    "[domain x]\npolicy=\n",
    "[policy]\nscan-seconds=0\n",
    "[agent]\nhost-memory=proc\n",
    "[agent]\nhost-low-percent=101\n",
    "[policy]\nmax-step-mib=0\n",
    "[policy]\nswap-backed-reclaim-percent=101\n",
    "[policy]\nreclaim-swap-backed=true\n",
    "[policy]\nheadroom-mib=99999999999999999999\n",
    "[domain x]\nuri=qemu:///system\n",
    "[domain ]\nenabled=true\n",
    "[domains x]\n",
    "not a key file",
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (KstaledConfig) c = load (bad[i], &error);

      g_assert_null (c);
      g_assert_nonnull (error);
      g_test_message ("%s", error->message);
    }
}

static void
test_host_memory_none (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledConfig) c = load ("[agent]\nhost-memory=none\n", &error);

  g_assert_no_error (error);
  g_assert_null (c->host.source);
}

static void
test_missing_file (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledConfig) c =
    kstaled_config_load_file ("/nonexistent/kstaled-agent.conf", &error);

  g_assert_null (c);
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
}

static void
test_example_file (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledConfig) c =
    kstaled_config_load_file (g_getenv ("KSTALED_EXAMPLE_CONFIG"), &error);

  g_assert_no_error (error);
  g_assert_cmpstr (c->uri, ==, "qemu:///system");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/config/defaults", test_defaults);
  g_test_add_func ("/config/overrides", test_overrides);
  g_test_add_func ("/config/policy-after-domain", test_policy_after_domain);
  g_test_add_func ("/config/rejects", test_rejects);
  g_test_add_func ("/config/host-memory-none", test_host_memory_none);
  g_test_add_func ("/config/missing-file", test_missing_file);
  if (g_getenv ("KSTALED_EXAMPLE_CONFIG"))
    g_test_add_func ("/config/example-file", test_example_file);
  return g_test_run ();
}
