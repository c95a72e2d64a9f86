#!/usr/bin/env python3
"""Read a safetensors file with numpy only; print each tensor's name, shape and float64 sum."""
import json, struct, sys
import numpy as np

def read(path):
    buf = open(path, "rb").read()
    (n,) = struct.unpack("<Q", buf[:8])
    header, data, out = json.loads(buf[8:8 + n]), buf[8 + n:], {}
    for name, t in header.items():
        if name == "__metadata__": continue
        raw = data[t["data_offsets"][0]:t["data_offsets"][1]]
        if t["dtype"] == "BF16": a = (np.frombuffer(raw, "<u2").astype("<u4") << 16).view("<f4")
        else: a = np.frombuffer(raw, {"F32": "<f4", "F16": "<f2", "F64": "<f8"}[t["dtype"]])
        out[name] = a.reshape(t["shape"])
    return out

if __name__ == "__main__":
    for name, a in read(sys.argv[1]).items(): print(name, list(a.shape), repr(float(a.sum(dtype=np.float64))), sep="\t")
