#!/usr/bin/python3
"""Plots and tabulates the training-quality benchmark (scripts/quality.sh).

    scripts/quality/quality_report.py [--dir docs/quality] [--doc docs/quality/results.md]

Reads docs/quality/runs.json (the records of scripts/quality/train_lm.py,
gathered by scripts/quality.sh) and, when present, docs/quality/cluster.json
(the per-step times on the emulated cluster), writes
  docs/quality/loss_<N>ranks.png   training and validation loss per row
and rewrites the part of docs/quality/results.md between
  <!-- BEGIN quality-results --> and <!-- END quality-results -->
(text outside the markers is never touched). Run again on the committed JSON
it rewrites the section byte for byte.

    scripts/quality/quality_report.py --collect <record.json...> --out docs/quality/runs.json [--meta k=v ...]

gathers records into one file first, and

    scripts/quality/quality_report.py --check [--dir docs/quality] [--doc docs/quality/results.md]

draws nothing and changes nothing: exit status 1 when the page's section is
not, byte for byte, what the committed JSON gives (CTest: docs_quality).
"""

import json
import os
import sys

import report_page

BEGIN = "<!-- BEGIN quality-results -->"
END = "<!-- END quality-results -->"
ORDER = ("ddp", "none", "topk", "topk-noef", "sketch", "sketch-noef", "lowrank", "lowrank-noef", "powersgd")
TARGET_GAP = 1.0       # % final validation loss above the uncompressed run
TARGET_RATIO = 50.0    # x fewer gradient bytes
TARGET_NONE = 5.0      # % NONE hook's step time above DDP's default hook
LABEL = {
    "ddp": "uncompressed: DDP's default hook (gloo allreduce)",
    "none": "cc_coll NONE (dense average)",
    "topk": "cc_coll TOPK, EF", "topk-noef": "cc_coll TOPK, no EF",
    "sketch": "cc_coll SKETCH, EF", "sketch-noef": "cc_coll SKETCH, no EF",
    "lowrank": "cc_coll LOWRANK, EF", "lowrank-noef": "cc_coll LOWRANK, no EF",
    "powersgd": "PyTorch powerSGD_hook (gloo), EF",
}


def setting(rec):
    s = rec["settings"]
    row = rec["row"]
    if row.startswith("topk"):
        return "density %g, gradients >= %d elements of 2+ dims" % (s["density"], s["min_elements"])
    if row.startswith("sketch"):
        return "density %g, the whole bucket" % s["density"]
    if row.startswith("lowrank"):
        return "rank %d, gradients >= %d elements of 2+ dims" % (s["rank"], s["min_elements"])
    if row == "powersgd":
        return "rank %d, matrices its rule picks" % s["rank"]
    return "dense"


def collect(paths, out, meta):
    runs = []
    for p in paths:
        with open(p) as fh:
            runs.append(json.load(fh))
    doc = {"meta": dict(kv.split("=", 1) for kv in meta), "runs": runs}
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")


def by_ranks(runs):
    """{ranks: {label: record}}, each group's labels in table order."""
    groups = {}
    for r in sorted(runs, key=lambda r: (ORDER.index(r["row"]), r.get("label", r["row"]) != r["row"],
                                         r.get("label", r["row"]))):
        groups.setdefault(r["ranks"], {})[r.get("label", r["row"])] = r
    return groups


def label_of(r):
    """The table's name of a record: LABEL[row], plus its own label where
    that is not the row (the extra settings of scripts/quality.sh's
    CC_Q_SWEEP)."""
    lab = r.get("label", r["row"])
    if lab == r["row"]:
        return LABEL[r["row"]]
    if lab.startswith(r["row"] + ", "):
        return LABEL[r["row"]] + lab[len(r["row"]):]
    return LABEL[r["row"]] + " (%s)" % lab


def smooth(xs, w):
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x
        if i >= w:
            acc -= xs[i - w]
        out.append(acc / min(i + 1, w))
    return out


