#!/usr/bin/python3
"""Plots and tabulates the loss-gap-against-ratio frontier (scripts/quality/frontier.sh).

    scripts/quality/frontier_report.py --collect <records folder> --out docs/quality/frontier.json [--meta k=v ...]

gathers the records of scripts/quality/train_lm.py that frontier.sh keeps
(every *.json in the folder, in name order; each with its "model" and "run")
into one file, each record whole but for its per-rank "digests" ("identical"
stays). Then

    scripts/quality/frontier_report.py [--dir docs/quality] [--doc docs/quality/frontier.md]

reads docs/quality/frontier.json, writes
  docs/quality/frontier_<model>.png         validation gap against fewer bytes
                                            over the run, one panel per rank count
  docs/quality/frontier_curves_<model>.png  validation loss of the 2-rank
                                            seed-0 runs (the fewest ranks present)
and rewrites the part of docs/quality/frontier.md between
  <!-- BEGIN quality-frontier --> and <!-- END quality-frontier -->
(text outside the markers is never touched; without the markers a section
"## Results" holding them is appended). Run again
on the committed JSON it rewrites the section byte for byte.

    scripts/quality/frontier_report.py --check [--dir docs/quality] [--doc docs/quality/frontier.md]

draws nothing and changes nothing: exit status 1 when the page's section is
not, byte for byte, what the committed JSON gives, or when there is no JSON
(CTest: docs_quality_frontier).

A run's validation gap is against the ddp run of the same model, rank count
and seed, or, where that seed has no ddp run, against the mean of the model's
and rank count's ddp runs; a run id's numbers are means over its seeds. The
baseline is the run named ddp (other dense runs, such as DDP at other
learning rates, are rows beside it).
"""

import glob
import json
import math
import os
import statistics
import sys

import report_page

BEGIN = "<!-- BEGIN quality-frontier -->"
END = "<!-- END quality-frontier -->"
HEADING = "## Results"
AIM = (1.0, 50.0)        # % gap at >= x fewer bytes over the run
AT_LEAST = (3.0, 40.0)
HALF_RANGE = (10.0, 200.0)   # ratios over the run at which runs are held against powerSGD_hook
# train_lm.py's rows that compress every step's gradients in cc_coll.torch's hook
HOOK_METHODS = ("none", "topk", "sketch", "lowrank", "half", "quant", "onebit")
ROUTES = (  # (row test, route) in table order
    (lambda row: row == "ddp", "uncompressed (DDP's default hook)"),
    (lambda row: row == "powersgd", "PyTorch powerSGD_hook"),
    (lambda row: row == "postlocal", "PyTorch PostLocalSGDOptimizer"),
    (lambda row: row in ("local", "local-noef"), "compressed local steps (cc_coll)"),
    (lambda row: row.startswith("cadam"), "per-step compressed Adam (cc_coll)"),
    (lambda row: row.startswith("dgc"), "DGC momentum SGD (cc_coll)"),
    (lambda row: row.split("-")[0] in HOOK_METHODS, "per-step compression in DDP's hook (cc_coll)"),
)
COLORS = ("#7f7f7f", "#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd",
          "#8c564b", "#e377c2", "#17becf", "#bcbd22")
# train_lm.py's defaults of the options the settings column spells out
DEFAULTS = {"local_steps": 4, "local_method": "topk", "density": 0.01, "rank": 1, "outer_lr": 1.0,
            "outer_momentum": 0.0, "ramp_steps": 0, "overlap": False, "exact_budget": None,
            "freeze_step": 100, "adam_method": "topk", "adam_estimate": "momentum", "refresh": "none",
            "mask_zero_rows": False}
# settings that never define a run (they differ per seed, or only say where the record goes)
NOT_SETTINGS = ("row", "seed", "label", "out")


def route_of(row):
    for i, (test, name) in enumerate(ROUTES):
        if test(row):
            return i, name
    return len(ROUTES), row


