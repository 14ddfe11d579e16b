#!/usr/bin/python3
"""Reads the scalars of lockstep's TensorBoard event files (a job's
summaries/ folder) without TensorFlow: TFRecords (length, CRC, Event, CRC)
holding Event protos, decoded by hand.

  summaries.py DIR [TAG ...]   prints {"TAG": {"STEP": value, ...}, ...}
"""
import glob
import json
import os
import struct
import sys


def _varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b):  # (field number, value) of a protobuf message
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        wire = key & 7
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        elif wire == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            return
        yield key >> 3, v


def scalars(folder, tags=None):
    """{tag: {step: value}} of every simple_value in the folder's files."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
        with open(path, "rb") as f:
            data = f.read()
        i = 0
        while i + 12 <= len(data):
            n = struct.unpack("<Q", data[i:i + 8])[0]
            event = data[i + 12:i + 12 + n]
            i += 16 + n
            step = 0
            values = {}
            for f, v in _fields(event):
                if f == 2:  # Event.step
                    step = v
                elif f == 5:  # Event.summary
                    for f2, v2 in _fields(v):
                        if f2 == 1:  # Summary.value: tag, simple_value
                            d = dict(_fields(v2))
                            if 1 in d and 2 in d:
                                values[d[1].decode()] = \
                                    struct.unpack("<f", d[2])[0]
            for tag, v in values.items():
                if tags is None or tag in tags:
                    out.setdefault(tag, {})[step] = v
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(json.dumps(scalars(sys.argv[1], sys.argv[2:] or None)))
