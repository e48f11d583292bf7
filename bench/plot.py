#!/usr/bin/env python3
"""Figures of a bench/compare.sh run: one PNG per benchmark, written next to the raw files.

    /usr/bin/python3 bench/plot.py bench/raw/<stamp>    # compare.sh runs it after summarize.py

Needs matplotlib: apt-get install -y python3-matplotlib (into the Debian python3, hence
/usr/bin/python3 where another python3 comes first in PATH).

Every point is the median over the run's launches of each launch's median, as in
summary.md: the files are read by summarize.py's parser. Earlybird is drawn beside MPICH
and Open MPI; a point an implementation did not measure is left out, and a figure nobody
measured anything for is not written. Message sizes go on a log x axis (symmetric log when
0 B is among them); a benchmark measured at one size only is drawn as bars, its values
written on them. Figures whose values span more than a factor WIDE get a log y axis. The
floors measured in the directory are horizontal lines on the time figures: eb_floor.txt
(`earlybird-bench floor`, the half round trip of one shared cache line) and bench-ref's
`floor/cacheline proc one`, if its raw/floor/cacheline_proc_one.run<k>.txt files are
copied in; in the rma mode, twice the fastest 64 KiB memcpy. The coll mode draws time over
rank counts (earlybird at 2, 4 and 8 ranks, the anchors at 2), one panel per message size,
the points at one rank count spread sideways so that none hides another.

Files, by mode (recognized from the files the directory holds, as summarize.py does):
  default  latency.png, persistent_latency.png, bw.png, msgrate.png
  channel  channel_pingpong.png, channel_bw.png
  coll     coll_allreduce.png, coll_bcast.png, coll_barrier.png
  rma      rma_halo.png, rma_ops.png
  halo2d   halo2d.png
"""
import sys
from collections import namedtuple
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

sys.dont_write_bytecode = True  # importing summarize leaves no bench/__pycache__ behind
from summarize import IMPLS, bench_size_ranks, by_size, glob_records, medians, mode, records

LABEL = {"eb": "earlybird", "mpich": "MPICH", "openmpi": "Open MPI"}
COLOR = {"eb": "tab:blue", "mpich": "tab:orange", "openmpi": "tab:green"}
# Variants of one implementation (blocking / nonblocking / persistent, ...): line style
# and marker on line plots, hatch on bars.
VARIANT = [("-", "o", None), ("--", "s", "//"), (":", "^", "..")]
WIDE = 20  # values spanning more than this factor get a log y axis
US = "µs"

Series = namedtuple("Series", "label color variant points")


