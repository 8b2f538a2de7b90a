#!/bin/sh
# kstaled-kunit: the kernel's kstaled KUnit suite (CONFIG_KSTALED_KUNIT_TEST)
# ran at boot (kunit.enable=1) and every case passed, none skipped.
set -e
# KTAP lines, without printk timestamps when the kernel adds them.
ktap=$(dmesg | sed 's/^\[[^]]*\] //' | grep -E '^ *(not )?ok [0-9]+ kstaled|^ *# kstaled: ' || true)
echo "$ktap"
suite=$(echo "$ktap" | sed -En 's/^(not ok|ok) [0-9]+ kstaled$/\1/p')
totals=$(echo "$ktap" | sed -n 's/^ *# kstaled: pass:\([0-9]*\) fail:\([0-9]*\) skip:\([0-9]*\) total:\([0-9]*\)$/\1 \2 \3 \4/p')
[ -n "$totals" ] || { echo "no KUnit result for the kstaled suite (CONFIG_KSTALED_KUNIT_TEST, kunit.enable=1?)"; exit 1; }
set -- $totals
echo "suite=${suite:-missing} pass=$1 fail=$2 skip=$3 total=$4"
[ "$suite" = ok ] && [ "$1" -gt 0 ] && [ "$1" = "$4" ] && [ "$2" = 0 ] && [ "$3" = 0 ]