def is_challenger(row):
    """The rows held against powerSGD_hook: libcc_coll's routes."""
    return (row in ("local", "local-noef") or row.startswith("cadam") or row.startswith("dgc")
            or (row.split("-")[0] in HOOK_METHODS and row != "none"))


def fmt_num(v):
    return "%g" % v


# -- collect ------------------------------------------------------------------

def collect(folder, out, meta):
    paths = sorted(glob.glob(os.path.join(folder, "*.json")))
    if not paths:
        raise SystemExit("frontier_report.py: no *.json record in %s" % folder)
    runs = []
    for p in paths:
        with open(p) as fh:
            rec = json.load(fh)
        for k in ("model", "run"):
            if k not in rec:
                raise SystemExit("frontier_report.py: %s has no %r (frontier.sh adds it)" % (p, k))
        rec.pop("digests", None)
        runs.append(rec)
    bad = [kv for kv in meta if "=" not in kv]
    if bad:
        raise SystemExit("frontier_report.py: --meta wants k=v, not %s" % ", ".join(bad))
    doc = {"meta": dict(kv.split("=", 1) for kv in meta), "runs": runs}
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return len(runs)


# -- the numbers ----------------------------------------------------------------

class Run:
    """One run id of one model and rank count: its records, one per seed."""

    def __init__(self, model, ranks, rid, recs):
        self.model, self.ranks, self.id = model, ranks, rid
        self.recs = sorted(recs, key=lambda r: r["settings"].get("seed", 0))
        self.row = self.recs[0]["row"]
        self.route_index, self.route = route_of(self.row)
        self.seeds = [r["settings"].get("seed", 0) for r in self.recs]
        self.gaps = []          # per seed; None without a ddp run to compare
        vals = [r["final_val"] for r in self.recs]
        self.val = sum(vals) / len(vals)
        self.val_spread = (max(vals) - min(vals)) / 2
        self.ratio_run = sum(r["ratio_run"] for r in self.recs) / len(self.recs)
        self.ratio_steady = sum(r["ratio_steady"] for r in self.recs) / len(self.recs)
        self.sec = statistics.median(r["sec_per_step_median"] for r in self.recs)
        self.identical = all(r["identical"] for r in self.recs)

    @property
    def gap(self):
        if not self.gaps or any(g is None for g in self.gaps):
            return None
        return sum(self.gaps) / len(self.gaps)

    def sort_key(self):
        return (self.route_index, self.route, self.row.endswith("-noef"), self.ratio_run, self.id)


def build(runs):
    """{model: {ranks: [Run...]}} in table order, the gaps filled in."""
    groups = {}
    for r in runs:
        groups.setdefault(r["model"], {}).setdefault(r["ranks"], {}).setdefault(r["run"], []).append(r)
    out = {}
    for model in sorted(groups):
        out[model] = {}
        for ranks in sorted(groups[model]):
            ids = groups[model][ranks]
            # the baseline: the run named ddp (other dense runs, such as
            # DDP at other learning rates, are rows beside it)
            ddp = ids.get("ddp") or [r for recs in ids.values() for r in recs if r["row"] == "ddp"]
            by_seed = {}
            for r in ddp:
                by_seed.setdefault(r["settings"].get("seed", 0), []).append(r["final_val"])
            mean_ddp = sum(r["final_val"] for r in ddp) / len(ddp) if ddp else None
            items = []
            for rid in sorted(ids):
                run = Run(model, ranks, rid, ids[rid])
                for rec, seed in zip(run.recs, run.seeds):
                    if seed in by_seed:
                        b = sum(by_seed[seed]) / len(by_seed[seed])
                    else:
                        b = mean_ddp
                    run.gaps.append(None if b is None else 100.0 * (rec["final_val"] - b) / b)
                items.append(run)
            out[model][ranks] = sorted(items, key=Run.sort_key)
    return out


