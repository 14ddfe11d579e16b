"""Readers for what the coordinator writes to storage: safetensors
checkpoints and TensorBoard event files. Only numpy is needed; every
malformed input raises CheckpointError naming the file and the defect."""

import json
import os
import re
import struct

from lockstep.errors import CheckpointError

_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8",
           "I32": "<i4", "U8": "u1", "I8": "i1"}
# A safetensors header larger than this is refused before it is read.
_MAX_HEADER = 100 << 20


class _RepeatedKey(Exception):
    pass


def _no_repeated_keys(pairs):
    """json.loads' object hook: a key given twice is refused (the C++
    reader refuses it too), not silently the last one."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) \
        and value >= 0


def read_file(path):
    """The bytes of a file; CheckpointError naming it when it cannot be
    read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise CheckpointError(f"cannot read \"{path}\": {e.strerror}") from None


def read_safetensors(path):
    """{name: numpy array} from a safetensors file, in the file's order
    (see parse_safetensors)."""
    return parse_safetensors(read_file(path), path)


def parse_safetensors(blob, path):
    """{name: numpy array} from the bytes of a safetensors file (``path``
    names it in errors), in the file's order.

    Checks the header length, the JSON, each dtype, that each tensor's
    byte range matches its shape and lies inside the file, and that the
    ranges tile the data area with no gaps or overlaps."""
    import numpy as np

    if len(blob) < 8:
        raise CheckpointError(
            f"\"{path}\": {len(blob)} bytes, shorter than the 8-byte header "
            "length (truncated?)")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > _MAX_HEADER or 8 + n > len(blob):
        raise CheckpointError(
            f"\"{path}\": header of {n} bytes does not fit in the file's "
            f"{len(blob)} bytes (truncated or not safetensors)")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"),
                            object_pairs_hook=_no_repeated_keys)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"\"{path}\": header is not JSON: {e}") from None
    except _RepeatedKey as e:
        raise CheckpointError(
            f"\"{path}\": the header names \"{e.args[0]}\" twice") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"\"{path}\": header is not a JSON object")
    data = memoryview(blob)[8 + n:]
    out = {}
    spans = []
    for name, rec in header.items():
        if name == "__metadata__":
            if not isinstance(rec, dict) or not all(
                    isinstance(v, str) for v in rec.values()):
                raise CheckpointError(
                    f"\"{path}\": __metadata__ is not an object of strings")
            continue
        where = f"\"{path}\": tensor \"{name}\""
        if not isinstance(rec, dict) or not isinstance(rec.get("dtype"), str) \
                or not isinstance(rec.get("shape"), list) \
                or not isinstance(rec.get("data_offsets"), list) \
                or len(rec["data_offsets"]) != 2:
            raise CheckpointError(
                f"{where}: needs dtype, shape and data_offsets; got {rec!r}")
        if rec["dtype"] not in _DTYPES and rec["dtype"] != "BF16":
            raise CheckpointError(
                f"{where}: unknown dtype {rec['dtype']!r} (known: "
                f"{', '.join(list(_DTYPES) + ['BF16'])})")
        shape = rec["shape"]
        if not all(_is_count(d) for d in shape):
            raise CheckpointError(
                f"{where}: a shape that is not a list of non-negative "
                f"integers: {shape!r}")
        if not all(_is_count(x) for x in rec["data_offsets"]):
            raise CheckpointError(
                f"{where}: data_offsets that are not non-negative integers: "
                f"{rec['data_offsets']!r}")
        begin, end = rec["data_offsets"]
        count = 1
        for d in shape:
            count *= d
        itemsize = 2 if rec["dtype"] == "BF16" \
            else np.dtype(_DTYPES[rec["dtype"]]).itemsize
        size = count * itemsize
        if not 0 <= begin <= end <= len(data) or end - begin != size:
            raise CheckpointError(
                f"{where}: bytes [{begin}, {end}) do not "
                f"hold shape {shape} {rec['dtype']} ({size} bytes) inside "
                f"the {len(data)}-byte data area (truncated?)")
        spans.append((begin, end, name))
        if rec["dtype"] == "BF16":
            # The top half of a float32: widened exactly.
            raw = np.frombuffer(data[begin:end], dtype="<u2")
            out[name] = (raw.astype("<u4") << 16).view("<f4").reshape(shape)
        else:
            out[name] = np.frombuffer(data[begin:end],
                                      dtype=_DTYPES[rec["dtype"]]).reshape(
                                          shape).copy()
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            raise CheckpointError(
                f"\"{path}\": tensor \"{name}\" starts at byte {begin}, "
                f"expected {at} (a gap or an overlap)")
        at = end
    if at != len(data):
        raise CheckpointError(
            f"\"{path}\": {len(data) - at} bytes after the last tensor")
    return out


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def _crc32c_python(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    table = _TABLE
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


try:  # Debian's python3-crc32c: SSE4.2 / ARMv8 instructions when present
    import crc32c as _crc32c_module
    _crc32c_fast = _crc32c_module.crc32c
except ImportError:
    _crc32c_fast = None


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli) of bytes, as TFRecord framing and checkpoints'
    state.json use it; ``crc`` continues an earlier block's."""
    if _crc32c_fast is not None:
        return _crc32c_fast(data, crc)
    return _crc32c_python(data, crc)


_STEP_FOLDER = re.compile(r"step-(\d{8,})")


