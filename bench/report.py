#!/usr/bin/env python3
"""Turns the results of bench/run into one table and docs/performance.md.

Usage: report.py RESULTS.jsonl OUT.md   (machine facts come from BENCH_INFO_* variables)

Every figure comes from RESULTS; nothing is hard-coded but the thresholds of
the targets of issue 4, which are goals, not measurements.
"""

import json
import os
import sys

TARGETS = ["local", "tmpfs", "fuse", "native"]
# FUSE targets on chunk-engine NSDs (BENCH_NSD_TYPES), shown when run.
ENGINE_TARGETS = ["fuse-file", "fuse-dev"]
NAMES = {
    "local": "local disk",
    "tmpfs": "tmpfs",
    "fuse": "Weft FUSE",
    "native": "Weft native",
    "fuse-file": "Weft FUSE, file NSDs",
    "fuse-dev": "Weft FUSE, device NSDs",
}
SHORT = {"fuse": "FUSE", "native": "native", "fuse-file": "file", "fuse-dev": "device"}

# (test id, label, unit); unit picks the figure: MiB/s, IOPS or ops/s.
ROWS = [
    ("seq1-write", "seq write, 1 stream, 1M records, fsync", "MiB/s"),
    ("seq1-read", "seq read, 1 stream, cold", "MiB/s"),
    ("seq4-write", "seq write, 4 threads, one file, fsync", "MiB/s"),
    ("seq4-read", "seq read, 4 threads, one file, cold", "MiB/s"),
    ("rand-read", "4K random read, 4 threads, direct", "IOPS"),
    ("rand-write", "4K random write, 4 threads, direct, fsync", "IOPS"),
    ("ior-fpp-write", "IOR file-per-process write, 4 threads", "MiB/s"),
    ("ior-fpp-read", "IOR file-per-process read, cold", "MiB/s"),
    ("ior-shared-write", "IOR shared-file write, 4 threads", "MiB/s"),
    ("ior-shared-read", "IOR shared-file read, cold", "MiB/s"),
    ("meta-shared-dir-create", "create, shared dir, 4 threads", "ops/s"),
    ("meta-shared-dir-stat", "stat, shared dir", "ops/s"),
    ("meta-shared-dir-unlink", "unlink, shared dir", "ops/s"),
    ("meta-dir-per-thread-create", "create, dir per thread, 4 threads", "ops/s"),
    ("meta-dir-per-thread-stat", "stat, dir per thread", "ops/s"),
    ("meta-dir-per-thread-unlink", "unlink, dir per thread", "ops/s"),
    ("ior-hard-write", "IO500 ior-hard write, 2 ranks, 47,008 B records, one file, fsync", "MiB/s"),
    ("ior-hard-read", "IO500 ior-hard read, another rank's records, cold", "MiB/s"),
    ("mdtest-hard-write", "IO500 mdtest-hard write, 2 ranks, 3,901 B files, one dir", "ops/s"),
    ("mdtest-hard-stat", "IO500 mdtest-hard stat", "ops/s"),
    ("mdtest-hard-read", "IO500 mdtest-hard read", "ops/s"),
    ("mdtest-hard-delete", "IO500 mdtest-hard delete", "ops/s"),
]


