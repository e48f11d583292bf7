#!/usr/bin/env python3
"""Summarize a bench/compare.sh run: median over launches of each launch's median, for
earlybird and the two anchors, and earlybird's ratio to the better anchor.

    python3 bench/summarize.py bench/raw/<stamp>

bench/plot.py reads the same directories through `records`, `glob_records`, `medians`,
`by_size` and `mode`."""
import json, re, statistics, sys
from pathlib import Path

IMPLS = ("eb", "mpich", "openmpi")
PAIRS = [("pingpong", "latency", "us", False), ("pingpong_persist", "persistent-latency", "us", False),
         ("bw", "bw", "MB/s", True), ("msgrate", "msgrate", "Mmsg/s", True)]
FIELD = {"us": "median_us", "MB/s": "mb_per_s", "Mmsg/s": "mmsg_per_s"}
# bench-ref's RESULT metrics: the field of earlybird's JSON lines that holds the same
# figure, and the factor from the metric's unit to that field's.
METRICS = {"half_rtt_us": ("median_us", 1), "us_per_op": ("median_us", 1),
           "us_per_iter": ("median_us", 1), "half_rtt_ns": ("median_us", 1e-3),
           "MB_per_s": ("mb_per_s", 1), "Mmsg_per_s": ("mmsg_per_s", 1),
           "mmsg_per_s": ("mmsg_per_s", 1)}
RESULT = re.compile(r"RESULT bench=(\S+) size=(\d+) .*?metric=(\S+) median=([\d.e+-]+)"
                    r"(?:.*?check=(\S+))?")
HEADER = re.compile(r"# bench=.* nranks=(\d+)")


def records(path):
    """Every result line of one output file (all its launches) as a dict in the form of
    earlybird's JSON lines (bench, bytes, ranks, median_us, mb_per_s, mmsg_per_s, check,
    ...): earlybird's and bench/halo2d.c's JSON lines as printed, bench-ref's RESULT lines
    translated, their ranks from the launch's `# bench=... nranks=N` line. A missing file
    has none."""
    recs, ranks = [], None
    if not path.exists():
        return recs
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            recs.append(json.loads(line))
        elif m := HEADER.match(line):
            ranks = int(m[1])
        elif m := RESULT.match(line):
            field, scale = METRICS[m[3]]
            recs.append({"bench": m[1], "bytes": int(m[2]), "ranks": ranks,
                         field: float(m[4]) * scale, "check": m[5] or "ok"})
    return recs


def glob_records(out, pattern):
    """The records of every file of the directory out whose name matches pattern."""
    return [r for f in sorted(out.glob(pattern)) for r in records(f)]


def bench_size(r):
    return r["bench"], r["bytes"]


def medians(recs, field="median_us", key=bench_size):
    """{key(line): median of the lines' field}: the median over launches of each point;
    lines without the field are left out."""
    vals = {}
    for r in recs:
        if field in r:
            vals.setdefault(key(r), []).append(r[field])
    return {k: statistics.median(v) for k, v in vals.items()}


def by_size(path, bench, field="median_us"):
    """{bytes: median over launches} of one benchmark in one output file."""
    return {s: v for (b, s), v in medians(records(path), field).items() if b == bench}


def failed(r):
    return str(r.get("check", "ok")).lower() in ("fail", "false")


def mode(out):
    """The bench/compare.sh mode that wrote the directory out, from the files it holds."""
    if any(records(out / f"{impl}_halo2d.txt") for impl in IMPLS):
        return "halo2d"
    if (out / "eb_channel.txt").exists():
        return "channel"
    if any((out / f"{impl}_rma.txt").exists() for impl in IMPLS):
        return "rma"
    if glob_records(out, "eb_coll*.txt"):
        return "coll"
    return "default"


def halo2d(out):
    # Every side prints JSON lines (bench/halo2d.c for the anchors); earlybird's RMA
    # variants (halo2d_fence, halo2d_counter) have no anchor.
    halo = [medians(records(out / f"{impl}_halo2d.txt")) for impl in IMPLS]
    print("| benchmark | bytes | unit | earlybird | MPICH | Open MPI | earlybird / better anchor |")
    print("|---|---|---|---|---|---|---|")
    for bench, size in sorted(set().union(*halo)):
        e, m, o = (h.get((bench, size)) for h in halo)
        best = min([x for x in (m, o) if x is not None], default=None)
        ratio = f"{e / best:.2f}" if e is not None and best else "-"
        fmt = lambda x: "-" if x is None else f"{x:.2f}"
        print(f"| {bench} (4 ranks, per exchange) | {size} | us | {fmt(e)} | {fmt(m)} | {fmt(o)} | {ratio} |")