def size_label(n):
    """Bytes as 8 B, 64 KiB, 4 MiB."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def value_label(v):
    """Three significant digits, whole numbers from 100 up."""
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def log_y_if_wide(ax, values):
    """A log y axis, ticks at 1, 2 and 5 of each decade, when values span more than WIDE."""
    values = [v for v in values if v > 0]
    if values and max(values) / min(values) > WIDE:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: value_label(v)))
        ax.yaxis.set_minor_formatter(NullFormatter())


def lines(ax, series, xs_label, dodge=1.0):
    """One line per series over its points' x (on the log x axis the caller set);
    xs_label(x) names an x tick. dodge > 1 moves the series' points apart sideways, by
    that factor from one series to the next, so that points at one x do not hide each other."""
    xs = sorted({x for s in series for x in s.points})
    for i, s in enumerate(series):
        ls, marker, _ = VARIANT[s.variant]
        px = sorted(s.points)
        shift = dodge ** (i - (len(series) - 1) / 2)
        ax.plot([x * shift for x in px], [s.points[x] for x in px], label=s.label, color=s.color,
                linestyle=ls, marker=marker)
    ax.set_xticks(xs, [xs_label(x) for x in xs])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(True, alpha=0.3)


def bars(ax, groups, series):
    """Grouped bars: groups is [(key, tick label)], one bar per series in each group that
    the series has a point for, its value written above it; groups nobody has are left out."""
    groups = [g for g in groups if any(g[0] in s.points for s in series)]
    width = 0.8 / len(series)
    ax.set_axisbelow(True)
    ax.grid(True, axis="y", alpha=0.3)
    for i, s in enumerate(series):
        slots = [g for g, (key, _) in enumerate(groups) if key in s.points]
        values = [s.points[groups[g][0]] for g in slots]
        drawn = ax.bar([g - 0.4 + width * (i + 0.5) for g in slots], values, width, label=s.label,
                       color=s.color, hatch=VARIANT[s.variant][2], edgecolor="white")
        ax.bar_label(drawn, labels=[value_label(v) for v in values], fontsize=7)
    ax.set_xticks(range(len(groups)), [label for _, label in groups])
    ax.set_xlim(-0.6, len(groups) - 0.4)


def floor_lines(ax, floors):
    """Horizontal lines at floors, [(label, µs)]."""
    for (label, y), ls in zip(floors, ("--", ":")):
        ax.axhline(y, color="black", linestyle=ls, linewidth=1, label=f"{label}: {value_label(y)} {US}")


def over_sizes(ax, series, floors):
    """Series over message sizes: lines on a log x axis, or bars when all share one size."""
    sizes = sorted({x for s in series for x in s.points})
    if len(sizes) == 1:
        bars(ax, [(sizes[0], size_label(sizes[0]))], series)
    else:
        ax.set_xscale("symlog", linthresh=1) if 0 in sizes else ax.set_xscale("log")
        lines(ax, series, size_label)
    floor_lines(ax, floors)
    log_y_if_wide(ax, [v for s in series for v in s.points.values()] + [y for _, y in floors])
    ax.set_xlabel("message size")


def present(series):
    """The series that have points: a missing implementation is skipped, not drawn."""
    return [s for s in series if s.points]


def legend(axes):
    """One legend of every panel's series and lines, right of the last panel, where it
    hides no point."""
    found = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    axes[-1].legend(found.values(), found.keys(), loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)


def save(fig, out, name):
    fig.savefig(out / name, dpi=120)
    plt.close(fig)
    print(f"plot.py: {out / name}")


def single(out, name, title, ylabel, series, floors=()):
    """One figure of series over message sizes, unless no implementation measured it."""
    series = present(series)
    if not series:
        print(f"plot.py: no points for {name}, not drawn")
        return
    fig, ax = plt.subplots(figsize=(10, 4.8), layout="constrained")
    over_sizes(ax, series, list(floors))
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    legend([ax])
    save(fig, out, name)


def eb_series(out, bench, field="median_us"):
    """Earlybird's series of one benchmark (its file eb_{bench}.txt) over message sizes."""
    return Series(LABEL["eb"], COLOR["eb"], 0, by_size(out / f"eb_{bench}.txt", bench, field))


def anchors(out, bench, field="median_us"):
    """MPICH's and Open MPI's series of one bench-ref benchmark ({bench} and the file
    <impl>_{bench}.txt) over message sizes."""
    return [Series(LABEL[impl], COLOR[impl], 0, by_size(out / f"{impl}_{bench}.txt", bench, field))
            for impl in ("mpich", "openmpi")]


def cache_line_floors(out):
    """[(label, µs)]: the one-cache-line half round trips measured in out."""
    found = []
    eb = by_size(out / "eb_floor.txt", "floor").get(8)
    if eb is not None:
        found.append(("cache-line floor (earlybird-bench floor)", eb))
    ref = medians(glob_records(out, "cacheline_proc_one*.txt")).get(("cacheline_proc_one", 8))
    if ref is not None:
        found.append(("cache-line floor (bench-ref cacheline)", ref))
    return found


