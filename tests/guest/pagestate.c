// SPDX-License-Identifier: GPL-2.0-only
/*
 * pagestate - what the kernel's page frame interfaces say about a range of
 * a process's memory, for the in-guest tests.
 *
 *   pagestate [--mark-idle] [--kpf BIT]... [--pfns FILE] PID ADDR BYTES
 *
 * Resolves each page of [ADDR, ADDR + BYTES) of PID to its page frame
 * through /proc/PID/pagemap, then prints one line
 *
 *   pagestate: pages=N present=P idle=I untracked=U kpf<BIT>=K...
 *
 * counting present pages whose bit in /sys/kernel/mm/page_idle/bitmap is
 * set, those the bitmap cannot track (the last pfns, see page_idle_word())
 * and those with each /proc/kpageflags BIT set.  --mark-idle first
 * sets the page_idle bit of every present page of the range.  --pfns
 * writes the page frame number of each page of the range to FILE, one per
 * line (0 for a page that is not present), so that a test can tell which
 * pages migration moved.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "die.h"

#define PAGEMAP_PRESENT (1ULL << 63)
#define PAGEMAP_PFN_MASK ((1ULL << 55) - 1)
#define MAX_KPF_BITS 8

static const char page_idle_bitmap[] = "/sys/kernel/mm/page_idle/bitmap";

static unsigned long long parse_number(const char *arg, const char *what)
{
	unsigned long long value;
	char *end;

	errno = 0;
	value = strtoull(arg, &end, 0);
	if (errno || *end || end == arg)
		die("%s: not a number: '%s'", what, arg);
	return value;
}

static int open_or_die(const char *path, int flags)
{
	int fd = open(path, flags);

	if (fd < 0)
		die("cannot open %s: %s", path, strerror(errno));
	return fd;
}

static uint64_t read_u64(int fd, const char *path, uint64_t index)
{
	uint64_t value;
	ssize_t n = pread(fd, &value, sizeof(value), (off_t)(index * sizeof(value)));

	if (n != (ssize_t)sizeof(value))
		die("cannot read entry %" PRIu64 " of %s: %s", index, path,
		    n < 0 ? strerror(errno) : "short read");
	return value;
}

/*
 * The page_idle bitmap is read and written in 64 bit words of 64 pfns.
 * The word holding max_pfn is partial, and the kernel reads and writes
 * 0 bytes of it: the pages it covers are "untracked".
 */
static ssize_t page_idle_word(int fd, uint64_t pfn, uint64_t *word, bool write)
{
	off_t off = (off_t)(pfn / 64 * sizeof(*word));
	ssize_t n = write ? pwrite(fd, word, sizeof(*word), off) :
			    pread(fd, word, sizeof(*word), off);

	if (n < 0 || (n && n != (ssize_t)sizeof(*word)))
		die("cannot %s the page_idle bit of pfn %" PRIu64 ": %s",
		    write ? "set" : "read", pfn, n < 0 ? strerror(errno) : "short transfer");
	return n;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mark-idle", no_argument, NULL, 'm' },
		{ "kpf", required_argument, NULL, 'k' },
		{ "pfns", required_argument, NULL, 'p' },
		{ 0 }
	};
	unsigned int kpf_bits[MAX_KPF_BITS], nr_kpf = 0, i;
	uint64_t kpf_count[MAX_KPF_BITS] = { 0 };
	uint64_t pages, present = 0, idle = 0, untracked = 0, page, addr, word;
	int pagemap, bitmap, kpageflags = -1, c;
	long page_size = sysconf(_SC_PAGESIZE);
	bool mark_idle = false;
	const char *pfns_path = NULL;
	FILE *pfns = NULL;
	char pagemap_path[64];

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			mark_idle = true;
			break;
		case 'k':
			if (nr_kpf == MAX_KPF_BITS)
				die("at most %d --kpf bits", MAX_KPF_BITS);
			kpf_bits[nr_kpf] = (unsigned int)parse_number(optarg, "--kpf");
			if (kpf_bits[nr_kpf] > 63)
				die("--kpf %u: kpageflags has bits 0 to 63", kpf_bits[nr_kpf]);
			nr_kpf++;
			break;
		case 'p':
			pfns_path = optarg;
			break;
		default:
			fputs("usage: pagestate [--mark-idle] [--kpf BIT]... [--pfns FILE] PID ADDR BYTES\n",
			      stderr);
			return 2;
		}
	}
	if (argc - optind != 3)
		die("expected PID ADDR BYTES");
	snprintf(pagemap_path, sizeof(pagemap_path), "/proc/%llu/pagemap",
		 parse_number(argv[optind], "PID"));
	addr = parse_number(argv[optind + 1], "ADDR");
	pages = parse_number(argv[optind + 2], "BYTES") / (uint64_t)page_size;
	if (addr % (uint64_t)page_size)
		die("ADDR %#" PRIx64 " is not page aligned", addr);

	pagemap = open_or_die(pagemap_path, O_RDONLY);
	bitmap = open_or_die(page_idle_bitmap, mark_idle ? O_RDWR : O_RDONLY);
	if (nr_kpf)
		kpageflags = open_or_die("/proc/kpageflags", O_RDONLY);
	if (pfns_path && !(pfns = fopen(pfns_path, "w")))
		die("cannot open %s: %s", pfns_path, strerror(errno));

	for (page = 0; page < pages; page++) {
		uint64_t entry = read_u64(pagemap, pagemap_path,
					  addr / (uint64_t)page_size + page);
		uint64_t pfn = entry & PAGEMAP_PFN_MASK, flags;

		if (pfns)
			fprintf(pfns, "%" PRIu64 "\n", entry & PAGEMAP_PRESENT ? pfn : 0);
		if (!(entry & PAGEMAP_PRESENT))
			continue;
		/* A zero pfn of a present page: no CAP_SYS_ADMIN. */
		if (!pfn)
			die("%s hides page frame numbers: run as root", pagemap_path);
		present++;
		word = 1ULL << (pfn % 64);
		if ((mark_idle && !page_idle_word(bitmap, pfn, &word, true)) ||
		    !page_idle_word(bitmap, pfn, &word, false))
			untracked++;
		else if (word >> (pfn % 64) & 1)
			idle++;
		if (!nr_kpf)
			continue;
		flags = read_u64(kpageflags, "/proc/kpageflags", pfn);
		for (i = 0; i < nr_kpf; i++)
			kpf_count[i] += flags >> kpf_bits[i] & 1;
	}

	if (pfns && (ferror(pfns) | fclose(pfns)))
		die("cannot write %s: %s", pfns_path, strerror(errno));
	printf("pagestate: pages=%" PRIu64 " present=%" PRIu64 " idle=%" PRIu64
	       " untracked=%" PRIu64, pages, present, idle, untracked);
	for (i = 0; i < nr_kpf; i++)
		printf(" kpf%u=%" PRIu64, kpf_bits[i], kpf_count[i]);
	putchar('\n');
	return 0;
}
