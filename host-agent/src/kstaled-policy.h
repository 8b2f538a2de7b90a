/* Balloon policies: pure functions from a domain's kstaled report, balloon
 * statistics and the host arbiter's view to a memory target and an action.
 * No I/O, no clock: the caller passes the time, so the tests (and the trace
 * simulator in tests/test-simulator.c) drive them step by step.  The modes
 * share the agent's actuation; only the decision differs:
 *
 *   kstaled  the policy below (the default);
 *   mom      oVirt MOM's default balloon rules (kstaled-baselines.c);
 *   proxmox  Proxmox VE's auto-ballooning (kstaled-baselines.c);
 *   static   no ballooning: the guest keeps its maximum.
 *
 * The kstaled policy (docs/balloon-policy.md has the rules and sources):
 *
 * working set = guest used memory - memory cold for the cold age
 * target      = working set + headroom (% of working set + fixed KiB)
 *               + the part of the balloon the guest does not see as MemTotal
 * floor       = max(min-memory, memory touched within the last scan,
 *                   the soft floor left by the last pressure)
 *
 * The cold age is in seconds.  The agent owns the device's scan-seconds and
 * stale-page-age (the decision says which values it wants) and reads the
 * histogram bucket whose age matches.  It adapts per domain: every
 * adapt-interval it moves one bucket down if the guest's promotion rate
 * (swapped-in and refaulted memory) stayed under the target (Google's far
 * memory SLO: 0.2 % of the working set per minute), one bucket up if it went
 * over twice the target.
 *
 * Pressure grows the guest in proportion to the measured shortfall
 * (shortfall-gain x (swap-ins + major faults x 4 KiB + the early report's
 * stale drop) + headroom), not to the maximum; only emergencies (a guest OOM
 * kill, allocation stalls, a stale drop above a large share of the guest)
 * go to the maximum at once.  Each pressure leaves a soft floor just above
 * the size where it hit, which decays slowly, and a hold-off that doubles
 * for repeats, so the next shrink approaches that size from above and the
 * limit cycle cannot recur.
 *
 * Shrinking happens in steps of at most max-step, only above the hysteresis,
 * each only once a whole guest scan has run after the last one settled (its
 * report and the balloon statistics then show what the step cost), not
 * while a hold-off runs (it ends once its time is up and a whole scan has
 * passed with swap-ins and stale drops under the promotion target), and
 * only as far as the host arbiter wants it: a relaxed host takes only
 * memory cold for relaxed-cold-age (none if no bucket is that old), a short
 * host takes its shortfall from the coldest domains, a critical one takes
 * every domain to its working set plus critical headroom.  Deflations are
 * granted only as far as the host can back them.  A guest reboot deflates
 * to the maximum without a hold-off.
 *
 * Histograms are summed over cgroups: kstaled charges each page to the one
 * memory cgroup that owns it, so cgroup histograms do not overlap. */
#pragma once

#include <glib.h>

#include "kstaled-host.h"
#include "kstaled-report.h"

G_BEGIN_DECLS

typedef enum {
  KSTALED_MODE_KSTALED,
  KSTALED_MODE_MOM,
  KSTALED_MODE_PROXMOX,
  KSTALED_MODE_STATIC,
} KstaledPolicyMode;

