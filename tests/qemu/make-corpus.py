#!/usr/bin/env python3
"""Write the seed corpus of fuzz-report.sh into tests/qemu/corpus/.

Three valid reports, and one report per rule of docs/virtio-kstaled.md
broken, each a valid report with one field changed, so that the fuzzer
starts next to every check of the parser.  Run it again after a protocol
change: python3 tests/qemu/make-corpus.py
"""
import os
import struct

MAGIC = 0x4C54534B
HEADER = struct.Struct("<IHHIIIIQQ")       # 40 bytes
RECORD = struct.Struct("<IHHQQQQQ24Q")     # 240 bytes
MIB = 1 << 20
NO_LIMIT = (1 << 64) - 1


def record(path, scans=40, limit=NO_LIMIT, idle=None, **over):
    plen = len(path)
    rlen = (RECORD.size + plen + 1 + 7) & ~7
    if idle is None:
        idle = [(k + 1) * 8 * MIB >> (b // 2) for k in range(3) for b in range(8)]
    f = dict(record_length=rlen, path_length=plen, reserved=0, inode=1234,
             scans=scans, stale=4 * MIB, usage=64 * MIB, limit=limit)
    f.update(over)
    body = RECORD.pack(f["record_length"], f["path_length"], f["reserved"],
                       f["inode"], f["scans"], f["stale"], f["usage"],
                       f["limit"], *idle)
    return body + path + b"\0" * (rlen - RECORD.size - plen)


def report(records, flags=0, stale_drop=0, guest_scans=40, **over):
    data = b"".join(records)
    f = dict(magic=MAGIC, version=1, header_length=40, flags=flags,
             count=len(records), total=HEADER.size + len(data),
             generation=3, guest_scans=guest_scans, stale_drop=stale_drop)
    f.update(over)
    return HEADER.pack(f["magic"], f["version"], f["header_length"],
                       f["flags"], f["count"], f["total"], f["generation"],
                       f["guest_scans"], f["stale_drop"]) + data


def main():
    work = record(b"/work")
    grown = [8 * MIB] * 24
    grown[1] = 9 * MIB
    corpus = {
        "valid-one-cgroup": report([work]),
        "valid-three-cgroups": report([record(b"/"), work,
                                       record(b"/work/db", limit=128 * MIB)],
                                      flags=4),
        "valid-early": report([work], flags=1, stale_drop=16 * MIB),
        "valid-requested": report([work], flags=2),
        "bad-magic": report([work], magic=0x4B53544C),
        "bad-version": report([work], version=2),
        "bad-header-length": report([work], header_length=48),
        "bad-flags": report([work], flags=8),
        "stale-drop-not-early": report([work], stale_drop=4096),
        "stale-drop-above-limit": report([work], flags=1,
                                         stale_drop=(1 << 52) + 1),
        "record-count-above-limit": report([work], count=1025),
        "record-count-past-data": report([work], count=2),
        "record-count-zero": report([work], count=0),
        "total-length-mismatch": report([work], total=MIB),
        "short-header": report([work])[:39],
        "truncated-record": report([work], total=40 + 120)[:160],
        "trailing-bytes": report([work], total=40 + len(work) + 8) + b"\0" * 8,
        "record-length": report([record(b"/work", record_length=256)]),
        "path-length-zero": report([record(b"/work", path_length=0)]),
        "path-length-above-limit": report([record(b"/work",
                                                  path_length=4096)]),
        "path-length-past-record": report([record(b"/work", path_length=16)]),
        "reserved": report([record(b"/work", reserved=1)]),
        "scans-above-guest": report([record(b"/work", scans=41)]),
        "stale-above-limit": report([record(b"/work", stale=(1 << 52) + 1)]),
        "usage-above-limit": report([record(b"/work", usage=NO_LIMIT)]),
        "limit-above-limit": report([record(b"/work", limit=1 << 53)]),
        "idle-above-limit": report([record(b"/work", idle=[1 << 60] * 24)]),
        "histogram-grows": report([record(b"/work", idle=grown)]),
        "path-no-slash": report([record(b"work/")]),
        "path-control-byte": report([record(b"/wo\nk")]),
        "path-high-byte": report([record(b"/wo\x80k")]),
        "path-not-terminated": report([work[:RECORD.size + 5] + b"x\0\0"]),
        "padding-not-zero": report([work[:RECORD.size + 6] + b"\1\0"]),
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in corpus.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
