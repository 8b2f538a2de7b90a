/* Defensive parser for the QMP replies of the kstaled device
 * (docs/qmp-interface.md).  The guest fills these replies, so every field is
 * type- and range-checked and every size is bounded before anything is kept. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define KSTALED_N_BUCKETS 8
#define KSTALED_MAX_CGROUPS 1024
#define KSTALED_MAX_PATH_LEN 1024
/* 1024 cgroups of maximal path and 24 twenty-digit numbers fit in 4 MiB. */
#define KSTALED_MAX_REPLY_LEN (4 * 1024 * 1024)
#define KSTALED_MAX_EVENT_LEN 4096
/* No guest has a pebibyte of memory; larger values are garbage or saturated
 * overflows from json-c (which clamps out-of-range integers). */
#define KSTALED_MAX_BYTES (G_GUINT64_CONSTANT (1) << 50)
#define KSTALED_MAX_COUNT (G_GUINT64_CONSTANT (1) << 53)

typedef enum {
  KSTALED_IDLE_CLEAN,
  KSTALED_IDLE_DIRTY_FILE,
  KSTALED_IDLE_DIRTY_SWAP,
  KSTALED_N_IDLE_KINDS,
} KstaledIdleKind;

#define KSTALED_REPORT_ERROR (kstaled_report_error_quark ())

typedef enum {
  KSTALED_REPORT_ERROR_MALFORMED,   /* not JSON, truncated, too deep */
  KSTALED_REPORT_ERROR_TOO_LARGE,   /* reply, array or string over a limit */
  KSTALED_REPORT_ERROR_MISSING,     /* a required member is absent */
  KSTALED_REPORT_ERROR_TYPE,        /* a member has the wrong JSON type */
  KSTALED_REPORT_ERROR_RANGE,       /* a number or string out of range */
  KSTALED_REPORT_ERROR_QMP,         /* the reply is a QMP error */
  KSTALED_REPORT_ERROR_NO_DEVICE,   /* the machine has no kstaled device */
} KstaledReportError;

GQuark kstaled_report_error_quark (void);

/* Bucket thresholds, in scans: entry i of every histogram counts pages idle
 * for at least kstaled_bucket_scans[i] scans. */
extern const guint kstaled_bucket_scans[KSTALED_N_BUCKETS];

/* Index of @scans in kstaled_bucket_scans, or -1. */
int kstaled_bucket_index (guint scans);

const char *kstaled_idle_kind_to_string (KstaledIdleKind kind);

typedef struct {
  gchar *path;
  guint64 inode;
  guint64 scans;
  guint64 stale;
  guint64 memory_usage;
  gboolean has_memory_limit;
  guint64 memory_limit;
  guint64 idle[KSTALED_N_IDLE_KINDS][KSTALED_N_BUCKETS];
} KstaledCgroup;

typedef struct {
  gchar *qom_path;
  guint scan_seconds;
  guint stale_page_age;
  guint64 reports;
  guint64 dropped_reports;
  /* report-age-ms and guest-scans are absent until the first report. */
  gboolean has_report;
  guint64 report_age_ms;
  guint64 guest_scans;
  GPtrArray *cgroups;  /* of KstaledCgroup */
} KstaledReport;

/* Parses a whole query-kstaled QMP reply ({"return": {...}} or
 * {"error": {...}}, as virDomainQemuMonitorCommand returns it). */
KstaledReport *kstaled_report_parse (const char *json, gsize len,
                                     GError **error);
void kstaled_report_free (KstaledReport *report);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KstaledReport, kstaled_report_free)

/* Bytes idle for at least kstaled_bucket_scans[@bucket] scans, summed over
 * cgroups and the idle kinds selected by @kinds (a bit mask of
 * 1 << KstaledIdleKind).  Saturates instead of wrapping. */
guint64 kstaled_report_idle_bytes (const KstaledReport *report, guint bucket,
                                   guint kinds);

/* Parses the "data" member of a KSTALED_EARLY_REPORT event, as libvirt
 * passes it to a QEMU monitor event callback. */
gboolean kstaled_early_report_parse (const char *json, gsize len,
                                     guint64 *stale_drop, GError **error);

/* Guest counters the balloon carries on Linux 6.12 + QEMU 9.2 that libvirt
 * 9.0 does not name. */
typedef struct {
  gboolean has_oom_kills, has_alloc_stalls;
  guint64 oom_kills, alloc_stalls;
} KstaledGuestCounters;

/* The qom-get of the balloon's "guest-stats" that asks for them. */
#define KSTALED_GUEST_STATS_COMMAND \
  "{\"execute\":\"qom-get\",\"arguments\":{\"path\":" \
  "\"/machine/peripheral/balloon0\",\"property\":\"guest-stats\"}}"

/* Parses its reply.  A counter the guest does not send (QEMU reports -1)
 * is left unset. */
gboolean kstaled_guest_counters_parse (const char *json, gsize len,
                                       KstaledGuestCounters *counters,
                                       GError **error);

G_END_DECLS
