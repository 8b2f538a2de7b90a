/* The baseline policies the kstaled policy is measured against, as policy
 * modes sharing the agent's actuation (docs/balloon-policy.md):
 *
 *   mom      oVirt MOM's default balloon rules: doc/balloon.rules in
 *            github.com/oVirt/mom, as vdsm ships them in
 *            static/etc/vdsm/mom.d/02-balloon.policy;
 *   proxmox  Proxmox VE's auto-ballooning: PVE/AutoBalloon.pm
 *            (compute_alg1) and the call in PVE/Service/pvestatd.pm of
 *            git.proxmox.com/pve-manager.git;
 *   static   no ballooning, as KubeVirt and newer Nova and CloudStack run
 *            guests (free page reporting may be on, which needs no policy).
 */
#pragma once

#include "kstaled-host.h"
#include "kstaled-policy.h"

G_BEGIN_DECLS

/* MOM's constants (balloon.rules). */
#define KSTALED_MOM_PRESSURE_THRESHOLD 0.20
#define KSTALED_MOM_PRESSURE_CRITICAL 0.05
#define KSTALED_MOM_MIN_GUEST_FREE 0.20
#define KSTALED_MOM_MAX_CHANGE 0.05
#define KSTALED_MOM_MIN_CHANGE 0.0025

/* Proxmox's constants (pvestatd.pm, AutoBalloon.pm), in KiB. */
#define KSTALED_PROXMOX_TARGET_USED 0.80
#define KSTALED_PROXMOX_MAX_CHANGE_KIB (100 * 1024)
#define KSTALED_PROXMOX_DEAD_BAND_KIB (10 * 1024)
#define KSTALED_PROXMOX_DEFAULT_SHARES 1000

void kstaled_mom_decide (const KstaledPolicyConfig *config,
                         const KstaledPolicyInput *input,
                         KstaledPolicyState *state, KstaledDecision *d);
void kstaled_proxmox_decide (const KstaledPolicyConfig *config,
                             const KstaledPolicyInput *input,
                             KstaledDecision *d);
void kstaled_static_decide (const KstaledPolicyInput *input,
                            KstaledDecision *d);

/* Proxmox's compute_alg1 over the domains in @vms with proxmox set: the
 * host wants 80 % of @total_kib used and has @used_kib used.  Sets
 * has_proxmox_target and proxmox_target_kib of the domains it moves. */
void kstaled_proxmox_allocate (KstaledVmRecord *vms, guint n,
                               guint64 total_kib, guint64 used_kib);

G_END_DECLS
