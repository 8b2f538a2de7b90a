/*
 * libFuzzer harness for the virtio-kstaled report parser.
 *
 * Built by scripts/build-qemu.sh against hw/virtio/virtio-kstaled-report.c
 * of the patched QEMU tree, the very file the device runs.  Every input is
 * parsed as a report, with and without the early-report feature; the
 * harness aborts if the parser accepts a report that breaks a rule of
 * docs/virtio-kstaled.md, and AddressSanitizer catches any read outside
 * the input or any leak.
 */

#include "qemu/osdep.h"
#include "hw/virtio/virtio-kstaled-report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const KstaledReport *report)
{
    uint32_t i;
    int kind, bucket;

    if (report->record_count > VIRTIO_KSTALED_MAX_RECORDS ||
        (report->flags & ~VIRTIO_KSTALED_REPORT_F_ALL) ||
        report->stale_drop > VIRTIO_KSTALED_MAX_BYTES) {
        abort();
    }
    for (i = 0; i < report->record_count; i++) {
        const KstaledCgroupRecord *rec = &report->records[i];
        size_t len = strlen(rec->path);

        if (len == 0 || len > VIRTIO_KSTALED_MAX_PATH_LENGTH ||
            rec->path[0] != '/' || rec->scans > report->guest_scans ||
            rec->stale > VIRTIO_KSTALED_MAX_BYTES ||
            rec->memory_usage > VIRTIO_KSTALED_MAX_BYTES) {
            abort();
        }
        for (kind = 0; kind < VIRTIO_KSTALED_NUM_KINDS; kind++) {
            for (bucket = 1; bucket < VIRTIO_KSTALED_NUM_BUCKETS; bucket++) {
                if (rec->idle[kind][bucket] > rec->idle[kind][bucket - 1]) {
                    abort();
                }
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    KstaledReport report;
    int early_allowed;

    for (early_allowed = 0; early_allowed <= 1; early_allowed++) {
        if (!kstaled_report_parse(data, size, VIRTIO_KSTALED_MAX_REPORT_SIZE,
                                  early_allowed, &report)) {
            check_accepted(&report);
            if ((report.flags & VIRTIO_KSTALED_REPORT_F_EARLY) &&
                !early_allowed) {
                abort();
            }
        }
        kstaled_report_free(&report);
    }
    return 0;
}
