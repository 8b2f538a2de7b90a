// SPDX-License-Identifier: GPL-2.0-only
/*
 * fragment - leave the guest no free block of memory of a given order or
 * above, as a guest that has run for long can be.
 *
 * Usage: fragment ORDER [STRIDE]
 *
 * It takes all but 32 MiB of free memory in base pages and keeps only the
 * pages whose page frame number (from /proc/self/pagemap) is a multiple of
 * STRIDE (a power of two, 2 by default), giving back the rest: with STRIDE
 * 2 what it gives back can serve no allocation above order 0; with STRIDE
 * 512 every 2 MiB page block stays partly in use, with free blocks of up
 * to order 8 in it, where compaction can move folios of any size.  The
 * larger blocks left in the 32 MiB (and in the free lists
 * user pages do not take from) then go to io_uring instances: the kernel
 * allocates each one's rings physically contiguous when it can, two blocks
 * of 1 MiB (order 8) at 16384 entries.  It creates rings until
 * /proc/buddyinfo shows no free block of ORDER or above, or until a ring
 * took none of that memory (what is left is then out of reach of kernel
 * allocations too).  It prints one "fragment: ready ..." line and holds
 * everything until it is killed.
 *
 * Compaction would undo it: tests set vm.extfrag_threshold to 1000 first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "die.h"

#define MARGIN_BYTES (32UL << 20)
#define RING_ENTRIES 16384
#define MAX_RINGS 256

/* A field of /proc/meminfo, in bytes. */
static size_t meminfo_bytes(const char *key)
{
	char line[256];
	size_t kib = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		die("cannot open /proc/meminfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ':') {
			kib = strtoull(line + strlen(key) + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	if (!kib)
		die("no %s in /proc/meminfo", key);
	return kib << 10;
}

/*
 * Free memory in blocks of @order pages or more, in every zone, counted in
 * blocks of @order pages (splitting a larger block does not change it).
 */
static unsigned long free_blocks_from(int order)
{
	char line[512];
	unsigned long total = 0;
	FILE *f = fopen("/proc/buddyinfo", "r");

	if (!f)
		die("cannot open /proc/buddyinfo: %s", strerror(errno));
	/* "Node 0, zone   DMA32    N0    N1 ... N10" */
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "zone");
		int i;

		if (!p)
			continue;
		strtok(p, " \t\n");	/* "zone" */
		strtok(NULL, " \t\n");	/* its name */
		for (i = 0; (p = strtok(NULL, " \t\n")); i++) {
			if (i >= order)
				total += strtoul(p, NULL, 10) << (i - order);
		}
	}
	fclose(f);
	return total;
}

/*
 * Populate @len bytes of base pages, then free those whose frame number is
 * not a multiple of @stride.
 */
static size_t take_frames(size_t len, uint64_t stride)
{
	long page_size = sysconf(_SC_PAGESIZE);
	size_t pages = len / (size_t)page_size, i, freed = 0;
	unsigned char *region;
	uint64_t *entries;
	ssize_t want;
	int fd;

	region = mmap(NULL, len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		die("cannot map %zu MiB: %s", len >> 20, strerror(errno));
	/* A huge page would keep the frames of the pages given back. */
	if (madvise(region, len, MADV_NOHUGEPAGE))
		die("madvise(MADV_NOHUGEPAGE): %s", strerror(errno));
	for (i = 0; i < pages; i++)
		region[i * (size_t)page_size] = 1;

	entries = malloc(pages * sizeof(*entries));
	if (!entries)
		die("no memory for %zu pagemap entries", pages);
	fd = open("/proc/self/pagemap", O_RDONLY);
	if (fd < 0)
		die("cannot open /proc/self/pagemap: %s", strerror(errno));
	want = (ssize_t)(pages * sizeof(*entries));
	if (pread(fd, entries, (size_t)want,
		  (off_t)((uintptr_t)region / (uintptr_t)page_size * sizeof(*entries))) != want)
		die("cannot read /proc/self/pagemap: %s", strerror(errno));
	close(fd);
	for (i = 0; i < pages; i++) {
		/* Bits 0-54: the frame number, shown to root only. */
		uint64_t pfn = entries[i] & ((UINT64_C(1) << 55) - 1);

		if (!(entries[i] >> 63) || !pfn)
			die("page %zu is not present or its frame number is hidden", i);
		if (!(pfn & (stride - 1)))
			continue;
		if (madvise(region + i * (size_t)page_size, (size_t)page_size, MADV_DONTNEED))
			die("madvise(MADV_DONTNEED): %s", strerror(errno));
		freed += (size_t)page_size;
	}
	free(entries);
	return len - freed;
}

int main(int argc, char **argv)
{
	unsigned long before, left, stride = 2;
	size_t free_bytes, held;
	int order, rings = 0;
	char *end;

	if (argc != 2 && argc != 3)
		die("usage: fragment ORDER [STRIDE]");
	order = (int)strtol(argv[1], &end, 10);
	if (*end || end == argv[1] || order < 1 || order > 10)
		die("ORDER must be 1 to 10, not '%s'", argv[1]);
	if (argc == 3) {
		stride = strtoul(argv[2], &end, 10);
		if (*end || end == argv[2] || stride < 2 || stride > 512 ||
		    (stride & (stride - 1)))
			die("STRIDE must be a power of two from 2 to 512, not '%s'", argv[2]);
	}

	free_bytes = meminfo_bytes("MemFree");
	if (free_bytes < 2 * MARGIN_BYTES)
		die("only %zu MiB free", free_bytes >> 20);
	held = take_frames(free_bytes - MARGIN_BYTES, stride);

	left = free_blocks_from(order);
	while (left && rings < MAX_RINGS) {
		struct io_uring_params params = { 0 };

		if (syscall(__NR_io_uring_setup, RING_ENTRIES, &params) < 0)
			die("io_uring_setup: %s", strerror(errno));
		rings++;
		before = left;
		left = free_blocks_from(order);
		if (left >= before)
			break;
	}
	printf("fragment: ready pid=%d order=%d stride=%lu held_bytes=%zu rings=%d order_blocks_left=%lu\n",
	       getpid(), order, stride, held, rings, left);
	fflush(stdout);
	for (;;)
		pause();
}