def plot(groups, folder):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = []
    for ranks, rows in sorted(groups.items()):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
        colors = plt.cm.tab20.colors
        for i, (lab, r) in enumerate(rows.items()):
            style = "--" if r["row"].endswith("-noef") else (":" if lab != r["row"] else "-")
            c = colors[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20]
            ax1.plot(smooth(r["train_loss"], 20), style, color=c, label=lab, linewidth=1.2)
            steps, vals = zip(*r["val_loss"])
            ax2.plot(steps, vals, style, color=c, marker=".", label=lab, linewidth=1.2)
        ax1.set_title("training loss (mean over ranks, 20-step moving average)")
        ax2.set_title("validation loss")
        for ax in (ax1, ax2):
            ax.set_xlabel("step")
            ax.set_ylabel("cross-entropy (nats/char)")
            ax.grid(alpha=0.3)
        lo = min(min(v for _, v in r["val_loss"]) for r in rows.values())
        hi = max(r["final_val"] for r in rows.values())
        ax2.set_ylim(lo - 0.05, hi + 0.6)
        lo = min(min(r["train_loss"]) for r in rows.values())
        hi = max(r["final_train"] for r in rows.values())
        ax1.set_ylim(lo - 0.05, hi + 0.6)
        ax2.legend(fontsize=8)
        fig.suptitle("char-level transformer, %d data-parallel ranks" % ranks)
        fig.tight_layout()
        name = "loss_%dranks.png" % ranks
        fig.savefig(os.path.join(folder, name), dpi=90, metadata={"Software": None})
        plt.close(fig)
        names.append(name)
    return names


def gap(rec, base):
    return 100.0 * (rec["final_val"] - base["final_val"]) / base["final_val"]


