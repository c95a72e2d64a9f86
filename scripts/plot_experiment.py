#!/usr/bin/env python3
"""Validation-loss curves of every run under a directory (RUN/metrics.jsonl), best of each
optimizer highlighted, and the steps MuonH needs to reach AdamW's final loss. Usage:
plot_experiment.py RUNS_DIR OUT.png"""
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

root, out = sys.argv[1], sys.argv[2]
curves = {}
for name in sorted(os.listdir(root)):
    path = os.path.join(root, name, "metrics.jsonl")
    if not os.path.exists(path): continue
    pts = [(j["step"] + 1, j["valid_ce"]) for j in map(json.loads, open(path)) if "valid_ce" in j]
    if pts: curves[name] = pts
best = {}
for name, pts in curves.items():
    kind = name.split("-")[0]
    if kind not in best or pts[-1][1] < curves[best[kind]][-1][1]: best[kind] = name
plt.figure(figsize=(7, 4.5))
for name, pts in curves.items():
    bold = name in best.values()
    plt.plot(*zip(*pts), label=name, lw=2.2 if bold else 0.8, alpha=1 if bold else 0.5,
             color="C0" if name.startswith("muonh") else "C3")
plt.xlabel("step"); plt.ylabel("validation CE (nats/token)"); plt.legend(); plt.grid(alpha=0.3)
plt.title("cpu-small on the fixture mixture: MuonH vs AdamW")
plt.tight_layout(); plt.savefig(out, dpi=110)
summary = {k: {"run": v, "final_valid_ce": curves[v][-1][1]} for k, v in best.items()}
if "muonh" in best and "adamw" in best:
    target = curves[best["adamw"]][-1][1]
    reach = next((s for s, l in curves[best["muonh"]] if l <= target), None)
    summary["muonh_steps_to_adamw_final"] = reach
    summary["adamw_steps"] = curves[best["adamw"]][-1][0]
print(json.dumps({"curves": {k: v for k, v in curves.items()}, "summary": summary}, indent=1))
