/* What the agent learns about a domain from libvirt alone, without sending
 * its QEMU a monitor command (which libvirt answers by tainting the domain
 * "custom-monitor"): whether its XML gives it a kstaled device and a balloon
 * that deflates on OOM, and its state and balloon statistics from one
 * virDomainListGetStats record.  Pure functions, no I/O.
 *
 * A domain has the device when its <qemu:commandline> passes QEMU
 * "-device virtio-kstaled-pci,..." (or any virtio-kstaled-* driver, in
 * key=value or JSON syntax), or, for a device added some other way (a
 * wrapper, device_add), when its <metadata> carries the opt-in element
 *   <kstaled:device xmlns:kstaled="urn:kstaled-vm:agent:1"/>
 * (virsh metadata DOMAIN urn:kstaled-vm:agent:1 --key kstaled
 *  --set '<device/>' --live adds it to a running domain). */
#pragma once

#include <glib.h>
#include <libvirt/libvirt.h>

#include "kstaled-policy.h"

G_BEGIN_DECLS

#define KSTALED_METADATA_NS "urn:kstaled-vm:agent:1"
#define KSTALED_METADATA_DEVICE "device"

typedef struct {
  gboolean has_device;
  gboolean deflate_on_oom;      /* <memballoon autodeflate='on'> */
} KstaledDomainXml;

/* Parses virDomainGetXMLDesc output. */
gboolean kstaled_domain_xml_parse (const char *xml, gssize len,
                                   KstaledDomainXml *info, GError **error);

/* Whether the value of a QEMU -device option creates a kstaled device. */
gboolean kstaled_device_option_is_kstaled (const char *option);

typedef struct {
  gboolean has_state;
  int state;                    /* virDomainState */
  int reason;                   /* its virDomain*Reason */
  guint64 max_memory_kib;       /* 0 if unknown */
  KstaledBalloonStats balloon;
} KstaledDomainStats;

/* Reads the "state.*" and "balloon.*" fields of a virDomainStatsRecord. */
void kstaled_domain_stats_from_params (virTypedParameterPtr params,
                                       int nparams,
                                       KstaledDomainStats *stats);

/* With VIRTIO_BALLOON_F_DEFLATE_ON_OOM the guest kernel keeps the balloon's
 * pages in MemTotal ("available") and counts them as allocated, so the
 * balloon would look like used memory.  Takes it out of "available", which
 * makes the statistics read as those of a guest without the feature. */
void kstaled_balloon_stats_exclude_balloon (KstaledBalloonStats *stats,
                                            guint64 max_memory_kib);

G_END_DECLS
