#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (committed under corpus/).

Run again only when a wire or file format changes:
    python3 tests/fuzz/make_seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, value):
    """Protobuf encoding of one field: ints as varints, bytes/str delimited."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def floats(values):
    return struct.pack("<%df" % len(values), *values)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload):
    length = struct.pack("<Q", len(payload))
    return (length + struct.pack("<I", masked(crc32c(length))) + payload +
            struct.pack("<I", masked(crc32c(payload))))


def write(corpus, name, data):
    os.makedirs(os.path.join(HERE, "corpus", corpus), exist_ok=True)
    with open(os.path.join(HERE, "corpus", corpus, name), "wb") as f:
        f.write(data)


def main():
    # service_fuzzer: a kind byte (0 pull, 1 push, 2 create, 3 push-pull),
    # then the message.
    header = field(1, "fuzz") + field(2, "t")
    write("service", "pull", b"\0" + header + field(3, 0) + field(4, 16))
    write("service", "pull-edge", b"\0" + header + field(3, 480) + field(4, 496))
    push = (header + field(3, 16) + field(4, 24) + field(5, 1) + field(6, 3) +
            field(7, 99) + field(8, 5) + field(9, 4))
    write("service", "push", b"\1" + push + field(15, floats([0.5] * 8)))
    write("service", "push-pull",
          b"\3" + push + field(12, 1) + field(15, floats([0.5] * 8)))
    write("service", "push-untracked",
          b"\1" + header + field(3, 0) + field(4, 4) +
          field(15, floats([1, -2, 3, -4])))
    optimizer = field(1, "sgd") + varint(2 << 3 | 5) + struct.pack("<f", 0.1)
    init = field(1, "uniform") + varint(3 << 3 | 5) + struct.pack("<f", 0.5)
    write("service", "create",
          b"\2" + field(1, "fuzz") + field(2, "u") + field(3, 300) +
          field(4, 3) + field(5, 1) + field(6, optimizer) + field(7, init))
    # Encoded pushes and pulls (ValueEncoding FP16 = 1, BF16 = 2, ONEBIT = 3).
    write("service", "push-fp16",
          b"\1" + header + field(3, 0) + field(4, 4) + field(10, 1) +
          field(15, struct.pack("<4H", 0x3C00, 0xBC00, 0x4000, 0x0001)))
    write("service", "push-onebit",
          b"\1" + header + field(3, 0) + field(4, 8) + field(10, 3) +
          field(15, floats([0.25, -0.5]) + b"\x5a"))
    write("service", "pull-bf16",
          b"\0" + header + field(3, 0) + field(4, 16) + field(7, 2))
    # A sync table (ConsistencyConfig: num_workers, timeout, mode SYNC,
    # policy DROP) and an Adam one.
    consistency = (field(3, 2) + varint(4 << 3 | 1) +
                   struct.pack("<d", 0.05) + field(6, 1) + field(7, 1))
    write("service", "create-sync",
          b"\2" + field(1, "fuzz") + field(2, "s") + field(3, 64) +
          field(4, 1) + field(6, optimizer) + field(9, consistency))
    adam = (field(1, "adam") + varint(2 << 3 | 5) + struct.pack("<f", 0.01) +
            varint(5 << 3 | 5) + struct.pack("<f", 0.9) +
            varint(6 << 3 | 5) + struct.pack("<f", 0.999) +
            varint(7 << 3 | 5) + struct.pack("<f", 1e-8))
    write("service", "create-adam",
          b"\2" + field(1, "fuzz") + field(2, "a") + field(3, 64) +
          field(4, 1) + field(6, adam))
    # record_fuzzer: a shard file.
    write("record", "three-records",
          record(b"first") + record(b"") + record(bytes(range(40))))
    write("record", "one-record", record(b"x" * 100))


if __name__ == "__main__":
    main()
