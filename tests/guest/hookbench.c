// SPDX-License-Identifier: GPL-2.0-only
/*
 * hookbench - time the paths kstaled hooks into: anonymous page faults
 * (the LRU add of each new folio) and page cache reads
 * (folio_mark_accessed() on every read).
 *
 * Usage: hookbench MIB ROUNDS
 *
 * faults: maps MIB MiB of anonymous memory, writes one byte per page and
 * unmaps it, ROUNDS times.  reads: writes a MIB MiB file in /tmp (page
 * cache that stays in memory: the initramfs's root is ramfs), then reads it
 * 4 KiB at a time with pread(), ROUNDS times over.  Prints one line
 * "hookbench {json}" with the nanoseconds per page of each, best and
 * median over the rounds: the best round is the least disturbed by the
 * host under TCG, the median shows the spread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "die.h"

#define PAGE 4096UL
#define MAX_ROUNDS 1000

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static unsigned long parse(const char *arg, const char *what, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || v == 0 || v > max)
		die("%s must be a whole number from 1 to %lu, got '%s'", what, max, arg);
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Anonymous faults: ns per page of one map, touch, unmap round. */
static double fault_round(size_t bytes)
{
	double t0 = now_ns();
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap of %zu bytes: %s", bytes, strerror(errno));
	for (size_t off = 0; off < bytes; off += PAGE)
		p[off] = 1;
	munmap(p, bytes);
	return (now_ns() - t0) / (bytes / PAGE);
}

/* Page cache reads: ns per 4 KiB pread() over the whole file. */
static double read_round(int fd, size_t bytes)
{
	static char buf[PAGE];
	double t0 = now_ns();

	for (size_t off = 0; off < bytes; off += PAGE)
		if (pread(fd, buf, PAGE, off) != (ssize_t)PAGE)
			die("pread at %zu: %s", off, strerror(errno));
	return (now_ns() - t0) / (bytes / PAGE);
}

static void print_stats(const char *name, double *ns, unsigned long rounds,
			const char *sep)
{
	qsort(ns, rounds, sizeof(*ns), cmp_double);
	printf("\"%s_ns_best\": %.1f, \"%s_ns_median\": %.1f%s",
	       name, ns[0], name, ns[rounds / 2], sep);
}

int main(int argc, char **argv)
{
	static double faults[MAX_ROUNDS], reads[MAX_ROUNDS];
	const char *path = "/tmp/hookbench.data";
	unsigned long mib, rounds, i;
	size_t bytes;
	int fd;

	if (argc != 3)
		die("usage: hookbench MIB ROUNDS");
	mib = parse(argv[1], "MIB", 4096);
	rounds = parse(argv[2], "ROUNDS", MAX_ROUNDS);
	bytes = mib << 20;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die("cannot create %s: %s", path, strerror(errno));
	for (size_t off = 0; off < bytes; off += PAGE) {
		static char page[PAGE];

		memset(page, (int)(off / PAGE), sizeof(page));
		if (pwrite(fd, page, PAGE, off) != (ssize_t)PAGE)
			die("pwrite at %zu: %s", off, strerror(errno));
	}

	/* One round of each first, so that neither pays for a cold start. */
	fault_round(bytes);
	read_round(fd, bytes);
	for (i = 0; i < rounds; i++) {
		faults[i] = fault_round(bytes);
		reads[i] = read_round(fd, bytes);
	}
	close(fd);
	unlink(path);

	printf("hookbench {\"mib\": %lu, \"rounds\": %lu, ", mib, rounds);
	print_stats("fault", faults, rounds, ", ");
	print_stats("read", reads, rounds, "}\n");
	return 0;
}
