/* Domain tests: the kstaled device and deflate-on-oom found in domain XML,
 * the statistics record read, and the deflate-on-oom correction fed to the
 * policy. */
#include <string.h>

#include "kstaled-domain.h"

#define DOMAIN_HEAD \
  "<domain type='qemu' id='3' " \
  "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n" \
  "  <name>web1</name>\n" \
  "  <uuid>0d1c44a7-5e3b-4b76-9a3b-3b7c3b1f4e21</uuid>\n"
#define DEVICES(memballoon) \
  "  <devices>\n" \
  "    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n" \
  "    <serial type='file'><source path='/tmp/c.log'/>" \
  "<target type='isa-serial' port='0'><model name='isa-serial'/></target>" \
  "</serial>\n" \
  "    " memballoon "\n" \
  "  </devices>\n"
#define BALLOON \
  "<memballoon model='virtio'><stats period='1'/>" \
  "<alias name='balloon0'/></memballoon>"
#define COMMANDLINE(device) \
  "  <qemu:commandline>\n" \
  "    <qemu:arg value='-device'/>\n" \
  "    <qemu:arg value='" device "'/>\n" \
  "  </qemu:commandline>\n"
#define DOMAIN_TAIL "</domain>\n"

static KstaledDomainXml
parse_ok (const char *xml)
{
  g_autoptr (GError) error = NULL;
  KstaledDomainXml info;

  g_assert_true (kstaled_domain_xml_parse (xml, -1, &info, &error));
  g_assert_no_error (error);
  return info;
}

static void
test_xml_commandline (void)
{
  KstaledDomainXml info = parse_ok (
    DOMAIN_HEAD DEVICES (BALLOON)
    COMMANDLINE ("virtio-kstaled-pci,id=kstaled0,bus=pcie.0,addr=0x10,"
                 "scan-seconds=1,stale-page-age=5")
    DOMAIN_TAIL);

  g_assert_true (info.has_device);
  g_assert_false (info.deflate_on_oom);
}

static void
test_xml_without_device (void)
{
  /* Other devices on the command line, and a kstaled driver name that is
   * not the value of -device. */
  KstaledDomainXml info = parse_ok (
    DOMAIN_HEAD DEVICES (BALLOON)
    "  <qemu:commandline>\n"
    "    <qemu:arg value='-device'/>\n"
    "    <qemu:arg value='virtio-rng-pci,id=rng0'/>\n"
    "    <qemu:arg value='-name'/>\n"
    "    <qemu:arg value='virtio-kstaled-pci'/>\n"
    "  </qemu:commandline>\n"
    DOMAIN_TAIL);

  g_assert_false (info.has_device);
  info = parse_ok (DOMAIN_HEAD DEVICES (BALLOON) DOMAIN_TAIL);
  g_assert_false (info.has_device);
}

static void
test_xml_metadata (void)
{
  /* As libvirt prints what `virsh metadata ... --key kstaled --set
   * '<device/>'` stored. */
  KstaledDomainXml info = parse_ok (
    DOMAIN_HEAD
    "  <metadata>\n"
    "    <kstaled:device xmlns:kstaled=\"" KSTALED_METADATA_NS "\"/>\n"
    "  </metadata>\n"
    DEVICES (BALLOON) DOMAIN_TAIL);

  g_assert_true (info.has_device);
  /* Without a prefix, and with another namespace or element. */
  info = parse_ok (DOMAIN_HEAD
                   "<metadata><device xmlns='" KSTALED_METADATA_NS "'/>"
                   "</metadata>" DOMAIN_TAIL);
  g_assert_true (info.has_device);
  info = parse_ok (DOMAIN_HEAD
                   "<metadata><k:device xmlns:k='urn:other'/>"
                   "<k:agent xmlns:k='" KSTALED_METADATA_NS "'/>"
                   "</metadata>" DOMAIN_TAIL);
  g_assert_false (info.has_device);
}

static void
test_xml_deflate_on_oom (void)
{
  KstaledDomainXml info = parse_ok (
    DOMAIN_HEAD
    DEVICES ("<memballoon model='virtio' autodeflate='on'>"
             "<stats period='1'/></memballoon>")
    DOMAIN_TAIL);

  g_assert_true (info.deflate_on_oom);
  info = parse_ok (DOMAIN_HEAD
                   DEVICES ("<memballoon model='virtio' autodeflate='off'/>")
                   DOMAIN_TAIL);
  g_assert_false (info.deflate_on_oom);
}