typedef struct {
  KstaledPolicyMode mode;
  guint scan_seconds;           /* the device's scan period */
  guint cold_age;               /* seconds; the starting cold age */
  guint min_cold_age, max_cold_age;     /* seconds; adaptation bounds */
  guint relaxed_cold_age;       /* seconds; what a relaxed host takes */
  guint adapt_interval;         /* seconds between cold age adaptations */
  guint promotion_target_ppm;   /* of the working set per minute */
  guint headroom_percent;       /* of the working set */
  guint64 headroom_kib;
  guint64 critical_headroom_kib;        /* on a critical host */
  guint64 min_memory_kib;       /* guaranteed minimum */
  guint shares;                 /* host arbiter and proxmox weight */
  guint64 hysteresis_kib;
  guint hysteresis_percent;     /* of the current memory */
  guint64 max_step_kib;
  guint max_report_age;         /* seconds; older reports are not acted on */
  guint64 stale_drop_kib;       /* early-report drop that counts as pressure */
  guint emergency_stale_drop_percent;   /* of the balloon: to the maximum */
  guint64 swap_in_rate_kib;     /* KiB/s of swap-in that counts as pressure */
  guint64 major_fault_rate;     /* faults/s that count as pressure */
  guint64 alloc_stall_rate;     /* stalls/s that are an emergency */
  guint shortfall_gain;         /* growth per KiB of measured shortfall */
  guint pressure_holdoff;       /* seconds without inflation after pressure */
  guint max_pressure_holdoff;   /* seconds; the doubling stops there */
  guint pressure_memory;        /* seconds a pressure point is remembered */
  /* Of idle swap-backed memory, the share the host gets back when the
   * guest swaps it out: 0 without swap, 100 with swap on a disk, less the
   * compressed residue with zram (50 at 2:1). */
  guint swap_backed_reclaim_percent;
} KstaledPolicyConfig;

/* How long an inflation step may take before the next one is decided. */
#define KSTALED_SETTLE_SECONDS 10
/* How close to the request the balloon counts as there. */
#define KSTALED_SETTLE_SLACK_KIB 1024
/* A major fault reads one page back. */
#define KSTALED_FAULT_KIB 4
/* The soft floor decays by 1 % of the maximum every this many seconds. */
#define KSTALED_SOFT_FLOOR_DECAY_SECONDS 120

void kstaled_policy_config_init (KstaledPolicyConfig *config);

/* virDomainMemoryStats values, KiB except major_fault (a count). */
typedef struct {
  gboolean has_actual, has_available, has_usable, has_unused;
  gboolean has_swap_in, has_major_fault, has_rss;
  guint64 actual, available, usable, unused, swap_in, major_fault, rss;
} KstaledBalloonStats;

typedef struct {
  const char *domain;           /* the name the host arbiter knows it by */
  const KstaledReport *report;  /* NULL when the last query failed */
  KstaledBalloonStats stats;
  KstaledGuestCounters counters;
  guint64 max_memory_kib;
  guint64 early_stale_drop;     /* bytes, from early reports since last call */
  gint64 now_us;                /* monotonic */
  gboolean rebooted;            /* the guest rebooted since the last call */
  KstaledHost *host;            /* NULL: no host arbiter */
} KstaledPolicyInput;

#define KSTALED_MOM_SAMPLES 10

/* Per-domain memory of the policy between calls; zero-initialise. */
typedef struct {
  gboolean has_sample;
  gint64 sample_us;
  guint64 swap_in;
  guint64 major_fault;
  gboolean has_counters;
  KstaledGuestCounters counters;
  /* The hold-off runs until holdoff_until_us and then until a whole guest
   * scan has passed with swap-ins and stale drops under the promotion
   * target (guest_scans reaches calm_from_scans); 0 when none runs. */
  gint64 holdoff_until_us;
  guint64 calm_from_scans;
  /* After a shrink step, no further one before guest_scans reaches
   * evidence_scans: a whole scan after the balloon got there. */
  gboolean step_pending;
  guint64 evidence_scans;
  /* The last balloon size asked for, either way, until the balloon gets
   * there; 0 with the balloon at rest. */
  guint64 request_kib;
  gint64 request_us;
  gboolean request_deflates;    /* the request grows the guest */
  /* The old kernel's balloon, which QEMU keeps reporting after a reboot
   * until the new driver moves the balloon; 0 when "actual" is current. */
  guint64 stale_actual_kib;
  /* The adaptive cold age: a bucket index, 0 until set. */
  gboolean has_cold_bucket;
  guint cold_bucket;
  gint64 adapt_since_us;
  guint64 adapt_shortfall_kib;  /* promotions since adapt_since_us */
  /* The youngest cold age that has not failed recently. */
  guint cold_floor_bucket;
  gint64 cold_floor_until_us;
  guint cold_failures;
  /* The remembered pressure point. */
  guint64 soft_floor_kib;
  gint64 soft_floor_decay_us;
  guint pressure_repeats;
  gint64 last_pressure_us;
  /* mom: the last samples of balloon size and guest unused memory. */
  guint mom_samples;
  guint64 mom_actual[KSTALED_MOM_SAMPLES];
  guint64 mom_unused[KSTALED_MOM_SAMPLES];
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
  KSTALED_REASON_OOM_KILL,          /* emergency */
  KSTALED_REASON_ALLOC_STALLS,      /* emergency */
  KSTALED_REASON_WARMING_UP,        /* fewer guest scans than the cold age */
  KSTALED_REASON_HOLDOFF,
  KSTALED_REASON_SETTLING,          /* the last inflation is under way */
  KSTALED_REASON_AWAITING_SCAN,     /* no full scan since the last step */
  KSTALED_REASON_HYSTERESIS,
  KSTALED_REASON_GROW,
  KSTALED_REASON_SHRINK,
  KSTALED_REASON_HOST_FULL,         /* the host cannot back a deflation */
  KSTALED_REASON_STATIC,            /* static mode: back to the maximum */
} KstaledReason;

