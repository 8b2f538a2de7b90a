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

/* A guest with a 512 MiB maximum whose workload uses 200 MiB, the
 * balloon inflated to 256 MiB, in KiB as virsh dommemstat prints them.
 * Without deflate-on-oom MemTotal shrinks with the balloon; with it, it
 * stays and the balloon's pages count as allocated. */
#define MAX_KIB 524288
#define ACTUAL_KIB 262144
#define USED_KIB 204800
#define RESERVED_KIB 23000          /* kernel, firmware: never in MemTotal */

static KstaledBalloonStats
guest_stats (gboolean deflate_on_oom)
{
  guint64 mem_total = (deflate_on_oom ? MAX_KIB : ACTUAL_KIB) - RESERVED_KIB;
  guint64 allocated = USED_KIB + (deflate_on_oom ? MAX_KIB - ACTUAL_KIB : 0);

  return (KstaledBalloonStats) {
    .has_actual = TRUE, .actual = ACTUAL_KIB,
    .has_available = TRUE, .available = mem_total,
    .has_unused = TRUE, .unused = mem_total - allocated,
  };
}

static void
test_exclude_balloon (void)
{
  KstaledBalloonStats plain = guest_stats (FALSE);
  KstaledBalloonStats doom = guest_stats (TRUE);
  KstaledBalloonStats full = { .has_actual = TRUE, .actual = MAX_KIB,
                               .has_available = TRUE, .available = 500000 };

  kstaled_balloon_stats_exclude_balloon (&doom, MAX_KIB);
  g_assert_cmpuint (doom.available, ==, plain.available);
  g_assert_cmpuint (doom.available - doom.unused, ==, USED_KIB);
  /* Nothing to take out of a deflated balloon, nor below zero. */
  kstaled_balloon_stats_exclude_balloon (&full, MAX_KIB);
  g_assert_cmpuint (full.available, ==, 500000);
  full.actual = 1024;
  kstaled_balloon_stats_exclude_balloon (&full, MAX_KIB);
  g_assert_cmpuint (full.available, ==, 0);
}

/* What the policy makes of the same guest with and without the feature:
 * the same target once the balloon is taken out, and a target that would
 * keep the balloon (and grow with it) if it were not. */
static void
test_exclude_balloon_policy (void)
{
  static const char reply[] =
    "{\"return\":{\"qom-path\":\"/machine/peripheral/kstaled0/virtio-backend\","
    "\"scan-seconds\":1,\"stale-page-age\":5,\"reports\":40,"
    "\"dropped-reports\":0,\"report-age-ms\":300,\"guest-scans\":40,"
    "\"cgroups\":[{\"path\":\"/work\",\"inode\":7,\"scans\":40,\"stale\":0,"
    "\"memory-usage\":209715200,"
    "\"idle-clean\":[104857600,104857600,104857600,104857600,0,0,0,0],"
    "\"idle-dirty-file\":[0,0,0,0,0,0,0,0],"
    "\"idle-dirty-swap\":[0,0,0,0,0,0,0,0]}]}}";
  g_autoptr (GError) error = NULL;
  g_autoptr (KstaledReport) report =
    kstaled_report_parse (reply, strlen (reply), &error);
  KstaledPolicyConfig config;
  KstaledDecision plain, doom, uncorrected;

  g_assert_no_error (error);
  kstaled_policy_config_init (&config);
  config.min_memory_kib = 128 * 1024;
  for (guint i = 0; i < 3; i++)
    {
      KstaledPolicyState state = { 0 };
      KstaledPolicyInput input = {
        .report = report,
        .max_memory_kib = MAX_KIB,
        .now_us = G_USEC_PER_SEC,
        .stats = guest_stats (i > 0),
      };

      if (i == 1)
        kstaled_balloon_stats_exclude_balloon (&input.stats, MAX_KIB);
      kstaled_policy_decide (&config, &input, &state,
                             i == 0 ? &plain : i == 1 ? &doom : &uncorrected);
    }
  g_assert_true (plain.has_estimate);
  g_assert_cmpuint (plain.working_set_kib, ==, USED_KIB - 100 * 1024);
  g_assert_cmpuint (doom.working_set_kib, ==, plain.working_set_kib);
  g_assert_cmpuint (doom.target_kib, ==, plain.target_kib);
  g_assert_cmpuint (uncorrected.working_set_kib, ==,
                    plain.working_set_kib + MAX_KIB - ACTUAL_KIB);
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
