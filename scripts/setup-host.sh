#!/bin/bash
# Install everything kstaled-vm needs on a Debian 12 host: apt sources
# (bookworm-backports, deb-src), build and test packages.  Idempotent; run as
# root.  Skips apt entirely when every package is already installed, so warm
# runs cost nothing.
set -euo pipefail

die() { echo "setup-host: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages)"
grep -q 'VERSION_CODENAME=bookworm' /etc/os-release ||
	die "needs Debian 12 (bookworm); found: $(. /etc/os-release; echo "$PRETTY_NAME")"

backports=/etc/apt/sources.list.d/kstaled-vm-backports.sources
sources_changed=
if [ ! -f "$backports" ]; then
	cat >"$backports" <<'SRC'
Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	sources_changed=1
fi

# Packages from bookworm, then those that must come from backports.
packages=(
	build-essential bc bison flex libelf-dev libssl-dev cpio xz-utils kmod
	ccache rsync curl ca-certificates git patch dpkg-dev debhelper
	pkg-config libglib2.0-dev libpixman-1-dev libfdt-dev zlib1g-dev bzip2
	python3-venv ninja-build
	qemu-system-data seabios ipxe-qemu
	busybox-static
	mmdebstrap grub-pc-bin qemu-utils e2fsprogs fdisk
	libvirt-daemon-system libvirt-clients libvirt-dev
	libjson-c-dev jq
	clang libclang-rt-14-dev
	python3-matplotlib
	# pahole: without it "make olddefconfig" drops Debian's BTF options
	# and what needs them (sched_ext) from Debian's own kernel config.
	dwarves
)
backports_packages=(meson python3-pycotap linux-source-6.12)

missing=()
for p in "${packages[@]}" "${backports_packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
# Backports' meson (>= 1.5) is what QEMU 10 needs; bookworm's 1.0 is not enough.
if ! dpkg --compare-versions "$(dpkg-query -W -f='${Version}' meson 2>/dev/null || echo 0)" ge 1.5; then
	missing+=(meson)
fi

if [ ${#missing[@]} -gt 0 ] || [ -n "$sources_changed" ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q || die "apt-get update failed (is deb.debian.org reachable?)"
	apt-get install -y -q --no-install-recommends "${packages[@]}" ||
		die "apt-get install failed for: ${packages[*]}"
	apt-get install -y -q --no-install-recommends -t bookworm-backports \
		"${backports_packages[@]}" ||
		die "apt-get install from bookworm-backports failed for: ${backports_packages[*]}"
fi

# scripts/lib-debian-kernel.sh fetches Debian's own config of the installed
# linux-source-6.12 with "apt-get download linux-config-6.12=VERSION" (the
# same source package, so the same version): apt's lists must know that
# version, which they do not on a host whose lists were cleaned after the
# install.  (apt-cache show prints nothing, and exits 0, for a version it
# does not know.)
source_version=$(dpkg-query -W -f='${Version}' linux-source-6.12)
if [ -z "$(apt-cache show "linux-config-6.12=$source_version" 2>/dev/null)" ]; then
	apt-get update -q || die "apt-get update failed (is deb.debian.org reachable?)"
fi

# promtool, which checks docs/monitoring/, comes from Debian's prometheus
# package, unpacked rather than installed: its maintainer scripts would
# set up and start a Prometheus server on the host.
promtool_dir=${KSTALED_CACHE:-/var/cache/kstaled-vm}/prometheus
if [ ! -x "$promtool_dir/usr/bin/promtool" ]; then
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -q prometheus) ||
		{ rm -rf "$tmp"; die "apt-get download prometheus failed"; }
	mkdir -p "$promtool_dir"
	dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$promtool_dir" ./usr/bin/promtool ||
		{ rm -rf "$tmp"; die "cannot unpack promtool from $(ls "$tmp")"; }
	rm -rf "$tmp"
fi

# libvirtd runs as root without systemd here: QEMU must run as root with
# no security driver, cgroups or namespaces, and log through plain files
# (no virtlogd).  Appended once, marked, so a re-run changes nothing.
qemu_conf=/etc/libvirt/qemu.conf
marker="# kstaled-vm: settings for running libvirtd as root without systemd"
if ! grep -qxF "$marker" "$qemu_conf"; then
	cp "$qemu_conf" "$qemu_conf.kstaled-vm.orig"
	cat >>"$qemu_conf" <<CONF

$marker
user = "root"
group = "root"
security_driver = "none"
cgroup_controllers = [ ]
stdio_handler = "file"
namespaces = [ ]
CONF
fi
echo "setup-host: ready"