def channel(out):
    # Seed 000's bound channels against the anchors' persistent ping-pong (8 B) and
    # windowed bandwidth (64 KiB), and the floor of the same binary.
    fl = by_size(out / "eb_floor.txt", "floor").get(8)
    chan = records(out / "eb_channel.txt")
    rows = {**medians(chan), **medians(chan, "mb_per_s")}
    pp = [by_size(out / f"{i}_pingpong_persist.txt", "pingpong_persist").get(8) for i in ("mpich", "openmpi")]
    bw = [by_size(out / f"{i}_bw.txt", "bw", "mb_per_s").get(65536) for i in ("mpich", "openmpi")]
    if fl:
        print(f"floor (earlybird-bench floor, one shared line, half round trip): {fl*1000:.1f} ns\n")
    print("| benchmark | bytes | unit | earlybird | MPICH | Open MPI | earlybird / better anchor | earlybird / floor |")
    print("|---|---|---|---|---|---|---|---|")
    fmt = lambda x: "-" if x is None else (f"{x:.3f}" if x < 100 else f"{x:.0f}")
    for (name, size), e in sorted(rows.items()):
        if name == "channel_pingpong":
            a, unit, best = pp, "us", min([x for x in pp if x], default=None)
            fr = f"{e / fl:.2f}" if fl else "-"
        else:
            a, unit, best = bw, "MB/s", max([x for x in bw if x], default=None)
            fr = "-"
        ratio = f"{e / best:.2f}" if best else "-"
        print(f"| {name} | {size} | {unit} | {fmt(e)} | {fmt(a[0])} | {fmt(a[1])} | {ratio} | {fr} |")


def rma(out):
    # bench/rma.c (RESULT lines) against `earlybird-bench rma` (JSON lines: median_us, or
    # mmsg_per_s for the accumulate rate). Rates: higher is better.
    recs = {impl: records(out / f"{impl}_rma.txt") for impl in IMPLS}
    rate = {r["bench"] for rs in recs.values() for r in rs if "mmsg_per_s" in r}
    fails = [f"{'earlybird' if impl == 'eb' else impl} {r['bench']} {r['bytes']}"
             for impl, rs in recs.items() for r in rs if failed(r)]
    cols = {impl: {**medians(rs), **medians(rs, "mmsg_per_s")} for impl, rs in recs.items()}
    order = ["rma_halo_fence", "rma_halo_pscw", "rma_halo_lock", "rma_halo_counter",
             "rma_halo_counter_signal", "rma_put_flush", "rma_fetch_and_op", "rma_acc_rate", "memcpy"]
    keys = sorted(set().union(*cols.values()),
                  key=lambda k: (order.index(k[0]) if k[0] in order else len(order), k[0], k[1]))
    fmt = lambda x: "-" if x is None else (f"{x:.3f}" if x < 100 else f"{x:.1f}")
    print("ratio: earlybird / better anchor for times (us), better anchor / earlybird for rates "
          "(Mmsg/s), so below 1 always means earlybird is better.\n")
    print("| benchmark | bytes | unit | earlybird | MPICH | Open MPI | ratio (<1: earlybird better) |")
    print("|---|---|---|---|---|---|---|")
    for k in keys:
        e, m, o = (cols[i].get(k) for i in IMPLS)
        a = [x for x in (m, o) if x is not None]
        if k[0] in rate:
            unit, best = "Mmsg/s", max(a, default=None)
            ratio = f"{best / e:.2f}" if best and e else "-"
        else:
            unit, best = ("us/iter" if k[0].startswith("rma_halo") else "us/op"), min(a, default=None)
            ratio = f"{e / best:.2f}" if best and e is not None else "-"
        print(f"| {k[0]} | {k[1]} | {unit} | {fmt(e)} | {fmt(m)} | {fmt(o)} | {ratio} |")
    print()
    for impl, label in zip(IMPLS, ("earlybird", "MPICH", "Open MPI")):
        f, c = cols[impl].get(("rma_halo_fence", 65536)), cols[impl].get(("memcpy", 65536))
        r = f"{f / (2 * c):.2f}" if f is not None and c else "-"
        goal = " (goal: at most 1.2)" if impl == "eb" else ""
        print(f"floor, {label}: rma_halo_fence 64 KiB / (2 x memcpy 64 KiB) = {r}{goal}")
    # Seed 001's goals: the counter halo against the fence halos and the copy floor.
    e = cols["eb"]
    ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b else "-"
    c8, f8 = e.get(("rma_halo_counter", 8)), e.get(("rma_halo_fence", 8))
    best = min((x for x in (cols[i].get(("rma_halo_fence", 8)) for i in ("mpich", "openmpi"))
                if x is not None), default=None)
    print(f"sync counters, 8 B: rma_halo_counter / better anchor's rma_halo_fence = "
          f"{ratio(c8, best)} (goal: at most 0.4); / earlybird's rma_halo_fence = "
          f"{ratio(c8, f8)} (goal: at most 0.6)")
    c64, m64 = e.get(("rma_halo_counter", 65536)), e.get(("memcpy", 65536))
    print(f"sync counters, 64 KiB: rma_halo_counter / (2 x memcpy 64 KiB) = "
          f"{ratio(c64, 2 * m64 if m64 else None)} (goal: at most 1.1)")
    if fails:
        print("\ncheck FAILED: " + ", ".join(sorted(set(fails))))


