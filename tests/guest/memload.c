// SPDX-License-Identifier: GPL-2.0-only
/*
 * memload - a guest workload with a known working set.
 *
 * Allocates --size MiB in a memory cgroup and keeps the first --hot MiB
 * referenced every --period-ms, so that the rest is provably idle.  What it
 * holds is printed as one "memload: ready ..." line: tests read it as ground
 * truth for kstaled's idle page histograms.
 *
 * --lazyfree hands the idle part to madvise(MADV_FREE) once populated: it
 * stays resident and clean, and reclaim may drop it without I/O.
 *
 * --pageout hands the idle part to madvise(MADV_PAGEOUT) every period: reclaim
 * takes its folios off the LRU and, with no swap to write them to, puts
 * them back where they were (reclaim that isolates idle folios but cannot
 * evict them).
 *
 * SIGUSR1 touches the whole region once (an idle region becoming hot again);
 * SIGTERM/SIGINT end it cleanly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "die.h"

enum memload_kind { KIND_ANON, KIND_FILE, KIND_SHMEM };

struct memload_options {
	const char *cgroup;
	const char *file;
	enum memload_kind kind;
	size_t size_bytes;
	size_t hot_bytes;
	unsigned int period_ms;
	bool dirty;
	bool lock;
	bool thp;
	bool lazyfree;
	bool pageout;
};

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t touch_all_requested;
static long page_size;

static void usage(FILE *out)
{
	fputs("usage: memload --size MiB [--hot MiB] [--cgroup DIR]\n"
	      "               [--kind anon|file|shmem] [--file PATH] [--dirty]\n"
	      "               [--period-ms N] [--mlock] [--thp] [--lazyfree]\n"
	      "               [--pageout]\n", out);
}

static size_t parse_mib(const char *arg, const char *name)
{
	char *end;
	unsigned long long mib;

	errno = 0;
	mib = strtoull(arg, &end, 10);
	if (errno || *end || end == arg || mib > (SIZE_MAX >> 20))
		die("--%s: not a size in MiB: '%s'", name, arg);
	return (size_t)mib << 20;
}

static unsigned int parse_uint(const char *arg, const char *name)
{
	char *end;
	unsigned long value;

	errno = 0;
	value = strtoul(arg, &end, 10);
	if (errno || *end || end == arg || value > 3600000)
		die("--%s: not a number of milliseconds: '%s'", name, arg);
	return (unsigned int)value;
}

static void parse_options(int argc, char **argv, struct memload_options *opts)
{
	static const struct option longopts[] = {
		{ "cgroup", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 's' },
		{ "hot", required_argument, NULL, 'H' },
		{ "kind", required_argument, NULL, 'k' },
		{ "file", required_argument, NULL, 'f' },
		{ "dirty", no_argument, NULL, 'd' },
		{ "period-ms", required_argument, NULL, 'p' },
		{ "mlock", no_argument, NULL, 'l' },
		{ "thp", no_argument, NULL, 't' },
		{ "lazyfree", no_argument, NULL, 'z' },
		{ "pageout", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int c;

	*opts = (struct memload_options){ .kind = KIND_ANON, .period_ms = 100 };
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			opts->cgroup = optarg;
			break;
		case 's':
			opts->size_bytes = parse_mib(optarg, "size");
			break;
		case 'H':
			opts->hot_bytes = parse_mib(optarg, "hot");
			break;
		case 'f':
			opts->file = optarg;
			break;
		case 'd':
			opts->dirty = true;
			break;
		case 'p':
			opts->period_ms = parse_uint(optarg, "period-ms");
			break;
		case 'l':
			opts->lock = true;
			break;
		case 't':
			opts->thp = true;
			break;
		case 'z':
			opts->lazyfree = true;
			break;
		case 'P':
			opts->pageout = true;
			break;
		case 'k':
			if (!strcmp(optarg, "anon"))
				opts->kind = KIND_ANON;
			else if (!strcmp(optarg, "file"))
				opts->kind = KIND_FILE;
			else if (!strcmp(optarg, "shmem"))
				opts->kind = KIND_SHMEM;
			else
				die("--kind: expected anon, file or shmem, got '%s'", optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind != argc)
		die("unexpected argument '%s'", argv[optind]);
	if (!opts->size_bytes)
		die("--size is required and must be at least 1 MiB");
	if (opts->hot_bytes > opts->size_bytes)
		die("--hot (%zu MiB) exceeds --size (%zu MiB)",
		    opts->hot_bytes >> 20, opts->size_bytes >> 20);
	if (opts->kind == KIND_FILE && !opts->file)
		die("--kind file needs --file PATH on a block-backed filesystem");
	if (opts->kind != KIND_FILE && opts->file)
		die("--file only applies to --kind file");
	/* MADV_FREE only applies to private anonymous memory. */
	if (opts->lazyfree && opts->kind != KIND_ANON)
		die("--lazyfree only applies to --kind anon");
	/* Writing to anonymous or shmem memory is the only way to populate it. */
	if (opts->kind != KIND_FILE)
		opts->dirty = true;
}

