#!/bin/bash
# Builds the agent's Debian package (dpkg-buildpackage -b, debhelper and
# meson from Debian) from a copy of the checkout, unpacks it into a scratch
# root, and checks that the unit, its user, the man pages and the
# configuration land where Debian's systemd, man and dpkg look for them.
# Usage: test-debian-package.sh SOURCE-ROOT
set -euo pipefail

top=$1
die() { echo "test-debian-package: $*" >&2; exit 1; }
for tool in dpkg-buildpackage dh rsync; do
	command -v "$tool" >/dev/null ||
		die "$tool is missing (scripts/setup-host.sh installs dpkg-dev, debhelper and rsync)"
done

scratch=$(mktemp -d /var/tmp/kstaled-package.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# The files git knows (committed or not), without any build directory.
mkdir "$scratch/src"
git -C "$top" ls-files -z --cached --others --exclude-standard |
	rsync -a --from0 --files-from=- "$top/" "$scratch/src/"

echo "building the package in $scratch/src"
if ! (cd "$scratch/src" && nice dpkg-buildpackage -b -us -uc -j2) >"$scratch/build.log" 2>&1; then
	tail -40 "$scratch/build.log"
	die "dpkg-buildpackage failed"
fi
grep -E '^(Ok|Fail):' "$scratch/build.log" | sed 's/^/  package tests: /'
debs=("$scratch"/kstaled-agent_*.deb)
[ -f "${debs[0]}" ] || die "no kstaled-agent .deb in $scratch: $(ls "$scratch")"
deb=${debs[0]}
dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Depends\|Recommends\):/  &/p'

root=$scratch/root
dpkg -x "$deb" "$root"
dpkg-deb --control "$deb" "$scratch/control"

for f in \
	usr/sbin/kstaled-agent \
	usr/bin/kstaled-ctl \
	etc/kstaled-agent.conf \
	lib/systemd/system/kstaled-agent.service \
	usr/lib/sysusers.d/kstaled-agent.conf \
	usr/share/man/man8/kstaled-agent.8.gz \
	usr/share/man/man1/kstaled-ctl.1.gz \
	usr/share/doc/kstaled-agent/copyright; do
	[ -f "$root/$f" ] || die "the package lacks /$f; it has:
$(cd "$root" && find . -type f | sort)"
done
echo "  files in place: $(cd "$root" && find . -type f | wc -l)"

# The configuration is a conffile, so an upgrade keeps the admin's edits.
grep -qx /etc/kstaled-agent.conf "$scratch/control/conffiles" ||
	die "/etc/kstaled-agent.conf is not a conffile: $(cat "$scratch/control/conffiles")"
# The maintainer scripts create the user before enabling the unit.
grep -q 'systemd-sysusers' "$scratch/control/postinst" ||
	die "postinst does not create the kstaled user"
grep -q 'deb-systemd-helper' "$scratch/control/postinst" ||
	die "postinst does not enable the unit"

unit=$root/lib/systemd/system/kstaled-agent.service
grep -qx 'ExecStart=/usr/sbin/kstaled-agent --config /etc/kstaled-agent.conf' "$unit" ||
	die "the unit does not run the packaged binary with /etc's configuration"
grep -qx 'User=kstaled' "$unit" || die "the unit does not run as kstaled"
! grep -q '^Wants=.*libvirtd' "$unit" || die "the unit starts libvirtd"
grep -qx 'u kstaled - "kstaled guest memory balloon agent" /nonexistent' \
	"$root/usr/lib/sysusers.d/kstaled-agent.conf" ||
	die "the sysusers entry does not create kstaled"
grep -qx 'm kstaled libvirt' "$root/usr/lib/sysusers.d/kstaled-agent.conf" ||
	die "the sysusers entry does not put kstaled in libvirt"
exposure=$(systemd-analyze security --offline=true --root="$root" kstaled-agent.service 2>&1 | tail -1)
echo "  $exposure"
echo "$exposure" | grep -Eq 'exposure level for kstaled-agent.service: [0-9.]+ (OK|SAFE)' ||
	die "the unit's exposure is not OK or better: $exposure"

# The man pages are the ones the source carries, and render.
for page in man8/kstaled-agent.8 man1/kstaled-ctl.1; do
	zcat "$root/usr/share/man/$page.gz" | cmp -s - "$top/host-agent/doc/$(basename "$page")" ||
		die "/usr/share/man/$page.gz differs from the source's"
	warnings=$(MANWIDTH=80 man --warnings -l "$root/usr/share/man/$page.gz" 2>&1 >/dev/null)
	[ -z "$warnings" ] || die "$page renders with warnings: $warnings"
done
# The packaged binaries run, and the configuration they ship loads.
"$root/usr/bin/kstaled-ctl" --version | grep -qx 'kstaled-ctl [0-9.]*' ||
	die "the packaged kstaled-ctl does not run"
"$root/usr/sbin/kstaled-agent" --config "$root/etc/kstaled-agent.conf" \
	--uri test:///default --once --state-file "$scratch/state.json" >/dev/null 2>&1 ||
	die "the packaged agent does not run with the packaged configuration"
"$root/usr/bin/kstaled-ctl" --state-file "$scratch/state.json" status test | grep -q '^test ' ||
	die "the packaged kstaled-ctl does not read the packaged agent's state"
echo "ok: $(basename "$deb") installs its unit, user, man pages and configuration"
