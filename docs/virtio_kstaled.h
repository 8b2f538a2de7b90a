/* SPDX-License-Identifier: ((GPL-2.0+ WITH Linux-syscall-note) OR BSD-3-Clause) */
/*
 * Virtio kstaled device: idle page histograms reported by the guest's
 * kstaled idle page scanner, per memory cgroup.
 *
 * The protocol is described in docs/virtio-kstaled.md of the kstaled-vm
 * project.  All multi-byte fields are little-endian.
 *
 * The device ID is VIRTIO_ID_KSTALED (57), defined in <linux/virtio_ids.h>;
 * this header does not repeat it.
 *
 * Copyright (C) 2026 kstaled-vm developers
 */

#ifndef _LINUX_VIRTIO_KSTALED_H
#define _LINUX_VIRTIO_KSTALED_H

#include <linux/types.h>
#include <linux/virtio_types.h>
#include <linux/virtio_ids.h>

/* Feature bits */

/* The guest may send early reports (VIRTIO_KSTALED_REPORT_F_EARLY). */
#define VIRTIO_KSTALED_F_EARLY_REPORT	0

/* Virtqueues */

/* Guest to host: one report per descriptor chain, device-readable only. */
#define VIRTIO_KSTALED_REPORTS_QUEUE	0
#define VIRTIO_KSTALED_NUM_QUEUES	1

/* Configuration space, written by the device, read-only for the driver */
struct virtio_kstaled_config {
	/* Seconds between two kstaled scans; 0 stops scanning. */
	__le32 scan_seconds;
	/* A page idle for at least this many scans is stale; 0 disables. */
	__le32 stale_page_age;
	/*
	 * Incremented by the device each time the host asks for a fresh
	 * report; the driver answers with a report whose header carries
	 * this value in request_generation.
	 */
	__le32 request_generation;
	/* Largest report, in bytes, the device accepts (at most the limit). */
	__le32 max_report_size;
};

/* Limits */
#define VIRTIO_KSTALED_MAX_SCAN_SECONDS		3600
#define VIRTIO_KSTALED_MAX_STALE_PAGE_AGE	255
/* Largest message (header and all records) in bytes: 1 MiB. */
#define VIRTIO_KSTALED_MAX_REPORT_SIZE		(1 << 20)
#define VIRTIO_KSTALED_MAX_RECORDS		1024
/* Longest cgroup path in bytes, not counting the terminating NUL. */
#define VIRTIO_KSTALED_MAX_PATH_LENGTH		4095
/* Every byte count in a record is at most this (4 PiB). */
#define VIRTIO_KSTALED_MAX_BYTES		(1ULL << 52)
/* memory_limit value of a cgroup without a limit. */
#define VIRTIO_KSTALED_NO_LIMIT			(~0ULL)

/* Histogram dimensions */
#define VIRTIO_KSTALED_NUM_BUCKETS	8	/* 1, 2, 5, 15, 30, 60, 120, 240 scans */
#define VIRTIO_KSTALED_KIND_CLEAN	0	/* clean pages */
#define VIRTIO_KSTALED_KIND_DIRTY_FILE	1	/* dirty file-backed pages */
#define VIRTIO_KSTALED_KIND_DIRTY_SWAP	2	/* dirty swap-backed (anon, shmem) */
#define VIRTIO_KSTALED_NUM_KINDS	3

/* Report header */
#define VIRTIO_KSTALED_REPORT_MAGIC	0x4c54534b	/* "KSTL" */
#define VIRTIO_KSTALED_REPORT_VERSION	1

/* Header flags */
/* Sent early, because a cgroup's stale count dropped sharply. */
#define VIRTIO_KSTALED_REPORT_F_EARLY		(1 << 0)
/* Answers the request numbered header.request_generation. */
#define VIRTIO_KSTALED_REPORT_F_REQUESTED	(1 << 1)
/* The guest left cgroups out to stay within the limits. */
#define VIRTIO_KSTALED_REPORT_F_TRUNCATED	(1 << 2)
#define VIRTIO_KSTALED_REPORT_F_ALL		0x7

struct virtio_kstaled_report_header {
	__le32 magic;		/* VIRTIO_KSTALED_REPORT_MAGIC */
	__le16 version;		/* VIRTIO_KSTALED_REPORT_VERSION */
	__le16 header_length;	/* sizeof(struct virtio_kstaled_report_header) */
	__le32 flags;		/* VIRTIO_KSTALED_REPORT_F_* */
	__le32 record_count;	/* records following the header */
	__le32 total_length;	/* header and records, in bytes */
	__le32 request_generation; /* last config request_generation seen */
	__le64 guest_scans;	/* scans kstaled completed since boot */
	__le64 stale_drop;	/* early reports: total stale drop in bytes */
};

/*
 * Per-cgroup record.  It is followed by path_length bytes of path (printable
 * ASCII, starting with '/'), one NUL byte, and zero bytes up to
 * record_length, which is the smallest multiple of 8 that holds it all.
 */
struct virtio_kstaled_record {
	__le32 record_length;	/* this record, path and padding included */
	__le16 path_length;	/* path bytes, NUL not counted */
	__le16 reserved;	/* zero */
	__le64 cgroup_inode;	/* inode number of the cgroup directory */
	__le64 scans;		/* scans this cgroup took part in */
	__le64 stale;		/* bytes idle for at least stale_page_age scans */
	__le64 memory_usage;	/* memory.current, bytes */
	__le64 memory_limit;	/* memory.max, bytes, or VIRTIO_KSTALED_NO_LIMIT */
	/*
	 * Bytes idle for at least 1, 2, 5, 15, 30, 60, 120, 240 scans, per
	 * kind; cumulative, so non-increasing along the buckets.
	 */
	__le64 idle[VIRTIO_KSTALED_NUM_KINDS][VIRTIO_KSTALED_NUM_BUCKETS];
	__u8 path[];
};

#endif /* _LINUX_VIRTIO_KSTALED_H */
