/* The host arbiter: how much memory the host itself has, and what the
 * domains may take from it or must give back.
 *
 * Once per poll round the agent reads the host (kstaled_host_read: the
 * host's /proc/meminfo and /proc/pressure/memory, or a cgroup such as
 * machine.slice whose memory.max or memory.high is the VMs' budget) and
 * starts a round (kstaled_host_poll).  The round classifies the host
 * (relaxed, short, critical), computes from each domain's latest record how
 * much of the host's shortfall each domain gives (cold memory first) and,
 * for domains in the proxmox mode, Proxmox's share-proportional targets.
 * During the round every deflation is granted against what the host has
 * available minus a reserve (kstaled_host_grant), so the sum of granted
 * deflations never exceeds what the host can back.
 *
 * Everything but kstaled_host_read, kstaled_host_poll and
 * kstaled_host_check_thp is pure: no I/O, no clock. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  KSTALED_HOST_UNKNOWN,     /* no reading: no host limits, no host requests */
  KSTALED_HOST_RELAXED,     /* available above low-percent, no PSI full */
  KSTALED_HOST_SHORT,       /* available below low-percent */
  KSTALED_HOST_CRITICAL,    /* below critical-percent, or PSI full too high */
} KstaledHostLevel;

/* Points above low-percent a short host needs to count as relaxed. */
#define KSTALED_HOST_RELAX_PERCENT 5

typedef struct {
  /* NULL: do not look at the host; "" or "/proc": /proc/meminfo and
   * /proc/pressure/memory; otherwise a cgroup (v2 or v1) directory. */
  gchar *source;
  guint low_percent;            /* MOM's pressure_threshold: 20 */
  guint critical_percent;       /* MOM's pressure_critical: 5 */
  guint psi_full_permille;      /* full avg10, in 0.1 %, that is critical */
  guint64 reserve_kib;          /* never promised to deflations */
} KstaledHostConfig;

typedef struct {
  guint64 total_kib;            /* MemTotal, or the cgroup's budget */
  guint64 available_kib;        /* MemAvailable, or budget - memory.current */
  gboolean has_psi;
  guint psi_some_permille;      /* avg10, in 0.1 % */
  guint psi_full_permille;
} KstaledHostReading;

/* What a domain's policy tells the arbiter after each decision. */
typedef struct {
  gboolean proxmox;             /* managed by the proxmox mode */
  guint64 actual_kib;
  guint64 max_kib;
  guint64 min_kib;              /* guaranteed minimum (Proxmox's balloon_min) */
  guint64 unused_kib;           /* the guest's free memory */
  guint shares;                 /* 0: left out (Proxmox's shares=0) */
  /* kstaled mode: what the domain can give without breaking its refault
   * target, and its memory cold for the relaxed cold age. */
  guint64 reclaimable_kib;
  guint64 long_cold_kib;
  /* Results of the round. */
  guint64 take_kib;             /* share of the host's shortfall */
  gboolean has_proxmox_target;
  guint64 proxmox_target_kib;
} KstaledVmRecord;

typedef struct _KstaledHost KstaledHost;

void kstaled_host_config_init (KstaledHostConfig *config);
void kstaled_host_config_clear (KstaledHostConfig *config);

/* Parsers of the host's files, for recorded contents. */
gboolean kstaled_host_parse_meminfo (const char *text,
                                     KstaledHostReading *reading,
                                     GError **error);
gboolean kstaled_host_parse_pressure (const char *text,
                                      KstaledHostReading *reading,
                                      GError **error);
/* memory.max / memory.high ("max" or bytes), memory.current (bytes) and
 * memory.stat of a cgroup; the budget is the lower of max and high, and
 * what the VMs use is memory.current less the inactive file cache. */
gboolean kstaled_host_parse_cgroup (const char *max, const char *high,
                                    const char *current, const char *stat,
                                    KstaledHostReading *reading,
                                    GError **error);
/* Reads the files @config->source names. */
gboolean kstaled_host_read (const KstaledHostConfig *config,
                            KstaledHostReading *reading, GError **error);

KstaledHost *kstaled_host_new (void);
void kstaled_host_free (KstaledHost *host);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KstaledHost, kstaled_host_free)

/* @reading NULL: the host could not be read; the round is UNKNOWN.
 * Domains that recorded nothing in the last round are forgotten. */
void kstaled_host_begin_round (KstaledHost *host,
                               const KstaledHostConfig *config,
                               const KstaledHostReading *reading);
/* Reads the host as @config says (logging failures once) and begins a
 * round. */
void kstaled_host_poll (KstaledHost *host, const KstaledHostConfig *config);
KstaledHostLevel kstaled_host_level (const KstaledHost *host);
/* Available memory in 0.1 % of the total (1000 when unknown). */
guint kstaled_host_free_permille (const KstaledHost *host);
/* How much of @want_kib more memory the host backs; deducted from the
 * round's budget.  Unlimited when the host is UNKNOWN. */
guint64 kstaled_host_grant (KstaledHost *host, guint64 want_kib);
void kstaled_host_record (KstaledHost *host, const char *domain,
                          const KstaledVmRecord *record);
/* The domain's record with this round's results, or NULL. */
const KstaledVmRecord *kstaled_host_lookup (const KstaledHost *host,
                                            const char *domain);

/* Splits @shortfall_kib over @vms: from the domains whose memory has been
 * cold longest (long-cold share of their memory, divided by their shares
 * over 1000) first, each giving at most its reclaimable memory.  Sets each
 * take_kib; returns what is left uncovered. */
guint64 kstaled_host_allocate_shortfall (KstaledVmRecord *vms, guint n,
                                         guint64 shortfall_kib);

const char *kstaled_host_level_to_string (KstaledHostLevel level);

/* Where the host's transparent huge page settings are. */
#define KSTALED_HOST_THP_DIR "/sys/kernel/mm/transparent_hugepage"

/* Whether the host backs guest RAM with transparent huge pages: QEMU
 * madvises guest RAM MADV_HUGEPAGE, so it does unless PMD-size THP is
 * "never".  Ballooning then gives the host little: the balloon hands back
 * 4 KiB pages inside 2 MiB ones, which stay allocated until the host splits
 * them, while each guest touch of a 2 MiB range the host never backed
 * costs a whole huge page (docs/balloon-policy.md).  @enabled: the contents
 * of transparent_hugepage/enabled; @pmd_enabled: of hugepages-<PMD
 * size>kB/enabled (Linux 6.8 and later; NULL before). */
gboolean kstaled_host_parse_thp (const char *enabled, const char *pmd_enabled,
                                 gboolean *huge_guest_ram, GError **error);
/* Reads the settings under @dir (KSTALED_HOST_THP_DIR); NULL when guest
 * RAM gets no huge pages (or the kernel has no THP), otherwise what to
 * tell the host's administrator. */
gchar *kstaled_host_check_thp (const char *dir);

G_END_DECLS