def plot_default(out):
    floors = cache_line_floors(out)
    for bench, ref, name, what in (("latency", "pingpong", "latency.png", "Send/Recv"),
                                   ("persistent-latency", "pingpong_persist", "persistent_latency.png",
                                    "persistent Send_init/Recv_init")):
        single(out, name, f"Ping-pong latency, {what}, 2 ranks", f"half round trip ({US})",
               [eb_series(out, bench)] + anchors(out, ref), floors)
    single(out, "bw.png", "Bandwidth, window of 64 Isend/Irecv, 2 ranks", "bandwidth (MB/s, 10⁶ B/s)",
           [eb_series(out, "bw", "mb_per_s")] + anchors(out, "bw", "mb_per_s"))
    single(out, "msgrate.png", "Message rate, window of 64 Isend/Irecv, 2 ranks (higher is better)",
           "messages per second (millions)",
           [eb_series(out, "msgrate", "mmsg_per_s")] + anchors(out, "msgrate", "mmsg_per_s"))


def plot_channel(out):
    chan = out / "eb_channel.txt"
    eb = Series("earlybird bound channel", COLOR["eb"], 0, by_size(chan, "channel_pingpong"))
    persist = [s._replace(label=f"{s.label} persistent") for s in anchors(out, "pingpong_persist")]
    single(out, "channel_pingpong.png", "Ping-pong latency: bound channels against persistent requests, 2 ranks",
           f"half round trip ({US})", [eb] + persist, cache_line_floors(out))
    eb = [Series("earlybird channel_bw (two copies)", COLOR["eb"], 0, by_size(chan, "channel_bw", "mb_per_s")),
          Series("earlybird channel_bw_inplace (one copy)", COLOR["eb"], 1,
                 by_size(chan, "channel_bw_inplace", "mb_per_s"))]
    windowed = [s._replace(label=f"{s.label} bw (window of 64)") for s in anchors(out, "bw", "mb_per_s")]
    single(out, "channel_bw.png", "Bandwidth: a bound channel (slack 8) against Isend/Irecv windows, 2 ranks",
           "bandwidth (MB/s, 10⁶ B/s)", eb + windowed)


COLL = [("allreduce", "Allreduce (sum of doubles)"), ("bcast", "Bcast from rank 0"), ("barrier", "Barrier")]
COLL_VARIANTS = [("", "blocking"), ("_nb", "nonblocking"), ("_persist", "persistent")]


def coll_series(points, op, size):
    """Each implementation's and variant's time over rank counts for one collective and
    size; points is {impl: {(bench, bytes, ranks): µs}}."""
    return present([Series(f"{LABEL[impl]} {how}", COLOR[impl], v,
                           {n: t for (b, s, n), t in points[impl].items() if b == op + suffix and s == size})
                    for impl in IMPLS for v, (suffix, how) in enumerate(COLL_VARIANTS)])


def plot_coll(out):
    points = {"eb": medians(glob_records(out, "eb_coll*.txt"), key=bench_size_ranks)}
    for impl in ("mpich", "openmpi"):
        points[impl] = medians(records(out / f"{impl}_coll.txt"), key=bench_size_ranks)
    for op, title in COLL:
        sizes = sorted({s for p in points.values() for (b, s, _) in p if b.split("_")[0] == op})
        if not sizes:
            print(f"plot.py: no points for coll_{op}.png, not drawn")
            continue
        fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes) + 2.5, 5), layout="constrained",
                                 squeeze=False)
        for ax, size in zip(axes[0], sizes):
            series = coll_series(points, op, size)
            ax.set_xscale("log", base=2)
            lines(ax, series, str, dodge=1.03)
            log_y_if_wide(ax, [v for s in series for v in s.points.values()])
            ax.set_title(f"message {size_label(size)}" if size else "")
            ax.set_xlabel("ranks (the points at one rank count are spread sideways)")
            ax.set_ylabel(f"time per operation ({US})")
        legend(axes[0])
        fig.suptitle(f"{title}: time per operation over rank counts")
        save(fig, out, f"coll_{op}.png")


HALO = [("rma_halo_fence", "fence"), ("rma_halo_pscw", "PSCW"), ("rma_halo_lock", "lock_all"),
        ("rma_halo_counter", "sync\ncounter"), ("rma_halo_counter_signal", "counter\n+ signal")]