def section(data, cluster, folder_rel):
    meta = data["meta"]
    groups = by_ranks(data["runs"])
    any_run = data["runs"][0]
    s = any_run["settings"]
    c = any_run["corpus"]
    out = [BEGIN, ""]
    out.append("Generated by `scripts/quality.sh` (the command: `%s`) at commit %s on %s; %d CPUs, "
               "torch %s, Python %s. Model: %d layers, d_model %d, %d heads, context %d, %d parameters; "
               "%d steps of AdamW (peak lr %g, %d warm-up steps, cosine to lr/10), global batch %d sequences; "
               "compressing hooks dense for the first %d steps. Corpus: %d characters (vocabulary %d, sha256 %s...) "
               "of %s; the last 10%% of every document is the validation text."
               % (meta.get("command", "scripts/quality.sh"), meta.get("commit", "?"), meta.get("date", "?"),
                  any_run["cpus"], any_run["torch"], any_run["python"], s["layers"], s["dmodel"], s["heads"],
                  s["ctx"], any_run["params"], s["steps"], s["lr"], s["warmup"], s["batch"], s["start_iter"],
                  c["characters"], c["vocab"], c["sha256"][:12], s["corpus"]))
    out.append("")
    verdicts = []
    for ranks, rows in sorted(groups.items()):
        base = rows.get("ddp")
        out.append("### %d ranks" % ranks)
        out.append("")
        out.append("| row | settings | final train loss | final val loss | best val loss (step) | val gap "
                   "| gradient bytes/step | fewer bytes | over the run | s/step | load | replicas bit-identical |")
        out.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
        for lab, r in rows.items():
            g = "%+.2f%%" % gap(r, base) if base else "n/a"
            best_step, best = min(r["val_loss"], key=lambda sv: sv[1])
            out.append("| %s | %s | %.4f | %.4f | %.4f (%d) | %s | %d | %.1fx | %.1fx | %.3f | %.2f → %.2f | %s |" % (
                label_of(r), setting(r), r["final_train"], r["final_val"], best, best_step, g,
                round(r["steady_bytes_per_step"]),
                r["ratio_steady"], r["ratio_run"], r["sec_per_step_median"], r["load_before"][0],
                r["load_after"][0], "yes" if r["identical"] else "**no**"))
        out.append("")
        out.append("![loss curves, %d ranks](%s/loss_%dranks.png)" % (ranks, folder_rel, ranks))
        out.append("")
        if base:
            met = [lab for lab, r in rows.items() if lab != "ddp" and r["ratio_steady"] >= TARGET_RATIO
                   and gap(r, base) <= TARGET_GAP]
            verdicts.append("- %d ranks, ≤ %g%% validation gap at ≥ %gx fewer bytes per step: %s." % (
                ranks, TARGET_GAP, TARGET_RATIO,
                ("met by " + ", ".join(met)) if met else "**not met** by any row"))
            for m in ("topk", "sketch", "lowrank"):
                if m in rows and m + "-noef" in rows:
                    a, b = gap(rows[m], base), gap(rows[m + "-noef"], base)
                    verdicts.append("- %d ranks, %s: gap %+.2f%% with error feedback, %+.2f%% without (%s)." % (
                        ranks, m, a, b, "EF helps" if b > a else "**EF does not help here**"))
            if "none" in rows:
                same = rows["none"]["digests"][0] == base["digests"][0]
                verdicts.append("- %d ranks, NONE through the hook ends with parameters %s." % (
                    ranks, "bit-identical to DDP's default hook's" if same else
                    "not bit-identical to DDP's default hook's (their sums add in other orders: docs/pytorch.md)"))
            bad = [lab for lab, r in rows.items() if not r["identical"]]
            verdicts.append("- %d ranks, replicas bit-identical: %s." % (
                ranks, "every row" if not bad else "**not for " + ", ".join(sorted(bad)) + "**"))
    if cluster:
        out.append("### Step time on the emulated cluster")
        out.append("")
        cm = cluster["meta"]
        out.append("`%s`: %s hosts at %s, %s steps per run, the rows run in turn %s times (medians of the "
                   "per-run median step times; a step's time is its slowest rank's). Load average %s before, %s after."
                   % (cm.get("command", "?"), cm.get("hosts", "?"), cm.get("rate", "?"), cm.get("steps", "?"),
                      cm.get("repeats", "?"), cm.get("load_before", "?"), cm.get("load_after", "?")))
        out.append("")
        times, recs = {}, {}
        for r in cluster["runs"]:
            lab = r.get("label", r["row"])
            times.setdefault(lab, []).append(r["sec_per_step_median"])
            recs[lab] = r
        med = {lab: sorted(v)[len(v) // 2] for lab, v in times.items()}
        out.append("| row | s/step (median) | each run | vs DDP default | gradient bytes/step |")
        out.append("| --- | ---: | --- | ---: | ---: |")
        for lab in sorted(med, key=lambda lab: (ORDER.index(recs[lab]["row"]), lab != recs[lab]["row"], lab)):
            rel = "%.2fx" % (med[lab] / med["ddp"]) if "ddp" in med else "n/a"
            out.append("| %s | %.4f | %s | %s | %d |" % (label_of(recs[lab]), med[lab],
                                                         " ".join("%.4f" % t for t in times[lab]), rel,
                                                         round(recs[lab]["steady_bytes_per_step"])))
        out.append("")
        if "lowrank" in med and "powersgd" in med:
            verdicts.append("- LOWRANK hook vs powerSGD_hook per step on the emulated cluster: %.4f s vs %.4f s "
                            "(%s)." % (med["lowrank"], med["powersgd"],
                                       "met: faster" if med["lowrank"] < med["powersgd"] else "**not met**"))
        for lab in sorted(lab for lab in med if recs[lab]["row"] == "none"):
            if "ddp" in med:
                over = 100.0 * (med[lab] / med["ddp"] - 1)
                verdicts.append("- NONE hook%s vs DDP's default hook per step on the emulated cluster: %+.1f%% (%s)."
                                % (label_of(recs[lab])[len(LABEL["none"]):], over,
                                   "met: within %g%%" % TARGET_NONE if over <= TARGET_NONE else "**not met**"))
    out.append("### Targets")
    out.append("")
    out.extend(verdicts)
    out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def main(argv):
    def load(folder):
        with open(os.path.join(folder, "runs.json")) as fh:
            data = json.load(fh)
        cpath = os.path.join(folder, "cluster.json")
        if os.path.exists(cpath):
            with open(cpath) as fh:
                data["cluster"] = json.load(fh)
        return data

    def collect_paths(paths, out, meta):
        collect(paths, out, meta)
        return "wrote %s (%d records)" % (out, len(paths))

    return report_page.run(argv, __doc__.split("\n\n")[0], "quality_report.py", "runs.json", BEGIN, END, load,
                           lambda data, rel: section(data, data.get("cluster"), rel),
                           lambda data, folder: plot(by_ranks(data["runs"]), folder), collect_paths,
                           doc="docs/quality/results.md")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
