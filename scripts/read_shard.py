#!/usr/bin/python3
"""Reads one rank's shard of a sharded marin.cpp checkpoint (docs/distributed.md) with numpy alone.

    scripts/read_shard.py RUN/checkpoints/step-00000006 1     # what rank 1 wrote

Prints one JSON line per piece: the tensor, its global shape, the flattened element range the
piece holds, and the sums of its parameters and of Adam's moments m and v.
"""
import json
import struct
import sys

import numpy as np


def read_safetensors(path):
    """{name: 1-D float32 array}: an 8-byte little-endian header length, the JSON header, data."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {name: np.frombuffer(data[t["data_offsets"][0]:t["data_offsets"][1]], np.float32)
            for name, t in header.items() if name != "__metadata__"}


def main(ckpt, rank):
    state = json.load(open(f"{ckpt}/state.json"))
    shard = state["shards"][rank]
    values = read_safetensors(f"{ckpt}/{shard['file']}")
    for p in shard["pieces"]:
        key = f"{p['tensor']}[{p['begin']}:{p['end']}]"
        params, m, v = (values[f"{kind}/{key}"] for kind in ("params", "m", "v"))
        # Into the full tensor: full.reshape(-1)[p["begin"]:p["end"]] = params
        print(json.dumps({"tensor": p["tensor"], "shape": state["tensors"][p["tensor"]]["shape"],
                          "begin": p["begin"], "end": p["end"], "params_sum": float(params.sum()),
                          "m_sum": float(m.sum()), "v_sum": float(v.sum())}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
