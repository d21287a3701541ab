#!/usr/bin/env python3
"""A tiny safetensors lister and editor for the qopt-step lit tests (stdlib only).

  st.py list FILE                      one line per tensor: name dtype shape, then metadata
  st.py edit IN OUT [ACTION...]        copy IN to OUT applying, in order:
      --drop NAME                      remove a tensor
      --rename OLD=NEW                 rename a tensor
      --retype NAME=DTYPE              change the dtype, keeping the element count
                                       (the bytes are resized with zeros)
      --resize NAME=N                  keep the dtype, make it N elements, shape [N]
      --zeros NAME=DTYPE:N             add a tensor of N zero elements
      --reverse NAME                   reverse the order of the elements
      --trailing N                     write N zero bytes after the data section
      --repeat NAME                    give tensor NAME's header entry twice
  st.py garbage FILE                   write a file that is not safetensors
"""
import json
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
         "I8": 1, "U8": 1, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        b, en = e["data_offsets"]
        tensors[name] = [e["dtype"], list(e["shape"]), body[b:en]]
    return tensors, meta


def save(path, tensors, meta, trailing=0, repeat=None):
    header = {}
    if meta:
        header["__metadata__"] = meta
    off = 0
    blobs = []
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":"))
    if repeat is not None:
        entry = json.dumps({repeat: header[repeat]}, separators=(",", ":"))[1:-1]
        h = h[:-1] + "," + entry + "}"
    h = h.encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs) + bytes(trailing))


def main(argv):
    cmd = argv[1]
    if cmd == "list":
        tensors, meta = load(argv[2])
        for name in sorted(tensors):
            dtype, shape, _ = tensors[name]
            print(name, dtype, "x".join(str(d) for d in shape) or "scalar")
        for k in sorted(meta):
            print("meta", k, meta[k])
        return 0
    if cmd == "garbage":
        with open(argv[2], "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
        return 0
    if cmd != "edit":
        print("unknown command", cmd, file=sys.stderr)
        return 2
    tensors, meta = load(argv[2])
    out = argv[3]
    args = argv[4:]
    trailing, repeat = 0, None
    for i in range(0, len(args), 2):
        action, value = args[i], args[i + 1]
        if action == "--drop":
            del tensors[value]
        elif action == "--rename":
            old, new = value.split("=")
            tensors[new] = tensors.pop(old)
        elif action == "--retype":
            name, dtype = value.split("=")
            _, shape, _ = tensors[name]
            tensors[name] = [dtype, shape, bytes(numel(shape) * SIZES[dtype])]
        elif action == "--resize":
            name, n = value.split("=")
            dtype, _, _ = tensors[name]
            tensors[name] = [dtype, [int(n)], bytes(int(n) * SIZES[dtype])]
        elif action == "--reverse":
            dtype, shape, raw = tensors[value]
            size = SIZES[dtype]
            items = [raw[i:i + size] for i in range(0, len(raw), size)]
            tensors[value] = [dtype, shape, b"".join(reversed(items))]
        elif action == "--zeros":
            name, spec = value.split("=")
            dtype, n = spec.split(":")
            tensors[name] = [dtype, [int(n)], bytes(int(n) * SIZES[dtype])]
        elif action == "--trailing":
            trailing = int(value)
        elif action == "--repeat":
            repeat = value
        else:
            print("unknown action", action, file=sys.stderr)
            return 2
    save(out, tensors, meta, trailing, repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
