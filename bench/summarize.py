#!/usr/bin/env python3
"""Summarize a bench/compare.sh run: median over launches of each launch's median, for
earlybird and the two anchors, and earlybird's ratio to the better anchor."""
import json, re, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
PAIRS = [("pingpong", "latency", "us", False), ("pingpong_persist", "persistent-latency", "us", False),
         ("bw", "bw", "MB/s", True), ("msgrate", "msgrate", "Mmsg/s", True)]

def ref(path):
    vals = {}
    if not path.exists():
        return vals
    for line in path.read_text().splitlines():
        m = re.match(r"RESULT bench=\S+ size=(\d+) .*? median=([\d.e+-]+)", line)
        if m:
            vals.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    return {k: statistics.median(v) for k, v in vals.items()}

def eb(path, key):
    vals = {}
    if not path.exists():
        return vals
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            vals.setdefault(j["bytes"], []).append(j[key])
    return {k: statistics.median(v) for k, v in vals.items()}

halo = [eb(out / f"{impl}_halo2d.txt", "median_us") for impl in ("eb", "mpich", "openmpi")]
if any(halo):
    # bench/compare.sh halo2d: every side prints JSON lines (bench/halo2d.c for the anchors).
    print("| benchmark | bytes | unit | earlybird | MPICH | Open MPI | earlybird / better anchor |")
    print("|---|---|---|---|---|---|---|")
    for size in sorted(set().union(*halo)):
        e, m, o = (h.get(size) for h in halo)
        best = min([x for x in (m, o) if x is not None], default=None)
        ratio = f"{e / best:.2f}" if e is not None and best else "-"
        fmt = lambda x: "-" if x is None else f"{x:.2f}"
        print(f"| halo2d (4 ranks, per exchange) | {size} | us | {fmt(e)} | {fmt(m)} | {fmt(o)} | {ratio} |")
    sys.exit(0)

chan = out / "eb_channel.txt"
if chan.exists():
    # bench/compare.sh channel: seed 000's bound channels against the anchors' persistent
    # ping-pong (8 B) and windowed bandwidth (64 KiB), and the floor of the same binary.
    fl = eb(out / "eb_floor.txt", "median_us").get(8)
    rows = {}
    for line in chan.read_text().splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            key = "mb_per_s" if "mb_per_s" in j else "median_us"
            rows.setdefault((j["bench"], j["bytes"]), []).append(j[key])
    pp = [ref(out / f"{i}_pingpong_persist.txt").get(8) for i in ("mpich", "openmpi")]
    bw = [ref(out / f"{i}_bw.txt").get(65536) for i in ("mpich", "openmpi")]
    if fl:
        print(f"floor (earlybird-bench floor, one shared line, half round trip): {fl*1000:.1f} ns\n")
    print("| benchmark | bytes | unit | earlybird | MPICH | Open MPI | earlybird / better anchor | earlybird / floor |")
    print("|---|---|---|---|---|---|---|---|")
    fmt = lambda x: "-" if x is None else (f"{x:.3f}" if x < 100 else f"{x:.0f}")
    for (name, size), v in sorted(rows.items()):
        e = statistics.median(v)
        if name == "channel_pingpong":
            a, unit, best = pp, "us", min([x for x in pp if x], default=None)
            fr = f"{e / fl:.2f}" if fl else "-"
        else:
            a, unit, best = bw, "MB/s", max([x for x in bw if x], default=None)
            fr = "-"
        ratio = f"{e / best:.2f}" if best else "-"
        print(f"| {name} | {size} | {unit} | {fmt(e)} | {fmt(a[0])} | {fmt(a[1])} | {ratio} | {fr} |")
    sys.exit(0)

def by_bench(path, parse):
    """{(bench, bytes, ranks): [per-launch medians]} of one output file."""
    vals = {}
    if path.exists():
        for line in path.read_text().splitlines():
            k = parse(line)
            if k:
                vals.setdefault(k[0], []).append(k[1])
    return vals

def eb_line(line):
    if line.startswith("{"):
        j = json.loads(line)
        return (j["bench"], j["bytes"], j["ranks"]), j["median_us"]

def ref_line(line):
    m = re.match(r"RESULT bench=(\S+) size=(\d+) .*? median=([\d.e+-]+)", line)
    if m:
        return (m.group(1), int(m.group(2))), float(m.group(3))

