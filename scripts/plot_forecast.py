#!/usr/bin/env python3
"""Plot a marin forecast: rung loss curves vs compute, the fitted laws, and the target.

    /usr/bin/python3 scripts/plot_forecast.py forecast.json out.png [--actual RUN/metrics.jsonl]

Left: every rung's evaluated loss against its compute (C without the LM head) up to each 5% of
training, the law fitted at 25/50/100% extended to the target's compute, and the target's
forecast at every fraction (star: 100%). Right: the forecast of the target's loss at each
fraction g, with the leave-one-rung-out RMSE and the prediction interval as bands; with --actual, the target run's
evaluated loss (valid_ce) at the same fractions.
"""
import argparse
import json
import math
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_forecast.py: matplotlib is not installed for this python")


def law(fit, c):
    """The fitted law at compute c: power (default) or sigmoid in ln C with ceiling ln V."""
    z = math.log(fit["A"]) - fit["alpha"] * math.log(c)
    if fit.get("law") == "sigmoid":
        return fit["l_inf"] + (fit["ceiling"] - fit["l_inf"]) / (1 + math.exp(-z))
    return fit["l_inf"] + math.exp(z)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("forecast")
    ap.add_argument("out")
    ap.add_argument("--actual", help="metrics.jsonl of the target run (its metric: valid_ce, "
                    "or the per-domain eval's macro_loss and clean_macro_loss)")
    a = ap.parse_args()
    with open(a.forecast) as f:
        fc = json.load(f)
    fits = fc["fits"]
    target = fc["inputs"]["target"]
    metric = fc["prediction"].get("metric", "loss")

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5))
    curves = {}
    for e in fits:
        for p in e["points"]:
            curves.setdefault(p["rung"], []).append((p["compute"], p["loss"]))
    for name, pts in curves.items():
        ax.plot([c for c, _ in pts], [l for _, l in pts], "o-", ms=3, label=f"rung {name}")

    cmax = target["compute"]
    cmin = min(c for pts in curves.values() for c, _ in pts)
    for e in fits:
        g = e["fraction"]
        if e.get("fit") is None or round(g * 100) not in (25, 50, 100):
            continue
        if e["fit"].get("law") == "chinchilla":
            continue  # a law of N and D, not a curve in C: only its forecast (the star) is drawn
        fit = e["fit"]
        xs = [cmin * (cmax / cmin) ** (i / 100) for i in range(101)]
        ys = [law(fit, x) for x in xs]
        ax.plot(xs, ys, "--", lw=1,
                label=f"fit at {g:.0%}: α={fit['alpha']:.3f}, L∞={fit['l_inf']:.3f}")
    tx = [e["target_compute"] for e in fits if e.get("predicted_loss") is not None]
    ty = [e["predicted_loss"] for e in fits if e.get("predicted_loss") is not None]
    ax.plot(tx, ty, "k:", lw=1, label=f"target {target['name']} forecast")
    if ty and fits[-1].get("predicted_loss") is not None:
        ax.plot([fits[-1]["target_compute"]], [fits[-1]["predicted_loss"]], "k*", ms=14,
                label=f"forecast {fits[-1]['predicted_loss']:.4f}")
    ax.set_xscale("log")
    ax.set_xlabel("training compute without LM head (FLOPs)")
    ax.set_ylabel(metric)
    ax.set_title(f"ladder {fc['ladder'].get('name', '')}: {metric} vs compute")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")

    gs = [e["fraction"] for e in fits if e.get("predicted_loss") is not None]
    pred = [e["predicted_loss"] for e in fits if e.get("predicted_loss") is not None]
    loo = [(e["fit"].get("loo") or {}).get("rmse", 0.0) for e in fits
           if e.get("predicted_loss") is not None]
    bx.plot(gs, pred, "o-", ms=3, label="forecast")
    bx.fill_between(gs, [p - r for p, r in zip(pred, loo)], [p + r for p, r in zip(pred, loo)],
                    alpha=0.2, label="± leave-one-rung-out RMSE")
    band = [(e["fraction"], e["interval"]["lo"], e["interval"]["hi"]) for e in fits
            if isinstance(e.get("interval"), dict)]
    if band:
        lvl = fits[-1].get("interval") or {}
        bx.fill_between([g for g, _, _ in band], [lo for _, lo, _ in band],
                        [hi for _, _, hi in band], alpha=0.15, color="C4",
                        label=f"{lvl.get('level', 0.9):.0%} prediction interval (bootstrap)")
    clean = [(e["fraction"], e["predicted_clean_loss"]) for e in fits
             if e.get("predicted_clean_loss") is not None]
    if clean:
        bx.plot(*zip(*clean), "o--", ms=3, color="C2", label="forecast, clean-only documents")
        clean_band = [(e["fraction"], e["clean_interval"]["lo"], e["clean_interval"]["hi"])
                      for e in fits if isinstance(e.get("clean_interval"), dict)]
        if clean_band:
            bx.fill_between([g for g, _, _ in clean_band], [lo for _, lo, _ in clean_band],
                            [hi for _, _, hi in clean_band], alpha=0.12, color="C2",
                            label="clean-only prediction interval (bootstrap)")
    if a.actual:
        seen, seen_clean = {}, {}
        with open(a.actual) as f:
            for line in f:
                j = json.loads(line)
                if metric == "macro_loss" and "eval" in j:
                    seen[j["step"]] = j["eval"]["macro_loss"]
                    if j["eval"].get("clean_macro_loss") is not None:
                        seen_clean[j["step"]] = j["eval"]["clean_macro_loss"]
                elif metric != "macro_loss" and "valid_ce" in j:
                    seen[j["step"]] = j["valid_ce"]
        for got, style, color, label in ((seen, "s-", "C3", "actual"),
                                         (seen_clean, "s--", "C1", "actual, clean-only")):
            pts = [(e["fraction"], got[e["target_step"]]) for e in fits if e["target_step"] in got]
            if pts:
                bx.plot([g for g, _ in pts], [l for _, l in pts], style, color=color, ms=3,
                        label=label)
    bx.set_xlabel("fraction of training g")
    bx.set_ylabel(metric)
    bx.set_title(f"target {target['name']}: {target['steps']} steps × batch {target['batch']}")
    bx.legend(fontsize=8)
    bx.grid(alpha=0.3)
    fig.text(0.01, 0.01, f"created {fc.get('created', '')}, ladder xxh64 {fc['ladder']['xxh64']}",
             fontsize=7, color="gray")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)


if __name__ == "__main__":
    main()