OPS = [("rma_put_flush", "put + flush"), ("rma_fetch_and_op", "fetch_and_op")]


def impl_series(points):
    """One series per implementation that has points; points(impl) gives them."""
    return present([Series(LABEL[impl], COLOR[impl], 0, points(impl)) for impl in IMPLS])


def rma_halo(out, times):
    """The halo by each synchronization, one panel per halo size; times is
    {impl: {(bench, bytes): µs}}."""
    sizes = sorted({s for t in times.values() for (b, s) in t if b in dict(HALO)})
    if not sizes:
        print("plot.py: no points for rma_halo.png, not drawn")
        return
    copies = [t[("memcpy", 65536)] for t in times.values() if ("memcpy", 65536) in t]
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes) + 2.5, 4.8), layout="constrained",
                             squeeze=False)
    for ax, size in zip(axes[0], sizes):
        halo = impl_series(lambda i: {b: t for (b, s), t in times[i].items() if s == size and b in dict(HALO)})
        bars(ax, HALO, halo)
        floors = ([("copy floor, 2 × memcpy 64 KiB (fastest of all)", 2 * min(copies))]
                  if size == 65536 and copies else [])
        floor_lines(ax, floors)
        log_y_if_wide(ax, [v for s in halo for v in s.points.values()] + [y for _, y in floors])
        ax.set_title(f"{size_label(size)} per halo")
        ax.set_ylabel(f"time per halo exchange ({US})")
    legend(axes[0])
    fig.suptitle("One-sided 1-D ring halo (two puts per rank), 2 ranks, by synchronization")
    save(fig, out, "rma_halo.png")


def rma_ops(out, times, rates):
    """Put + flush and fetch_and_op times, and the accumulate rate; times and rates are
    {impl: {(bench, bytes): figure}}."""
    panels = [(impl_series(lambda i: {b: t for (b, _), t in times[i].items() if b in dict(OPS)}), OPS,
               f"time per operation ({US})", "8 B, passive target (lower is better)"),
              (impl_series(lambda i: {b: r for (b, _), r in rates[i].items() if b == "rma_acc_rate"}),
               [("rma_acc_rate", "accumulate")], "accumulates per second (millions)",
               "8 B accumulate rate (higher is better)")]
    panels = [p for p in panels if p[0]]
    if not panels:
        print("plot.py: no points for rma_ops.png, not drawn")
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 2, 4.5), layout="constrained",
                             squeeze=False)
    for ax, (series, groups, ylabel, title) in zip(axes[0], panels):
        bars(ax, groups, series)
        log_y_if_wide(ax, [v for s in series for v in s.points.values()])
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    legend(axes[0])
    fig.suptitle("One-sided single operations, 2 ranks")
    save(fig, out, "rma_ops.png")


def plot_rma(out):
    recs = {impl: records(out / f"{impl}_rma.txt") for impl in IMPLS}
    times = {impl: medians(rs) for impl, rs in recs.items()}
    rma_halo(out, times)
    rma_ops(out, times, {impl: medians(rs, "mmsg_per_s") for impl, rs in recs.items()})


def plot_halo2d(out):
    eb = out / "eb_halo2d.txt"
    series = [Series(f"earlybird {how}", COLOR["eb"], v, by_size(eb, bench))
              for v, (bench, how) in enumerate([("halo2d", "Isend/Irecv"), ("halo2d_fence", "put + fence"),
                                                ("halo2d_counter", "put + sync counter")])]
    series += [s._replace(label=f"{s.label} Isend/Irecv") for s in anchors(out, "halo2d")]
    single(out, "halo2d.png", "2-D halo exchange, 4 ranks on a 2 × 2 torus, four neighbours",
           f"time per exchange ({US})", series)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    {"default": plot_default, "channel": plot_channel, "coll": plot_coll, "rma": plot_rma,
     "halo2d": plot_halo2d}[mode(out)](out)