static void join_cgroup(const char *dir)
{
	char procs[4096];
	FILE *f;

	if (mkdir(dir, 0755) && errno != EEXIST)
		die("cannot create cgroup %s: %s", dir, strerror(errno));
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	f = fopen(procs, "w");
	if (!f)
		die("cannot open %s: %s", procs, strerror(errno));
	if (fprintf(f, "%d\n", getpid()) < 0 || fclose(f))
		die("cannot join cgroup %s: %s", dir, strerror(errno));
}

/*
 * File contents are written with write(2), so the page cache starts clean
 * once fsync'd; --dirty then dirties the pages through the mapping.
 */
static int create_backing_file(const char *path, size_t size)
{
	static char chunk[1 << 16];
	size_t done;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die("cannot create %s: %s", path, strerror(errno));
	memset(chunk, 0x5a, sizeof(chunk));
	for (done = 0; done < size; done += sizeof(chunk)) {
		size_t len = size - done < sizeof(chunk) ? size - done : sizeof(chunk);

		if (write(fd, chunk, len) != (ssize_t)len)
			die("cannot write %s: %s", path, strerror(errno));
	}
	if (fsync(fd))
		die("cannot fsync %s: %s", path, strerror(errno));
	return fd;
}

static unsigned char *map_region(const struct memload_options *opts)
{
	unsigned char *region;
	int fd = -1;

	switch (opts->kind) {
	case KIND_ANON:
		region = mmap(NULL, opts->size_bytes, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		break;
	case KIND_SHMEM:
		fd = memfd_create("memload", 0);
		if (fd < 0 || ftruncate(fd, (off_t)opts->size_bytes))
			die("cannot create a %zu MiB memfd: %s",
			    opts->size_bytes >> 20, strerror(errno));
		region = mmap(NULL, opts->size_bytes, PROT_READ | PROT_WRITE,
			      MAP_SHARED, fd, 0);
		break;
	case KIND_FILE:
		fd = create_backing_file(opts->file, opts->size_bytes);
		region = mmap(NULL, opts->size_bytes, PROT_READ | PROT_WRITE,
			      MAP_SHARED, fd, 0);
		break;
	default:
		abort();
	}
	if (region == MAP_FAILED)
		die("cannot map %zu MiB: %s", opts->size_bytes >> 20, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (opts->thp && madvise(region, opts->size_bytes, MADV_HUGEPAGE))
		die("madvise(MADV_HUGEPAGE): %s%s", strerror(errno),
		    errno == ENOSYS ? " (a kernel without CONFIG_ADVISE_SYSCALLS:"
		    " set transparent_hugepage/enabled to always instead)" : "");
	return region;
}

static void touch(unsigned char *region, size_t len, bool write)
{
	volatile unsigned char *p = region;
	unsigned long sum = 0;
	size_t off;

	for (off = 0; off < len; off += (size_t)page_size) {
		if (write)
			p[off]++;
		else
			sum += p[off];
	}
	(void)sum;
}

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_touch_all(int sig)
{
	(void)sig;
	touch_all_requested = 1;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	/* EINTR wakes us early for a signal, which is what we want. */
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	static const char *const kind_names[] = { "anon", "file", "shmem" };
	struct memload_options opts;
	struct sigaction sa = { 0 };
	unsigned char *region;

	page_size = sysconf(_SC_PAGESIZE);
	parse_options(argc, argv, &opts);
	if (opts.cgroup)
		join_cgroup(opts.cgroup);

	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_touch_all;
	sigaction(SIGUSR1, &sa, NULL);

	region = map_region(&opts);
	touch(region, opts.size_bytes, opts.dirty);
	if (opts.lock && mlock(region, opts.size_bytes))
		die("mlock of %zu MiB: %s", opts.size_bytes >> 20, strerror(errno));
	if (opts.lazyfree &&
	    madvise(region + opts.hot_bytes, opts.size_bytes - opts.hot_bytes,
		    MADV_FREE))
		die("madvise(MADV_FREE): %s", strerror(errno));

	/* The hot part is the first hot_bytes from addr. */
	printf("memload: ready pid=%d kind=%s size_bytes=%zu hot_bytes=%zu idle_bytes=%zu dirty=%d mlock=%d thp=%d lazyfree=%d pageout=%d period_ms=%u cgroup=%s addr=%#lx\n",
	       getpid(), kind_names[opts.kind], opts.size_bytes, opts.hot_bytes,
	       opts.size_bytes - opts.hot_bytes, opts.dirty, opts.lock, opts.thp,
	       opts.lazyfree, opts.pageout, opts.period_ms,
	       opts.cgroup ? opts.cgroup : "-", (unsigned long)region);
	fflush(stdout);

	while (!stop_requested) {
		if (touch_all_requested) {
			touch_all_requested = 0;
			touch(region, opts.size_bytes, opts.dirty);
			printf("memload: touched all %zu bytes\n", opts.size_bytes);
			fflush(stdout);
		}
		touch(region, opts.hot_bytes, opts.dirty);
		if (opts.pageout &&
		    madvise(region + opts.hot_bytes,
			    opts.size_bytes - opts.hot_bytes, MADV_PAGEOUT))
			die("madvise(MADV_PAGEOUT): %s", strerror(errno));
		sleep_ms(opts.period_ms);
	}
	if (opts.kind == KIND_FILE)
		unlink(opts.file);
	return 0;
}
