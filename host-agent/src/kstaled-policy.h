/* Balloon policy: a pure function from a domain's kstaled report and balloon
 * statistics to a memory target and an action.  No I/O, no clock: the caller
 * passes the time, so the tests can drive it step by step.
 *
 * working set = guest used memory - memory idle for >= idle-age scans
 * target      = working set + headroom (% of working set + fixed KiB)
 *               + the part of the balloon the guest does not see as MemTotal
 * floor       = max(min-memory, memory touched within the last scan)
 * target is clamped to [floor, max memory].  Growing the guest (deflating
 * the balloon) happens at once and in full; shrinking (inflating) happens in
 * steps of at most max-step, only for differences above the hysteresis, and
 * not while a pressure hold-off runs; the next step waits until the balloon
 * reached the last one (or KSTALED_SETTLE_SECONDS passed), since a guest
 * under TCG or short of memory frees its pages slowly.  Pressure (an early report with a large
 * stale drop, or swap-in / major-fault rates over their limits) deflates to
 * the maximum at once and starts the hold-off.  A guest reboot does the same
 * without the hold-off: the new kernel has neither kstaled history nor
 * counters, and boots best with all its memory.  Until its balloon driver
 * moves the balloon, QEMU still reports the old kernel's "actual", so the
 * policy takes the guest to be at the maximum the reboot gave it.
 *
 * Histograms are summed over cgroups: kstaled charges each page to the one
 * memory cgroup that owns it, so cgroup histograms do not overlap. */
#pragma once

#include <glib.h>

#include "kstaled-report.h"

G_BEGIN_DECLS

typedef struct {
  guint idle_age;               /* scans; one of kstaled_bucket_scans */
  guint headroom_percent;       /* of the working set */
  guint64 headroom_kib;
  guint64 min_memory_kib;
  guint64 hysteresis_kib;
  guint hysteresis_percent;     /* of the current memory */
  guint64 max_step_kib;
  guint max_report_age;         /* seconds; older reports are not acted on */
  guint64 stale_drop_kib;       /* early-report drop that counts as pressure */
  guint64 swap_in_rate_kib;     /* KiB/s of swap-in that counts as pressure */
  guint64 major_fault_rate;     /* faults/s that count as pressure */
  guint pressure_holdoff;       /* seconds without inflation after pressure */
  gboolean reclaim_swap_backed; /* count idle anonymous memory as reclaimable */
} KstaledPolicyConfig;

/* How long an inflation step may take before the next one is decided. */
#define KSTALED_SETTLE_SECONDS 10
/* How close to the request the balloon counts as there. */
#define KSTALED_SETTLE_SLACK_KIB 1024

void kstaled_policy_config_init (KstaledPolicyConfig *config);

/* virDomainMemoryStats values, KiB except major_fault (a count). */
typedef struct {
  gboolean has_actual, has_available, has_usable, has_unused;
  gboolean has_swap_in, has_major_fault, has_rss;
  guint64 actual, available, usable, unused, swap_in, major_fault, rss;
} KstaledBalloonStats;

typedef struct {
  const KstaledReport *report;  /* NULL when the last query failed */
  KstaledBalloonStats stats;
  guint64 max_memory_kib;
  guint64 early_stale_drop;     /* bytes, from early reports since last call */
  gint64 now_us;                /* monotonic */
  gboolean rebooted;            /* the guest rebooted since the last call */
} KstaledPolicyInput;

/* Per-domain memory of the policy between calls; zero-initialise. */
typedef struct {
  gboolean has_sample;
  gint64 sample_us;
  guint64 swap_in;
  guint64 major_fault;
  gint64 holdoff_until_us;
  /* The last inflation asked for, until the balloon gets there. */
  guint64 inflate_request_kib;
  gint64 inflate_request_us;
  /* The old kernel's balloon, which QEMU keeps reporting after a reboot
   * until the new driver moves the balloon; 0 when "actual" is current. */
  guint64 stale_actual_kib;
} KstaledPolicyState;

typedef enum {
  KSTALED_REASON_NO_STATS,          /* no balloon size or maximum */
  KSTALED_REASON_NO_REPORT,         /* no usable kstaled report */
  KSTALED_REASON_STALE_REPORT,
  KSTALED_REASON_NO_GUEST_STATS,    /* balloon driver gives no free memory */
  KSTALED_REASON_REBOOT,            /* the guest restarts from scratch */
  KSTALED_REASON_EARLY_REPORT,      /* pressure */
  KSTALED_REASON_SWAP_IN,           /* pressure */
  KSTALED_REASON_MAJOR_FAULTS,      /* pressure */
  KSTALED_REASON_WARMING_UP,        /* fewer guest scans than idle-age */
  KSTALED_REASON_HOLDOFF,
  KSTALED_REASON_SETTLING,          /* the last inflation is under way */
  KSTALED_REASON_HYSTERESIS,
  KSTALED_REASON_GROW,
  KSTALED_REASON_SHRINK,
} KstaledReason;

typedef enum {
  KSTALED_ACTION_NONE,
  KSTALED_ACTION_DEFLATE,           /* give the guest memory */
  KSTALED_ACTION_INFLATE,           /* take memory from the guest */
} KstaledAction;

typedef struct {
  KstaledAction action;
  KstaledReason reason;
  guint64 actual_kib;               /* balloon size now */
  guint64 new_kib;                  /* size to set; == actual_kib if none */
  gboolean has_estimate;            /* the fields below are valid */
  guint64 target_kib;
  guint64 working_set_kib;
  guint64 idle_kib;
  guint64 headroom_kib;
  guint64 floor_kib;
  guint64 max_kib;
  /* Pressure signals measured this call (0 when unknown). */
  guint64 swap_in_rate_kib;
  guint64 major_fault_rate;
  guint64 stale_drop_kib;
  /* Context for the explanation. */
  guint64 report_age_ms;
  guint64 guest_scans;
  guint idle_age;
  gint64 holdoff_left_us;
  guint64 settle_kib;               /* the inflation under way */
} KstaledDecision;

void kstaled_policy_decide (const KstaledPolicyConfig *config,
                            const KstaledPolicyInput *input,
                            KstaledPolicyState *state,
                            KstaledDecision *decision);

const char *kstaled_reason_to_string (KstaledReason reason);
const char *kstaled_action_to_string (KstaledAction action);
/* Parses kstaled_action_to_string() output; FALSE if unknown. */
gboolean kstaled_action_from_string (const char *str, KstaledAction *action);

/* One log line: "domain=NAME action=… reason=… key=value… (why)". */
gchar *kstaled_decision_format (const char *domain,
                                const KstaledDecision *decision);

G_END_DECLS
