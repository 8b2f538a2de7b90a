# The devices of the kstaled-vm emulator, configured
# --without-default-devices (scripts/build-qemu.sh): what the libvirt
# domains in docs/, the test harness, the qtest and the benchmarks ask
# for, and nothing else, so the build compiles a fraction of QEMU's
# devices.  A domain or test that asks for another device fails with
# QEMU's own "'DRIVER' is not a valid device model name".

# Boards: q35 for every guest; pc and microvm (virtio-mmio) for the
# qtest's hotplug and transport cases.  q35 brings its chipset (ICH9 LPC,
# AHCI, SMBus, the PCIe root complex), ACPI, fw_cfg and the ISA serial
# port that is every guest's console.
CONFIG_Q35=y
CONFIG_I440FX=y
CONFIG_MICROVM=y

# The PCIe root ports libvirt puts each q35 device behind.
CONFIG_PCIE_PORT=y

# virtio over PCI and MMIO, and the virtio devices the guests use: the
# Debian guest's disk, the guest agent's virtio-serial channel, the
# balloon, virtio-mem (tests/test-virtio-mem.sh) and the kstaled device.
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_MMIO=y
CONFIG_VIRTIO_BLK=y
CONFIG_VIRTIO_SERIAL=y
CONFIG_VIRTIO_BALLOON=y
CONFIG_VIRTIO_MEM=y
CONFIG_VIRTIO_KSTALED=y
