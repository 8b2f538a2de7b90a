/* SPDX-License-Identifier: GPL-2.0-only */
/* die() for the static guest tools: "PROGRAM: error: MESSAGE" on stderr,
 * then exit status 1.  Include after defining _GNU_SOURCE. */
#ifndef KSTALED_VM_GUEST_DIE_H
#define KSTALED_VM_GUEST_DIE_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: error: ", program_invocation_short_name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

#endif