rma_files = {impl: out / f"{impl}_rma.txt" for impl in ("eb", "mpich", "openmpi")}
if any(f.exists() for f in rma_files.values()):
    # bench/compare.sh rma: bench/rma.c (RESULT lines) against `earlybird-bench rma` (JSON
    # lines: median_us, or mmsg_per_s for the accumulate rate). Rates: higher is better.
    rate = set()  # benches whose figure is a rate
    fails = []

    def rma_eb(line):
        if line.startswith("{"):
            j = json.loads(line)
            if str(j.get("check", "ok")).lower() in ("fail", "false"):
                fails.append(f"earlybird {j['bench']} {j['bytes']}")
            if "mmsg_per_s" in j:
                rate.add(j["bench"])
                return (j["bench"], j["bytes"]), j["mmsg_per_s"]
            return (j["bench"], j["bytes"]), j["median_us"]

    def rma_ref(impl):
        def parse(line):
            m = re.match(r"RESULT bench=(\S+) size=(\d+) .*?metric=(\S+) median=([\d.e+-]+)"
                         r"(?:.*?check=(\S+))?", line)
            if m:
                if m.group(3) == "mmsg_per_s":
                    rate.add(m.group(1))
                if m.group(5) and m.group(5) != "ok":
                    fails.append(f"{impl} {m.group(1)} {m.group(2)}")
                return (m.group(1), int(m.group(2))), float(m.group(4))
        return parse

    med = lambda v: statistics.median(v) if v else None
    cols = {"eb": by_bench(rma_files["eb"], rma_eb)}
    for impl in ("mpich", "openmpi"):
        cols[impl] = by_bench(rma_files[impl], rma_ref(impl))
    cols = {impl: {k: med(v) for k, v in c.items()} for impl, c in cols.items()}
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
        e, m, o = (cols[i].get(k) for i in ("eb", "mpich", "openmpi"))
        a = [x for x in (m, o) if x is not None]
        if k[0] in rate:
            unit, best = "Mmsg/s", max(a, default=None)
            ratio = f"{best / e:.2f}" if best and e else "-"
        else:
            unit, best = ("us/iter" if k[0].startswith("rma_halo") else "us/op"), min(a, default=None)
            ratio = f"{e / best:.2f}" if best and e is not None else "-"
        print(f"| {k[0]} | {k[1]} | {unit} | {fmt(e)} | {fmt(m)} | {fmt(o)} | {ratio} |")
    print()
    for impl, label in (("eb", "earlybird"), ("mpich", "MPICH"), ("openmpi", "Open MPI")):
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
    sys.exit(0)

ebc = {}
for f in sorted(out.glob("eb_coll*.txt")):
    for k, v in by_bench(f, eb_line).items():
        ebc.setdefault(k, []).extend(v)
if ebc:
    # bench/compare.sh coll: earlybird at 2, 4 and 8 ranks; anchors (bench-ref coll.c) at 2.
    refs = {impl: by_bench(out / f"{impl}_coll.txt", ref_line) for impl in ("mpich", "openmpi")}
    med = lambda v: statistics.median(v) if v else None
    print("| collective | bytes | ranks | earlybird us/op | MPICH | Open MPI | earlybird / better anchor |")
    print("|---|---|---|---|---|---|---|")
    for (bench, size, ranks) in sorted(ebc, key=lambda k: (k[2], k[0].split("_")[0], k[0], k[1])):
        e = med(ebc[(bench, size, ranks)])
        # Nonblocking figures compare with the anchors' blocking ones (bench-ref has none).
        rb = bench.replace("_nb", "")
        m, o = (med(refs[i].get((rb, size), [])) if ranks == 2 else None for i in ("mpich", "openmpi"))
        best = min([x for x in (m, o) if x is not None], default=None)
        ratio = f"{e / best:.2f}" if best else "-"
        fmt = lambda x: "-" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")
        print(f"| {bench} | {size} | {ranks} | {fmt(e)} | {fmt(m)} | {fmt(o)} | {ratio} |")
    sys.exit(0)

floor = eb(out / "eb_floor.txt", "median_us")
if floor:
    print(f"floor (earlybird-bench floor, one shared line, half round trip): {floor[8]*1000:.1f} ns\n")
print("| benchmark | bytes | unit | earlybird | MPICH | Open MPI | earlybird / better anchor |")
print("|---|---|---|---|---|---|---|")
for ref_name, eb_name, unit, higher in PAIRS:
    key = {"us": "median_us", "MB/s": "mb_per_s", "Mmsg/s": "mmsg_per_s"}[unit]
    e = eb(out / f"eb_{eb_name}.txt", key)
    m = ref(out / f"mpich_{ref_name}.txt")
    o = ref(out / f"openmpi_{ref_name}.txt")
    for size in sorted(e):
        a = [x for x in (m.get(size), o.get(size)) if x is not None]
        best = (max(a) if higher else min(a)) if a else None
        ratio = f"{e[size] / best:.2f}" if best else "-"
        fmt = lambda x: "-" if x is None else (f"{x:.3f}" if x < 100 else f"{x:.0f}")
        print(f"| {eb_name} | {size} | {unit} | {fmt(e[size])} | {fmt(m.get(size))} | {fmt(o.get(size))} | {ratio} |")
