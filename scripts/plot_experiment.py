#!/usr/bin/env python3
"""Loss curves from metrics.jsonl. Usage: plot_experiment.py RUN_OR_RUNS_DIR OUT.png

A run directory (RUN/metrics.jsonl): its training loss per step and its validation CE.
A directory of runs (RUNS/*/metrics.jsonl): the validation CE of every run, the best of each kind
(the name's prefix before '-', e.g. muonh-…, adamw-…) highlighted, and — when both are there — the
steps MuonH needs to reach AdamW's final loss. `marin report` draws the full picture of a run."""
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def read(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def one_run(run, out):
    m = read(os.path.join(run, "metrics.jsonl"))
    train = [(j["step"], j["loss"]) for j in m if "loss" in j]
    valid = [(j["step"], j["valid_ce"]) for j in m if "valid_ce" in j]
    if not train:
        sys.exit(f"plot_experiment: {run}/metrics.jsonl has no steps")
    plt.figure(figsize=(7, 4.5))
    plt.plot(*zip(*train), label="training loss", lw=1, color="C0")
    if valid:
        plt.plot(*zip(*valid), "o-", label="validation CE", lw=2, color="C3")
    plt.xlabel("step"); plt.ylabel("nats/token"); plt.legend(); plt.grid(alpha=0.3)
    plt.title(os.path.basename(os.path.normpath(run)))
    plt.tight_layout(); plt.savefig(out, dpi=110)
    print(json.dumps({"run": run, "steps": len(train), "final_loss": train[-1][1],
                      "final_valid_ce": valid[-1][1] if valid else None}))


def many_runs(root, out):
    curves = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "metrics.jsonl")
        if not os.path.exists(path): continue
        pts = [(j["step"], j["valid_ce"]) for j in read(path) if "valid_ce" in j]
        if pts: curves[name] = pts
    if not curves:
        sys.exit(f"plot_experiment: no run under {root} has validation CE in its metrics.jsonl")
    best = {}
    for name, pts in curves.items():
        kind = name.split("-")[0]
        if kind not in best or pts[-1][1] < curves[best[kind]][-1][1]: best[kind] = name
    plt.figure(figsize=(7, 4.5))
    for i, (name, pts) in enumerate(curves.items()):
        bold = name in best.values()
        color = {"muonh": "C0", "adamw": "C3"}.get(name.split("-")[0], f"C{i % 10}")
        plt.plot(*zip(*pts), label=name, lw=2.2 if bold else 0.8, alpha=1 if bold else 0.5,
                 color=color)
    plt.xlabel("step"); plt.ylabel("validation CE (nats/token)"); plt.legend(); plt.grid(alpha=0.3)
    kinds = sorted(best)
    plt.title(" vs ".join(kinds) if len(kinds) > 1 else f"validation CE of {len(curves)} runs")
    plt.tight_layout(); plt.savefig(out, dpi=110)
    summary = {k: {"run": v, "final_valid_ce": curves[v][-1][1]} for k, v in best.items()}
    if "muonh" in best and "adamw" in best:
        target = curves[best["adamw"]][-1][1]
        reach = next((s for s, l in curves[best["muonh"]] if l <= target), None)
        summary["muonh_steps_to_adamw_final"] = reach
        summary["adamw_steps"] = curves[best["adamw"]][-1][0]
    print(json.dumps({"curves": curves, "summary": summary}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, out = sys.argv[1], sys.argv[2]
    if os.path.exists(os.path.join(root, "metrics.jsonl")):
        one_run(root, out)
    else:
        many_runs(root, out)
