# The devices of QEMU's fuzzer (scripts/build-qemu-fuzz.sh), configured
# --without-default-devices: its generic-fuzz-virtio-kstaled target runs
# "-machine q35 -nodefaults -device virtio-kstaled-pci", so q35 and the
# device over virtio-pci are all it needs.
CONFIG_Q35=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_KSTALED=y