def human(n):
    for shift, unit in ((40, "T"), (30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def size_label(n):
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def fmt(x):
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 0.01:
        return f"{x:.2f}"
    return f"{x:.2g}"


def load(path):
    """Records by (target, test), one per run, and all records in file order."""
    recs = {}
    order = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            res = r.get("result")
            if isinstance(res, list) and len(res) == 1 and "mib_per_sec" in res[0]:
                # ior-hard prints its phases as a list: one phase per test here.
                r["result"] = res[0]
            recs.setdefault((r["target"], r["test"]), []).append(r)
            order.append(r)
    return recs, order


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return None
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


class Figures:
    """The figure of each (target, test): the median over the runs that succeeded."""

    def __init__(self, recs):
        self.recs = recs

    def runs(self, target, test):
        return self.recs.get((target, test), [])

    def targets(self):
        """The four base targets, then the chunk-engine FUSE targets that ran."""
        ran = {t for (t, _) in self.recs}
        return TARGETS + [t for t in ENGINE_TARGETS if t in ran]

    def value(self, target, test, unit):
        """(figure, marks); the figure is None when not run, 'failed' when no run succeeded."""
        rs = self.runs(target, test)
        if not rs:
            return None, ""
        ok = [r["result"] for r in rs if "error" not in r]
        if not ok:
            return "failed", ""
        marks = ""
        if len(ok) < len(rs):
            marks += "ᶠ"
        if isinstance(ok[0], list):  # meta: one phase
            return median([res[0]["ops_per_sec"] for res in ok]), marks
        if any(res.get("stopped_early") for res in ok):
            marks += "ᵗ"
        if any("ignored" in n for res in ok for n in res.get("notes", [])):
            marks += "ⁱ"
        key = "iops" if unit == "IOPS" else "mib_per_sec"
        return median([res[key] for res in ok]), marks

    def sweep(self, target):
        """(size, threads) → rows of every successful run."""
        out = {}
        for r in self.runs(target, "sweep"):
            if "error" in r:
                continue
            for row in r["result"]:
                out.setdefault((row["size"], row["threads"]), []).append(row)
        return out

    def sweep_value(self, target, size, threads, phase):
        rows = self.sweep(target).get((size, threads))
        if not rows:
            return "failed" if self.runs(target, "sweep") else None
        if size >= 1 << 20:
            return median([row[f"{phase}_mib_per_sec"] for row in rows])
        return median(
            [row["files"] / row[f"{phase}_seconds"] for row in rows if row[f"{phase}_seconds"] > 0]
        )


def ratio(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
        return a / b
    return None


def pct(r):
    return "—" if r is None else f"{r * 100:.0f}%"


def table(fig):
    shown = fig.targets()
    weft = [t for t in shown if t not in ("local", "tmpfs")]
    head = ["test", "unit"] + [NAMES[t] for t in shown] + [f"{SHORT[t]}/local" for t in weft]
    lines = []

    def row(label, unit, vals, marks):
        cells = [fmt(v) + m for v, m in zip(vals, marks)]
        by = dict(zip(shown, vals))
        lines.append(
            [label, unit] + cells + [pct(ratio(by[t], by["local"])) for t in weft]
        )


    for test, label, unit in ROWS:
        got = [fig.value(t, test, unit) for t in shown]
        row(label, unit, [g[0] for g in got], [g[1] for g in got])
    sizes = sorted(
        {k for t in shown for k in fig.sweep(t).keys()},
        key=lambda k: (k[0], k[1]),
    )
    for size, threads in sizes:
        unit = "MiB/s" if size >= 1 << 20 else "files/s"
        for phase in ("write", "read"):
            vals = [fig.sweep_value(t, size, threads, phase) for t in shown]
            extra = " + fsync" if phase == "write" else ", cold"
            row(
                f"sweep {size_label(size)} files, {threads} thr, {phase}{extra}",
                unit,
                vals,
                [""] * len(shown),
            )
    return head, lines


def markdown(head, lines):
    out = ["| " + " | ".join(head) + " |"]
    out.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|")
    for l in lines:
        out.append("| " + " | ".join(l) + " |")
    return "\n".join(out)


def plain(head, lines):
    widths = [max(len(str(r[i])) for r in [head] + lines) for i in range(len(head))]
    out = []
    for r in [head] + lines:
        cells = [
            str(c).ljust(w) if i < 2 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(r, widths))
        ]
        out.append("  ".join(cells))
    return "\n".join(out)


def targets(fig, hwm_kib):
    """The targets of issue 4, checked against this run's figures."""
    out = []

    def check(what, got, goal, ok_fn, shown):
        if not isinstance(got, (int, float)) or not isinstance(goal, (int, float)):
            out.append((what, "not measured", shown(goal), "unknown"))
            return
        out.append((what, shown(got), shown(goal), "met" if ok_fn(got, goal) else "NOT met"))

    def v(t, test, unit="MiB/s"):
        return fig.value(t, test, unit)[0]

    def rel(t, test, share):
        got, base = v(t, test), v("local", test)
        r = ratio(got, base)
        check(
            f"{NAMES[t]} {test}: ≥ {share:.0%} of local disk",
            r,
            share,
            lambda a, b: a >= b,
            lambda x: pct(x) if isinstance(x, (int, float)) else "—",
        )

    rel("fuse", "seq1-write", 0.70)
    rel("fuse", "seq1-read", 0.70)
    rel("native", "seq1-write", 0.90)
    rel("native", "seq1-read", 0.90)
    for t in ("fuse", "native"):
        for phase in ("write", "read"):
            check(
                f"{NAMES[t]} seq {phase}: 4 threads ≥ 1 stream",
                v(t, f"seq4-{phase}"),
                v(t, f"seq1-{phase}"),
                lambda a, b: a >= b,
                lambda x: f"{fmt(x)} MiB/s" if isinstance(x, (int, float)) else "—",
            )
    r = ratio(v("fuse", "rand-read", "IOPS"), v("local", "rand-read", "IOPS"))
    check(
        "Weft FUSE 4K random read, direct, 4 threads: ≥ 25 % of local IOPS",
        r,
        0.25,
        lambda a, b: a >= b,
        lambda x: pct(x) if isinstance(x, (int, float)) else "—",
    )
    for phase, goal in (("create", 5000), ("stat", 20000), ("unlink", 5000)):
        for layout in ("shared-dir", "dir-per-thread"):
            check(
                f"Weft FUSE {phase}s/s ({layout})",
                v("fuse", f"meta-{layout}-{phase}", "ops/s"),
                goal,
                lambda a, b: a >= b,
                lambda x: f"{fmt(x)}/s" if isinstance(x, (int, float)) else "—",
            )
    # The chunk engine's targets, on each kind of engine NSD that ran.
    for t in [t for t in ENGINE_TARGETS if t in fig.targets()]:
        for size in (1 << 10, 10 << 10, 100 << 10, 1 << 20):
            for phase in ("write", "read"):
                for threads in (1, 4):
                    got = fig.sweep_value(t, size, threads, phase)
                    base = fig.sweep_value("local", size, threads, phase)
                    check(
                        f"{NAMES[t]} sweep {size_label(size)} files, {threads} thr, {phase}: ≥ 60 % of local",
                        ratio(got, base),
                        0.60,
                        lambda a, b: a >= b,
                        lambda x: pct(x) if isinstance(x, (int, float)) else "—",
                    )
        for test in ("rand-read", "rand-write"):
            check(
                f"{NAMES[t]} 4K {test}, direct, 4 threads: ≥ 60 % of local IOPS",
                ratio(v(t, test, "IOPS"), v("local", test, "IOPS")),
                0.60,
                lambda a, b: a >= b,
                lambda x: pct(x) if isinstance(x, (int, float)) else "—",
            )
        for test in ("seq1-write", "seq1-read", "seq4-write", "seq4-read"):
            check(
                f"{NAMES[t]} {test}: not lower than on directory NSDs (within 5 %)",
                ratio(v(t, test), v("fuse", test)),
                0.95,
                lambda a, b: a >= b,
                lambda x: pct(x) if isinstance(x, (int, float)) else "—",
            )
    hwm = f"{int(hwm_kib) / 1024:.0f} MiB" if hwm_kib and hwm_kib.isdigit() else "not measured"
    out.append(
        (
            "Daemon peak resident memory (VmHWM; servers + mount client)",
            hwm,
            "pagepool + fixed overhead",
            "report only",
        )
    )
    # The native client runs in the `weft perf` process: its peak is the
    # client's alone (pagepool 1 GiB, the default).
    peaks = [
        r["result"].get("peak_rss_kib", 0)
        for test in ("seq1-write", "seq1-read", "seq4-write", "seq4-read")
        for r in fig.runs("native", test)
        if "error" not in r and isinstance(r["result"], dict)
    ]
    peak = max(peaks, default=0)
    out.append(
        (
            "Native client peak resident memory (VmHWM of `weft perf --native`, 1 GiB pagepool, sequential tests)",
            f"{peak / 1024:.0f} MiB" if peak else "not measured",
            "≤ pagepool + fixed overhead",
            "report only",
        )
    )
    return out


def summary(r):
    if "error" in r:
        return f"FAILED: {r['error']}"
    res = r["result"]
    if r["test"] == "sweep":
        return None
    if isinstance(res, list):
        m = res[0]
        return (
            f"{m['ops_per_sec']:.1f} ops/s, {m['files']} files in {m['seconds']:.3f} s, "
            f"p50 {m['lat_p50_us']:.1f} us p99 {m['lat_p99_us']:.1f} us"
        )
    s = (
        f"{res['mib_per_sec']:.1f} MiB/s, {res['iops']:.1f} IOPS, {res['ops']} ops of "
        f"{human(res['record'])} in {res['seconds']:.3f} s, p50 {res['lat_p50_us']:.1f} us "
        f"p99 {res['lat_p99_us']:.1f} us, direct {'yes' if res['direct'] else 'no'}"
    )
    for n in res.get("notes", []):
        s += f"; {n}"
    return s


def figure(x):
    a = abs(x)
    if a >= 100:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    if a >= 0.001:
        return f"{x:.4f}"
    return f"{x:.2e}"


def sweep_lines(r):
    out = [
        f"{'size':>6} {'thr':>4} {'files':>6} {'write MiB/s':>11} {'read MiB/s':>11} "
        f"{'write us/file':>13} {'read us/file':>13} {'write ns/B':>11} {'read ns/B':>11}"
    ]
    for row in r["result"]:
        out.append(
            f"{human(row['size']):>6} {row['threads']:>4} {row['files']:>6} "
            f"{figure(row['write_mib_per_sec']):>11} {figure(row['read_mib_per_sec']):>11} "
            f"{row['write_us_per_file']:>13.1f} {row['read_us_per_file']:>13.1f} "
            f"{figure(row['write_ns_per_byte']):>11} {figure(row['read_ns_per_byte']):>11}"
        )
    return out


def main():
    results, out_path = sys.argv[1], sys.argv[2]
    env = os.environ.get
    recs, order = load(results)
    work = env("BENCH_INFO_WORK", "")
    if work:
        for r in order:
            r["cmd"] = r["cmd"].replace(work, "$WORK")
    fig = Figures(recs)
    head, lines = table(fig)
    print(plain(head, lines))
    print()
    checks = targets(fig, env("BENCH_INFO_UP_HWM_KIB", ""))
    for what, got, goal, verdict in checks:
        print(f"{verdict:>12}  {what}: {got} (target {goal})")

    scale = env("BENCH_INFO_SCALE", "full")
    repeat = int(env("BENCH_INFO_REPEAT", "1") or 1)
    up_lines = []
    try:
        with open(env("BENCH_INFO_UP_LOG", "")) as f:
            for l in f:
                if l.startswith("weft: "):
                    up_lines.append(l.rstrip().replace(work, "$WORK") if work else l.rstrip())
                if l.startswith("weft: ready"):
                    break
    except OSError:
        pass

    md = []
    md.append("# Performance")
    md.append("")
    md.append(
        "Written by `bench/run` — do not edit by hand; rerun it to refresh (the file is rewritten, "
        "not appended to). One run puts the local disk, tmpfs, the Weft FUSE mount of `weft up` "
        "and the Weft native client (no FUSE) side by side on the same machine."
    )
    md.append("")
    md.append(
        "Two builds side by side on the streaming tests (`bench/ab`), the bisection of the "
        "streaming regression found on 2026-12-07 (`bench/bisect`), its cause and its fix: "
        "[performance-streaming.md](performance-streaming.md)."
    )
    md.append("")
    engine = [t for t in ENGINE_TARGETS if t in fig.targets()]
    if engine:
        md.append(
            "The Weft FUSE mount also ran on a cluster of each other kind of NSD (`BENCH_NSD_TYPES`): "
            + "; ".join(
                {
                    "fuse-file": "*file NSDs* (`weft up --nsd-type file`: four files under the chunk engine)",
                    "fuse-dev": "*device NSDs* (`--nsd-type device=…`: four loop block devices over sparse "
                    "images on the same disk, `losetup --direct-io=on`, under the chunk engine)",
                }[t]
                for t in engine
            )
            + ". *Weft FUSE* is on directory NSDs. Each cluster runs alone: the others are stopped."
        )
        md.append("")
    if scale != "full":
        md.append(
            f"**Scale `{scale}`: every size of the matrix is divided by 16 (a quick check, not the "
            "full matrix). The figures below are not the reference figures of the full run.**"
        )
        md.append("")
    md.append("## Run")
    md.append("")
    md.append(f"- Date: {env('BENCH_INFO_DATE', '?')}; commit `{env('BENCH_INFO_COMMIT', '?')}`")
    md.append(
        f"- Scale: `{scale}`; {repeat} run(s) of the matrix"
        + (" (the table shows the median)" if repeat > 1 else "")
        + f", {env('BENCH_INFO_ELAPSED', '?')} s in all"
    )
    md.append(
        f"- Load average (1, 5, 15 min) at the start {env('BENCH_INFO_LOAD_START', '?')}, "
        f"at the end {env('BENCH_INFO_LOAD_END', '?')}: on a shared machine, other work "
        "running meanwhile moves the figures; compare targets within one run, test by test"
    )
    md.append(
        f"- Machine: {env('BENCH_INFO_NPROC', '?')} cores ({env('BENCH_INFO_CPU', '?')}), "
        f"{env('BENCH_INFO_MEM', '?')} memory, kernel {env('BENCH_INFO_KERNEL', '?')}"
    )
    md.append(f"- Disk: {env('BENCH_INFO_DISK', '?')}")
    md.append(f"- tmpfs: its own mount, size {env('BENCH_INFO_TMPFS', '?')}")
    if up_lines:
        md.append(
            "- Weft: `weft up` (release build, default settings) with its data directory on that "
            "disk; `$WORK` is the run's temporary directory there:"
        )
        md.append("")
        md.append("  ```")
        md.extend("  " + l for l in up_lines)
        md.append("  ```")
    md.append("")
    md.append("## Method")
    md.append("")
    md.append(
        "- Every test is one `weft perf` command (listed under *Raw results*); the same command runs "
        "on each target, with `--native --data DIR` added for the native client."
    )
    md.append(
        "- Cold reads: `weft perf read --drop-caches` runs `sync; echo 3 > /proc/sys/vm/drop_caches` "
        "before the clock starts; for the FUSE target `weft up` is restarted before each cold read "
        "so the client's pagepool is empty as well (as GPFS benchmarks remount). The native client "
        "is a new process for every test."
    )
    md.append(
        "- Random tests move the bytes of `-n` at random 4 KiB offsets over the whole `--file-size` "
        "file and stop at `--time-limit` if slower (the figure counts what was done, marked ᵗ). "
        "ⁱ: direct I/O requested and ignored by the target (a note in the raw result says why). "
        "ᶠ: some runs of the test failed (see *Raw results*)."
    )
    md.append(
        "- Order: each test group (seq 1 stream, seq 4 threads, random, IOR file-per-process, "
        "IOR shared, metadata, IO500 hard, sweep) runs on every target one after the other before the "
        "next group starts, so the figures side by side were taken close together in time."
    )
    md.append(
        "- IOR-like: 4 threads each move their 1/4 of `-n`, sequentially, either into a file each "
        "(`--file-per-thread`) or into their own segment of one shared file."
    )
    md.append(
        "- Metadata: mdtest-like, 4 threads, empty files; `create`, `stat` and `unlink` are "
        "separate commands on the same files."
    )
    md.append(
        "- IO500 hard phases (`weft perf ior-hard`, `weft perf mdtest-hard`), 2 ranks (threads): "
        "ior-hard writes 47,008-byte records of both ranks interleaved in one file and fsyncs, then "
        "each rank reads the other's records back after the caches are dropped; mdtest-hard "
        "creates 3,901-byte files in one directory, then stats, reads (3,901 bytes, as mdtest "
        "reads `-e` bytes: no read for the end of the file) and deletes them."
    )
    md.append(
        "- Sweep: each thread writes (create, write, fsync, close) then reads back its own files of "
        "each size; caches dropped in between. Rows under 1 MiB show files/s, larger ones MiB/s; "
        "µs per file and ns per byte are under *Raw results*."
    )
    md.append("- Ratios are Weft / local disk: above 100 % Weft is faster.")
    md.append("")
    md.append("## Results")
    md.append("")
    md.append(markdown(head, lines))
    md.append("")
    md.append("## Targets of issue 4")
    md.append("")
    md.append("| target | this run | goal | verdict |")
    md.append("|---|---:|---:|---|")
    for what, got, goal, verdict in checks:
        md.append(f"| {what} | {got} | {goal} | {verdict} |")
    md.append("")
    md.append("## Raw results")
    md.append("")
    for t in fig.targets():
        rs = [r for r in order if r["target"] == t]
        if not rs:
            continue
        md.append(f"### {NAMES[t]}")
        md.append("")
        md.append("```")
        for r in rs:
            run = f"[run {r.get('rep', 1)}] " if repeat > 1 else ""
            md.append(f"{run}{r['test']}: {r['cmd']}")
            s = summary(r)
            if s is not None:
                md.append(f"    {s}")
            elif "error" not in r:
                md.extend("    " + l for l in sweep_lines(r))
        md.append("```")
        md.append("")
    with open(out_path, "w") as f:
        f.write("\n".join(md))


if __name__ == "__main__":
    main()