def bench_size_ranks(r):
    return r["bench"], r["bytes"], r["ranks"]


def coll(out):
    # Earlybird at 2, 4 and 8 ranks; the anchors (bench-ref coll.c) at 2.
    ebc = medians(glob_records(out, "eb_coll*.txt"), key=bench_size_ranks)
    refs = {impl: medians(records(out / f"{impl}_coll.txt")) for impl in ("mpich", "openmpi")}
    print("| collective | bytes | ranks | earlybird us/op | MPICH | Open MPI | earlybird / better anchor |")
    print("|---|---|---|---|---|---|---|")
    for (bench, size, ranks) in sorted(ebc, key=lambda k: (k[2], k[0].split("_")[0], k[0], k[1])):
        e = ebc[(bench, size, ranks)]
        # Nonblocking figures compare with the anchors' blocking ones (bench-ref has none).
        rb = bench.replace("_nb", "")
        m, o = (refs[i].get((rb, size)) if ranks == 2 else None for i in ("mpich", "openmpi"))
        best = min([x for x in (m, o) if x is not None], default=None)
        ratio = f"{e / best:.2f}" if best else "-"
        fmt = lambda x: "-" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")
        print(f"| {bench} | {size} | {ranks} | {fmt(e)} | {fmt(m)} | {fmt(o)} | {ratio} |")


def default(out):
    # Ping-pong, persistent ping-pong, bandwidth and message rate, with the floor.
    floor = by_size(out / "eb_floor.txt", "floor")
    if floor:
        print(f"floor (earlybird-bench floor, one shared line, half round trip): {floor[8]*1000:.1f} ns\n")
    print("| benchmark | bytes | unit | earlybird | MPICH | Open MPI | earlybird / better anchor |")
    print("|---|---|---|---|---|---|---|")
    for ref_name, eb_name, unit, higher in PAIRS:
        e = by_size(out / f"eb_{eb_name}.txt", eb_name, FIELD[unit])
        m = by_size(out / f"mpich_{ref_name}.txt", ref_name, FIELD[unit])
        o = by_size(out / f"openmpi_{ref_name}.txt", ref_name, FIELD[unit])
        for size in sorted(e):
            a = [x for x in (m.get(size), o.get(size)) if x is not None]
            best = (max(a) if higher else min(a)) if a else None
            ratio = f"{e[size] / best:.2f}" if best else "-"
            fmt = lambda x: "-" if x is None else (f"{x:.3f}" if x < 100 else f"{x:.0f}")
            print(f"| {eb_name} | {size} | {unit} | {fmt(e[size])} | {fmt(m.get(size))} | {fmt(o.get(size))} | {ratio} |")


if __name__ == "__main__":
    out = Path(sys.argv[1])
    {"halo2d": halo2d, "channel": channel, "rma": rma, "coll": coll, "default": default}[mode(out)](out)
