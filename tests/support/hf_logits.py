#!/usr/bin/env python3
"""The PyTorch side of tests/export/test_hf_export.cpp: loads an export with the modeling_marin.py it
carries (plain torch + numpy, no transformers) and writes its logits.

  hf_logits.py logits EXPORT float64|float32 TOKENS.i32 B S SEG.i32|- OUT.f64
      logits of the B×S tokens (and segment ids), as float64 little-endian [B, S, V]
  hf_logits.py cache EXPORT TOKENS.i32 B S
      decodes the rows token by token through the KV cache and prints the largest difference
      from the full forward's logits (float64), then greedy generate()'s ids
"""
import sys

import numpy as np
import torch


def load(export, dtype):
    sys.path.insert(0, export)
    import modeling_marin as mm  # the file inside the export

    model = mm.MarinForCausalLM.from_pretrained(export, torch_dtype=dtype, use_marin_loader=True)
    return mm, model


def main():
    mode = sys.argv[1]
    torch.set_num_threads(1)
    if mode == "logits":
        export, dt, tokens, B, S, seg, out = sys.argv[2:9]
        dtype = {"float64": torch.float64, "float32": torch.float32}[dt]
        B, S = int(B), int(S)
        _, model = load(export, dtype)
        ids = torch.from_numpy(np.fromfile(tokens, "<i4").astype(np.int64).reshape(B, S))
        segs = None
        if seg != "-":
            segs = torch.from_numpy(np.fromfile(seg, "<i4").astype(np.int64).reshape(B, S))
        with torch.no_grad():
            logits = model(ids, segment_ids=segs).logits
        assert tuple(logits.shape) == (B, S, model.config.vocab_size), logits.shape
        logits.to(torch.float64).numpy().astype("<f8").tofile(out)
    elif mode == "cache":
        export, tokens, B, S = sys.argv[2:6]
        B, S = int(B), int(S)
        mm, model = load(export, torch.float64)
        ids = torch.from_numpy(np.fromfile(tokens, "<i4").astype(np.int64).reshape(B, S))
        with torch.no_grad():
            full = model(ids).logits
            cache = mm.MarinCache(model.config.num_layers)
            # A prompt of 20 (shorter than the window), a chunk of 7, then one token at a time.
            steps = [model(ids[:, :20], past_key_values=cache, use_cache=True).logits,
                     model(ids[:, 20:27], past_key_values=cache, use_cache=True).logits]
            for t in range(27, S):
                steps.append(model(ids[:, t : t + 1], past_key_values=cache, use_cache=True).logits)
            inc = torch.cat(steps, dim=1)
            gen = model.generate(ids[:, :4], max_new_tokens=6)
        print(f"cache_max_diff {float((inc - full).abs().max()):.3e}")
        print("generated", " ".join(str(int(x)) for x in gen[0]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