typedef enum {
  KSTALED_ACTION_NONE,
  KSTALED_ACTION_DEFLATE,           /* give the guest memory */
  KSTALED_ACTION_INFLATE,           /* take memory from the guest */
} KstaledAction;

typedef struct {
  KstaledAction action;
  KstaledReason reason;
  KstaledPolicyMode mode;
  KstaledHostLevel host_level;
  gboolean emergency;               /* pressure that goes to the maximum */
  guint64 actual_kib;               /* balloon size now */
  guint64 new_kib;                  /* size to set; == actual_kib if none */
  gboolean has_estimate;            /* the fields below are valid */
  guint64 target_kib;
  guint64 working_set_kib;
  guint64 idle_kib;
  guint64 headroom_kib;
  guint64 floor_kib;
  guint64 max_kib;
  guint64 soft_floor_kib;           /* left by the last pressure */
  /* Pressure signals measured this call (0 when unknown). */
  guint64 swap_in_rate_kib;
  guint64 major_fault_rate;
  guint64 stale_drop_kib;
  guint64 shortfall_kib;            /* promoted memory since the last call */
  guint64 wanted_kib;               /* the deflation asked for, if granted less */
  /* The device settings the policy wants (kstaled mode; 0: no wish). */
  guint scan_seconds;
  guint stale_page_age;
  /* Context for the explanation. */
  guint64 report_age_ms;
  guint64 guest_scans;
  guint cold_age;                   /* seconds */
  guint cold_age_scans;
  gint64 holdoff_left_us;
  guint64 evidence_scans;            /* the scan the next step waits for */
  guint64 settle_kib;               /* the inflation under way */
} KstaledDecision;

void kstaled_policy_decide (const KstaledPolicyConfig *config,
                            const KstaledPolicyInput *input,
                            KstaledPolicyState *state,
                            KstaledDecision *decision);

/* The bucket index of the cold age closest to @seconds at @scan_seconds
 * per scan, never younger than @seconds unless no bucket is that old. */
guint kstaled_cold_bucket (guint seconds, guint scan_seconds);
/* The youngest bucket that holds only memory idle for at least @seconds at
 * @scan_seconds per scan; FALSE if no bucket is that old. */
gboolean kstaled_covering_bucket (guint seconds, guint scan_seconds,
                                  guint *bucket);

/* The QMP command that gives the device the settings @decision wants, or
 * NULL if @report shows it has them already. */
gchar *kstaled_device_config_command (const KstaledDecision *decision,
                                      const KstaledReport *report);

const char *kstaled_reason_to_string (KstaledReason reason);
const char *kstaled_action_to_string (KstaledAction action);
/* Parses kstaled_action_to_string() output; FALSE if unknown. */
gboolean kstaled_action_from_string (const char *str, KstaledAction *action);
const char *kstaled_mode_to_string (KstaledPolicyMode mode);
gboolean kstaled_mode_from_string (const char *str, KstaledPolicyMode *mode);

/* One log line: "domain=NAME action=… reason=… key=value… (why)". */
gchar *kstaled_decision_format (const char *domain,
                                const KstaledDecision *decision);

G_END_DECLS