static void
test_xml_malformed (void)
{
  g_autoptr (GError) error = NULL;
  KstaledDomainXml info;

  g_assert_false (kstaled_domain_xml_parse (
    DOMAIN_HEAD COMMANDLINE ("virtio-kstaled-pci"), -1, &info, &error));
  g_assert_nonnull (error);
  g_assert_false (info.has_device);
}

static void
test_device_option (void)
{
  static const struct {
    const char *option;
    gboolean kstaled;
  } cases[] = {
    { "virtio-kstaled-pci", TRUE },
    { "virtio-kstaled-pci,id=k0", TRUE },
    { "virtio-kstaled-device,bus=virtio-mmio-bus.0", TRUE },
    { "id=k0,driver=virtio-kstaled-pci", TRUE },
    { "{\"driver\":\"virtio-kstaled-pci\",\"id\":\"k0\"}", TRUE },
    { "virtio-balloon-pci,id=b0", FALSE },
    /* An escaped comma keeps "driver=" inside the value of id. */
    { "virtio-rng-pci,id=a,,driver=virtio-kstaled-pci", FALSE },
    { "id=virtio-kstaled-pci", FALSE },
    { "virtio-kstaled", FALSE },
    { "{\"driver\":7}", FALSE },
    { "{\"id\":{\"driver\":\"virtio-kstaled-pci\"}}", FALSE },
    { "{\"driver\":", FALSE },
    { "", FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_test_message ("%s", cases[i].option);
      g_assert_cmpint (kstaled_device_option_is_kstaled (cases[i].option), ==,
                       cases[i].kstaled);
    }
}

static void
test_stats_from_params (void)
{
  virTypedParameterPtr params = NULL;
  int n = 0, max = 0;
  KstaledDomainStats stats;

  g_assert_cmpint (virTypedParamsAddInt (&params, &n, &max, "state.state",
                                         VIR_DOMAIN_PAUSED), ==, 0);
  g_assert_cmpint (virTypedParamsAddInt (&params, &n, &max, "state.reason",
                                         VIR_DOMAIN_PAUSED_USER), ==, 0);
  g_assert_cmpint (virTypedParamsAddULLong (&params, &n, &max,
                                            "balloon.current", 400000), ==, 0);
  g_assert_cmpint (virTypedParamsAddULLong (&params, &n, &max,
                                            "balloon.maximum", 524288), ==, 0);
  g_assert_cmpint (virTypedParamsAddULLong (&params, &n, &max,
                                            "balloon.unused", 1234), ==, 0);
  g_assert_cmpint (virTypedParamsAddULLong (&params, &n, &max,
                                            "balloon.swap_in", 0), ==, 0);
  kstaled_domain_stats_from_params (params, n, &stats);
  virTypedParamsFree (params, n);

  g_assert_true (stats.has_state);
  g_assert_cmpint (stats.state, ==, VIR_DOMAIN_PAUSED);
  g_assert_cmpint (stats.reason, ==, VIR_DOMAIN_PAUSED_USER);
  g_assert_cmpuint (stats.max_memory_kib, ==, 524288);
  g_assert_true (stats.balloon.has_actual);
  g_assert_cmpuint (stats.balloon.actual, ==, 400000);
  g_assert_true (stats.balloon.has_unused);
  g_assert_cmpuint (stats.balloon.unused, ==, 1234);
  g_assert_true (stats.balloon.has_swap_in);
  g_assert_false (stats.balloon.has_available);
  g_assert_false (stats.balloon.has_major_fault);

  /* NOWAIT on a busy domain: only what libvirt knows without QEMU. */
  kstaled_domain_stats_from_params (NULL, 0, &stats);
  g_assert_false (stats.has_state);
  g_assert_false (stats.balloon.has_actual);
  g_assert_cmpuint (stats.max_memory_kib, ==, 0);
}

/* Recorded from the settled guest of test-agent-deflate-on-oom.sh (512 MiB,
 * <memballoon autodeflate='on'>, memload keeping 40 of 300 MiB hot): virsh
 * domstats --balloon, in KiB, and the idle memory the agent counted then.
 * MemTotal ("available") stayed near the maximum while the balloon took
 * 364 MiB. */
#define DOOM_MAX_KIB 524288
#define DOOM_ACTUAL_KIB 151108
#define DOOM_AVAILABLE_KIB 478724
#define DOOM_UNUSED_KIB 5896
#define DOOM_IDLE_KIB 33228
#define DOOM_USED_KIB 99648         /* available - balloon - unused */

static KstaledBalloonStats
doom_stats (void)
{
  return (KstaledBalloonStats) {
    .has_actual = TRUE, .actual = DOOM_ACTUAL_KIB,
    .has_available = TRUE, .available = DOOM_AVAILABLE_KIB,
    .has_unused = TRUE, .unused = DOOM_UNUSED_KIB,
  };
}

static void
test_exclude_balloon (void)
{
  KstaledBalloonStats doom = doom_stats ();
  KstaledBalloonStats full = { .has_actual = TRUE, .actual = DOOM_MAX_KIB,
                               .has_available = TRUE, .available = 500000 };

  kstaled_balloon_stats_exclude_balloon (&doom, DOOM_MAX_KIB);
  g_assert_cmpuint (doom.available - doom.unused, ==, DOOM_USED_KIB);
  /* Nothing to take out of a deflated balloon, nor below zero. */
  kstaled_balloon_stats_exclude_balloon (&full, DOOM_MAX_KIB);
  g_assert_cmpuint (full.available, ==, 500000);
  full.actual = 1024;
  kstaled_balloon_stats_exclude_balloon (&full, DOOM_MAX_KIB);
  g_assert_cmpuint (full.available, ==, 0);
}

/* What the policy makes of the recorded guest: the working set the agent
 * logged with the balloon taken out, and, without, nearly all of the
 * guest's memory, balloon included. */
static void
test_exclude_balloon_policy (void)
{
  g_autofree gchar *reply = g_strdup_printf (
    "{\"return\":{\"qom-path\":\"/machine/peripheral/kstaled0/virtio-backend\","
    "\"scan-seconds\":1,\"stale-page-age\":5,\"reports\":40,"
    "\"dropped-reports\":0,\"report-age-ms\":300,\"guest-scans\":40,"
    "\"cgroups\":[{\"path\":\"/work\",\"inode\":7,\"scans\":40,\"stale\":0,"
    "\"memory-usage\":104857600,"
    "\"idle-clean\":[0,0,0,0,0,0,0,0],"
    "\"idle-dirty-file\":[0,0,0,0,0,0,0,0],"
    "\"idle-dirty-swap\":[%d,%d,%d,%d,%d,%d,%d,%d]}]}}",
    /* Idle in every bucket, whatever cold age the policy picks. */
    DOOM_IDLE_KIB * 1024, DOOM_IDLE_KIB * 1024, DOOM_IDLE_KIB * 1024,
    DOOM_IDLE_KIB * 1024, DOOM_IDLE_KIB * 1024, DOOM_IDLE_KIB * 1024,
    DOOM_IDLE_KIB * 1024, DOOM_IDLE_KIB * 1024);
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledReport) report =
    kstaled_report_parse (reply, strlen (reply), &error);
  KstaledPolicyConfig config;
  KstaledDecision corrected, uncorrected;

  g_assert_no_error (error);
  kstaled_policy_config_init (&config);
  config.swap_backed_reclaim_percent = 100;
  for (guint i = 0; i < 2; i++)
    {
      KstaledPolicyState state = { 0 };
      KstaledPolicyInput input = {
        .report = report,
        .max_memory_kib = DOOM_MAX_KIB,
        .now_us = G_USEC_PER_SEC,
        .stats = doom_stats (),
      };

      if (i == 0)
        kstaled_balloon_stats_exclude_balloon (&input.stats, DOOM_MAX_KIB);
      kstaled_policy_decide (&config, &input, &state,
                             i == 0 ? &corrected : &uncorrected);
    }
  g_assert_true (corrected.has_estimate);
  g_assert_cmpuint (corrected.working_set_kib, ==,
                    DOOM_USED_KIB - DOOM_IDLE_KIB);
  g_assert_cmpuint (uncorrected.working_set_kib, ==,
                    DOOM_USED_KIB - DOOM_IDLE_KIB + DOOM_MAX_KIB
                    - DOOM_ACTUAL_KIB);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* The typed-parameter functions use libvirt's error state. */
  g_assert_cmpint (virInitialize (), ==, 0);
  g_test_add_func ("/domain/xml/commandline", test_xml_commandline);
  g_test_add_func ("/domain/xml/without-device", test_xml_without_device);
  g_test_add_func ("/domain/xml/metadata", test_xml_metadata);
  g_test_add_func ("/domain/xml/deflate-on-oom", test_xml_deflate_on_oom);
  g_test_add_func ("/domain/xml/malformed", test_xml_malformed);
  g_test_add_func ("/domain/device-option", test_device_option);
  g_test_add_func ("/domain/stats-from-params", test_stats_from_params);
  g_test_add_func ("/domain/exclude-balloon", test_exclude_balloon);
  g_test_add_func ("/domain/exclude-balloon/policy",
                   test_exclude_balloon_policy);
  return g_test_run ();
}