def _recorded_files(state_blob, name):
    """state.json's {file: {"bytes", "crc32c"}} of the checkpoint folder
    ``name``, its step checked against the folder's."""
    try:
        state = json.loads(state_blob)
    except ValueError as e:
        raise CheckpointError(f"state.json: malformed ({e})") from None
    files = state.get("files") if isinstance(state, dict) else None
    if not isinstance(files, dict):
        raise CheckpointError("state.json: malformed (no \"files\" object)")
    match = _STEP_FOLDER.fullmatch(name)
    if match and state.get("step") != int(match.group(1)):
        raise CheckpointError(
            f"state.json: records step {state.get('step')} in folder {name}")
    for file in ("model.safetensors", "optimizer.safetensors"):
        if file not in files:
            raise CheckpointError(f"state.json: no record of {file}")
    for file, rec in files.items():
        if (not isinstance(rec, dict) or "/" in file or file in ("", ".", "..")
                or not isinstance(rec.get("bytes"), int)
                or not isinstance(rec.get("crc32c"), int)):
            raise CheckpointError(
                f"state.json: malformed (the record of \"{file}\")")
    return files


def _check_record(file, size, crc, rec):
    if size != rec["bytes"] or crc != rec["crc32c"]:
        raise CheckpointError(
            f"{file}: {size} bytes with CRC32C 0x{crc:08x}, recorded "
            f"{rec['bytes']} bytes with 0x{rec['crc32c']:08x}")


def check_model_blob(state_blob, blob, name):
    """Checks the bytes of checkpoint ``name``'s model.safetensors against
    the record in its state.json (the bytes of ``state_blob``): size and
    CRC32C with python3-crc32c, the size alone without it (pure Python
    reads about 12 MB/s: half a minute for a BERT-base)."""
    rec = _recorded_files(state_blob, name)["model.safetensors"]
    if _crc32c_fast is None:
        if len(blob) != rec["bytes"]:
            raise CheckpointError(
                f"model.safetensors: {len(blob)} bytes, recorded "
                f"{rec['bytes']}")
        return
    _check_record("model.safetensors", len(blob), crc32c(blob), rec)


def verify_checkpoint(folder):
    """Checks a checkpoint folder (checkpoints/step-N) against the CRC32Cs
    its state.json recorded when it was committed, as a resume from it
    does: the record's step is the folder's, and each recorded file
    (model.safetensors, optimizer.safetensors, artifacts) is there with
    its bytes and CRC32C, read a MiB at a time. CheckpointError naming
    the file and the difference otherwise."""
    state_path = os.path.join(folder, "state.json")
    if not os.path.exists(state_path):
        raise CheckpointError("state.json: missing")
    files = _recorded_files(read_file(state_path),
                            os.path.basename(os.path.normpath(folder)))
    for file, rec in sorted(files.items()):
        path = os.path.join(folder, file)
        crc, size = 0, 0
        try:
            with open(path, "rb") as f:
                while True:
                    block = f.read(1 << 20)
                    if not block:
                        break
                    crc = crc32c(block, crc)
                    size += len(block)
        except FileNotFoundError:
            raise CheckpointError(f"{file}: missing") from None
        except OSError as e:
            raise CheckpointError(
                f"cannot read \"{path}\": {e.strerror}") from None
        _check_record(file, size, crc, rec)


def _masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) \
        & 0xFFFFFFFF


def read_tfrecords(path):
    """The records of one TFRecord file (see parse_tfrecords)."""
    return parse_tfrecords(read_file(path), path)


def parse_tfrecords(blob, path):
    """The records of a TFRecord file's bytes (TensorBoard's event files;
    ``path`` names it in errors), each CRC-checked. A record cut short at
    the end (a writer still appending) ends the list; a damaged one
    raises."""
    records = []
    at = 0
    while at < len(blob):
        if at + 12 > len(blob):
            break
        (n,) = struct.unpack("<Q", blob[at:at + 8])
        (len_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if _masked(crc32c(blob[at:at + 8])) != len_crc:
            raise CheckpointError(
                f"\"{path}\": record {len(records)} at byte {at}: the length's "
                "CRC does not match (damaged file)")
        if at + 12 + n + 4 > len(blob):
            break
        payload = blob[at + 12:at + 12 + n]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + n:at + 16 + n])
        if _masked(crc32c(payload)) != data_crc:
            raise CheckpointError(
                f"\"{path}\": record {len(records)} at byte {at}: the data's "
                "CRC does not match (damaged file)")
        records.append(payload)
        at += 16 + n
    return records


def read_scalars(folder):
    """Every scalar in the event files of ``folder``, as dicts
    {"step", "tag", "value", "wall_time"} in file then record order."""
    try:
        names = sorted(n for n in os.listdir(folder)
                       if n.startswith(EVENT_FILE_PREFIX))
    except OSError as e:
        raise CheckpointError(
            f"cannot list summaries \"{folder}\": {e.strerror}") from None
    rows = []
    for name in names:
        path = os.path.join(folder, name)
        rows += scalars_from_events(read_file(path), path)
    return rows


EVENT_FILE_PREFIX = "events.out.tfevents."


def scalars_from_events(blob, path):
    """The scalars of one event file's bytes, as read_scalars gives them."""
    from lockstep._generated import tensorboard_pb2

    rows = []
    for i, payload in enumerate(parse_tfrecords(blob, path)):
        event = tensorboard_pb2.Event()
        try:
            event.ParseFromString(payload)
        except Exception as e:  # protobuf's DecodeError
            raise CheckpointError(
                f"\"{path}\": record {i} is not an Event: {e}") from None
        if not event.HasField("summary"):
            continue
        for v in event.summary.value:
            rows.append({"step": event.step, "tag": v.tag,
                         "value": float(v.simple_value),
                         "wall_time": event.wall_time})
    return rows