def frontier(points):
    """The points (ratio, gap) that no other point beats in both (higher
    ratio, lower gap), in ratio order."""
    keep = []
    for p in points:
        if not any(q != p and q[0] >= p[0] and q[1] <= p[1] for q in points):
            keep.append(p)
    return sorted(set(keep))


def interp_log(points, x):
    """Piecewise-linear in log(ratio) through (ratio, gap) points, flat
    beyond the ends."""
    pts = sorted(points)
    if x <= pts[0][0]:
        return pts[0][1]
    if x >= pts[-1][0]:
        return pts[-1][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            if x1 == x0:
                return min(y0, y1)
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + t * (y1 - y0)
    return pts[-1][1]


# -- the page's section ----------------------------------------------------------

def settings_of(run, base_settings):
    s = run.recs[0]["settings"]

    def g(k):
        return s.get(k, DEFAULTS.get(k))

    row = run.row
    described = set()
    if row == "ddp":
        parts = ["dense"]
    elif row == "powersgd":
        parts = ["rank %d" % g("rank")]
        described.add("rank")
    elif row == "postlocal":
        parts = ["H=%d, exact" % g("local_steps")]
        described.add("local_steps")
    elif row in ("local", "local-noef"):
        m = g("local_method")
        if m in ("topk", "sketch"):
            what = "%s %s" % (m, fmt_num(g("density")))
        elif m == "lowrank":
            what = "lowrank rank %d" % g("rank")
        else:
            what = "dense average"
        parts = ["H=%d, %s, %s" % (g("local_steps"), what, "no EF" if row == "local-noef" else "EF")]
        if g("ramp_steps"):
            parts.append("ramp %d steps" % g("ramp_steps"))
        if g("outer_lr") != DEFAULTS["outer_lr"] or g("outer_momentum") != DEFAULTS["outer_momentum"]:
            parts.append("outer lr %s momentum %s" % (fmt_num(g("outer_lr")), fmt_num(g("outer_momentum"))))
        if g("overlap"):
            parts.append("overlap")
        if g("exact_budget") is not None:
            parts.append("LayerPolicy.for_model, budget %s" % fmt_num(g("exact_budget")))
        described.update(DEFAULTS)
    elif row in ("cadam", "cadam-noef"):
        m = g("adam_method")
        what = ("%s %s" % (m, fmt_num(g("density"))) if m in ("topk", "sketch")
                else "lowrank rank %d" % g("rank") if m == "lowrank" else "dense average")
        parts = ["freeze %d, momentum through %s, %s" % (
            g("freeze_step"), what, "EF21 estimate" if g("adam_estimate") == "ef21"
            else "no EF" if row == "cadam-noef" else "EF")]
        if g("refresh") != "none":
            parts.append("%s refresh of the variance" % g("refresh"))
        if g("mask_zero_rows"):
            parts.append("momentum masks")
        if g("exact_budget") is not None:
            parts.append("LayerPolicy.for_model, budget %s" % fmt_num(g("exact_budget")))
        described.update(DEFAULTS)
    else:
        m = row.split("-")[0]
        parts = ["%s%s, %s" % (m, " %s" % fmt_num(g("density")) if m in ("topk", "sketch") else
                               " rank %d" % g("rank") if m == "lowrank" else "",
                               "no EF" if row.endswith("-noef") else "EF")]
        described.update(("density", "rank"))
    if s.get("setting"):
        parts.append(", ".join(s["setting"]))
    described.add("setting")
    # anything else that differs from the model's ddp run (options of the routes this
    # report does not know, or general ones such as --min-elements)
    if base_settings is not None:
        for k in sorted(s):
            if k in described or k in NOT_SETTINGS:
                continue
            if k in base_settings and base_settings[k] == s[k]:
                continue
            if k not in base_settings and (s[k] in (None, False) or (k in DEFAULTS and s[k] == DEFAULTS[k])):
                continue
            v = s[k]
            parts.append("--%s" % k.replace("_", "-") if v is True else
                         "--%s %s" % (k.replace("_", "-"), fmt_num(v) if isinstance(v, float) else v))
    return ", ".join(parts) if parts else "(train_lm.py's defaults)"


def fmt_gap(g):
    return "n/a" if g is None else "%+.2f%%" % g


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def seeds_note(run):
    return plural(len(run.seeds), "seed")


def table(model, ranks, runs, folder_rel):
    ddp = next((r for r in runs if r.id == "ddp"), None) or next((r for r in runs if r.row == "ddp"), None)
    base = ddp.recs[0]["settings"] if ddp else None
    out = ["#### Model %s, %d ranks" % (model, ranks), ""]
    out.append("| run | route | settings | seeds | final val loss | val gap | fewer bytes, steady "
               "| fewer bytes, over the run | replicas bit-identical | s/step |")
    out.append("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for r in runs:
        val = "%.4f" % r.val + (" ± %.4f" % r.val_spread if len(r.recs) > 1 else "")
        gap = fmt_gap(r.gap)
        if len(r.recs) > 1 and r.gap is not None:
            gap += " (%s)" % ", ".join(fmt_gap(g) for g in r.gaps)
        out.append("| %s | %s | %s | %s | %s | %s | %.1fx | %.1fx | %s | %.3f |" % (
            r.id, r.route, settings_of(r, base), ", ".join(str(s) for s in r.seeds), val, gap,
            r.ratio_steady, r.ratio_run, "yes" if r.identical else "**no**", r.sec))
    out.append("")
    return out


def model_line(model, runs_by_ranks):
    allruns = [r for runs in runs_by_ranks.values() for r in runs]
    ref = min(allruns, key=lambda r: (r.row != "ddp", r.ranks, r.id)).recs[0]
    s, c = ref["settings"], ref["corpus"]
    return ("Model %s: %d layers, d_model %d, %d heads, context %d, %d parameters; %d steps of %s "
            "(peak lr %s%s), global batch %d sequences; corpus %s: %d characters (sha256 %s...)." % (
                model, s["layers"], s["dmodel"], s["heads"], s["ctx"], ref["params"], s["steps"],
                "AdamW" if s.get("optim", "adamw") == "adamw" else s["optim"].upper(), fmt_num(s["lr"]),
                ", beta2 %s" % fmt_num(s["beta2"]) if s.get("optim", "adamw") == "adamw" and "beta2" in s else "",
                s["batch"], "`%s`" % s["corpus"], c["characters"], c["sha256"][:12]))


def targets(groups):
    out = []
    bad = []
    for model, by_ranks in groups.items():
        for ranks, runs in by_ranks.items():
            where = "Model %s, %d ranks" % (model, ranks)
            scored = [r for r in runs if r.row != "ddp" and r.gap is not None]
            for what, (tgap, tratio) in (("the aim", AIM), ("at least", AT_LEAST)):
                cands = sorted((r for r in scored if r.ratio_run >= tratio), key=lambda r: (r.gap, r.id))
                head = "- %s, %s: ≤ %g%% gap at ≥ %gx fewer bytes over the run (mean of seeds): " % (
                    where, what, tgap, tratio)
                if not cands:
                    out.append(head + "**not met**: no run at ≥ %gx." % tratio)
                    continue
                best = cands[0]
                desc = "%s (%s, %.1fx, %s)" % (best.id, fmt_gap(best.gap), best.ratio_run, seeds_note(best))
                if best.gap <= tgap:
                    others = [r.id for r in cands[1:] if r.gap <= tgap]
                    out.append(head + "met; best %s%s." % (desc, "; also " + ", ".join(others) if others else ""))
                else:
                    out.append(head + "**not met**; best at ≥ %gx: %s." % (tratio, desc))
            psgd = [(r.ratio_run, r.gap) for r in scored if r.row == "powersgd"]
            lo, hi = HALF_RANGE
            for r in scored:
                if not is_challenger(r.row) or not lo <= r.ratio_run <= hi:
                    continue
                head = "- %s, %s: at most half of powerSGD_hook's gap at the same bytes: " % (where, r.id)
                if not psgd:
                    out.append(head + "no powerSGD_hook run to compare.")
                    continue
                p = interp_log(psgd, r.ratio_run)
                out.append(head + "gap %s vs powerSGD_hook's %s at %.1fx: %s." % (
                    fmt_gap(r.gap), fmt_gap(p), r.ratio_run, "met" if r.gap <= p / 2 else "**not met**"))
            ids = {r.id: r for r in runs}
            for r in runs:
                if r.row != "local-noef":
                    continue
                head = "- %s, error feedback better than none: " % where
                partner = ids.get(r.id[:-len("-noef")]) if r.id.endswith("-noef") else None
                if partner is None or partner.gap is None or r.gap is None:
                    out.append(head + "%s has no run with error feedback to compare." % r.id)
                    continue
                out.append(head + "%s %s with, %s %s without: %s." % (
                    partner.id, fmt_gap(partner.gap), r.id, fmt_gap(r.gap),
                    "met" if partner.gap < r.gap else "**not met**"))
            for r in runs:
                for rec, seed in zip(r.recs, r.seeds):
                    if not rec["identical"]:
                        bad.append("model %s, %d ranks, %s seed %d" % (model, ranks, r.id, seed))
    out.append("- Replicas bit-identical in every run: %s." % ("yes" if not bad else "**no**: " + "; ".join(bad)))
    return out


def section(data, folder_rel):
    meta = data["meta"]
    groups = build(data["runs"])
    any_run = data["runs"][0]
    out = [BEGIN, ""]
    args = meta.get("args", "")
    out.append("Generated by `%s` at commit %s on %s%s; %d CPUs, torch %s, Python %s. %s, %s. "
               "A run's numbers are means over its seeds; its val gap is against the ddp run of the same model, "
               "rank count and seed (a seed without one: against the mean of the ddp runs)." % (
        meta.get("command", "scripts/quality/frontier.sh"), meta.get("commit", "?"), meta.get("date", "?"),
        " (more train_lm.py options for every run: `%s`)" % args if args else "",
        any_run["cpus"], any_run["torch"], any_run["python"], plural(len(data["runs"]), "record"),
        plural(sum(len(v) for by_ranks in groups.values() for v in by_ranks.values()), "run")))
    out.append("")
    for model, by_ranks in groups.items():
        out.append("### Model %s" % model)
        out.append("")
        out.append(model_line(model, by_ranks))
        out.append("")
        for ranks, runs in by_ranks.items():
            out.extend(table(model, ranks, runs, folder_rel))
        out.append("![validation gap against fewer bytes over the run, model %s](%s/frontier_%s.png)" % (
            model, folder_rel, model))
        out.append("")
        out.append("![validation loss of the %d-rank seed-0 runs, model %s](%s/frontier_curves_%s.png)" % (
            curve_ranks(by_ranks), model, folder_rel, model))
        out.append("")
    out.append("### Targets")
    out.append("")
    out.extend(targets(groups))
    out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


# -- plots ----------------------------------------------------------------------

def curve_ranks(by_ranks):
    return 2 if 2 in by_ranks else min(by_ranks)


def route_colors(groups):
    routes = sorted({(r.route_index, r.route) for by in groups.values() for runs in by.values() for r in runs})
    return {name: COLORS[(i if i < len(ROUTES) else len(ROUTES) + k) % len(COLORS)]
            for k, (i, name) in enumerate(routes)}


def plot(groups, folder):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    color = route_colors(groups)
    names = []
    for model, by_ranks in groups.items():
        n = len(by_ranks)
        fig, axes = plt.subplots(1, n, figsize=(7.5 * n, 5.5), squeeze=False)
        for ax, (ranks, runs) in zip(axes[0], by_ranks.items()):
            pts = {}
            for r in runs:
                if r.gap is None:
                    continue
                c = color[r.route]
                lo, hi = min(r.gaps), max(r.gaps)
                noef = r.row.endswith("-noef")
                ax.errorbar([r.ratio_run], [r.gap], yerr=[[r.gap - lo], [hi - r.gap]], fmt="o",
                            color=c, mfc="white" if noef else c, ms=5, capsize=2, lw=1,
                            label=r.route if r.route not in pts else None)
                pts.setdefault(r.route, []).append((r.ratio_run, r.gap))
                ax.annotate(r.id, (r.ratio_run, r.gap), xytext=(3, 3), textcoords="offset points",
                            fontsize=6, color=c)
            for route, p in pts.items():
                f = frontier(p)
                if len(f) > 1:
                    ax.plot([x for x, _ in f], [y for _, y in f], "-", color=color[route], lw=1, alpha=0.7)
            ax.set_xscale("log")
            ax.axhline(0, color="black", lw=0.5)
            ax.axhline(AIM[0], color="grey", lw=0.5, ls=":")
            ax.axvline(AIM[1], color="grey", lw=0.5, ls=":")
            ax.set_xlabel("fewer bytes over the run (x, log scale)")
            ax.set_ylabel("validation-loss gap to ddp (%)")
            ax.set_title("model %s, %d ranks (marker: mean over seeds; bar: min..max)" % (model, ranks), fontsize=9)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        name = "frontier_%s.png" % model
        fig.savefig(os.path.join(folder, name), dpi=90, metadata={"Software": None})
        plt.close(fig)
        names.append(name)

        ranks = curve_ranks(by_ranks)
        fig, ax = plt.subplots(figsize=(10, 5.5))
        lo, hi = [], []
        curves = [(r, next((x for x, s in zip(r.recs, r.seeds) if s == 0), None)) for r in by_ranks[ranks]]
        curves = [(r, rec) for r, rec in curves if rec is not None]
        for i, (r, rec) in enumerate(curves):
            steps, vals = zip(*rec["val_loss"])
            ls = {"powersgd": "--", "postlocal": "-."}.get(r.row, "-" if r.row.startswith("local") else ":")
            c = "black" if r.row == "ddp" else plt.cm.tab20.colors[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20]
            ax.plot(steps, vals, "-" if r.row == "ddp" else ls, color=c, lw=1.6 if r.row == "ddp" else 1.0,
                    marker=".", ms=3, label="%s (%s)" % (r.id, r.route))
            lo.append(min(vals))
            hi.append(rec["final_val"])
        if lo:
            ax.set_ylim(min(lo) - 0.03, max(hi) + 0.25)
        ax.set_xlabel("step")
        ax.set_ylabel("validation cross-entropy (nats/char)")
        ax.set_title("model %s, %d ranks, seed 0: validation loss" % (model, ranks), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        name = "frontier_curves_%s.png" % model
        fig.savefig(os.path.join(folder, name), dpi=90, metadata={"Software": None})
        plt.close(fig)
        names.append(name)
    return names


def main(argv):
    def load(folder):
        with open(os.path.join(folder, "frontier.json")) as fh:
            data = json.load(fh)
        return data if data.get("runs") else None

    def collect_folder(inputs, out, meta):
        if len(inputs) != 1:
            raise SystemExit("frontier_report.py: --collect takes one folder")
        return "wrote %s (%d records)" % (out, collect(inputs[0], out, meta))

    return report_page.run(argv, __doc__.split("\n\n")[0], "frontier_report.py", "frontier.json", BEGIN, END,
                           load, section, lambda data, folder: plot(build(data["runs"]), folder), collect_folder,
                           heading=HEADING, doc="docs/quality/frontier.md")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
