"""bench/runner/main.py - the command line of bench/run.py and the run from end
to end: the options, the tests chosen (--only), the run, the report
assembled from every section (report.txt, with the summary table first),
the CSVs, timings.json, the plots, and the terminal's summary.
"""

import argparse
import csv
import datetime
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time

from .allocators import DEFAULT_OWNERS, OWNER_VAR, REPO, find_allocators
from .debugcost import DEBUG_HEADER, debug_section, debug_summary, debug_table
from .defrag import DEFRAG_HEADER, defrag_section, defrag_target
from .execute import LOG
from .fronts import FRONTS_HEADER, discover_fronts, front_section, front_summary
from .instructions import instruction_counts, instruction_lines
from .loop import fmt_secs, run_suite
from .plots import plot
from .programs_section import (PROGRAMS_HEADER, program_mismatches, program_summary_rows,
                               programs_report, programs_section, write_program_series)
from .suite import MODES, build_tests
from .tables import cell, ratio, summary, table, wrap
from .targets import SUMMARY_WIDTH, summary_rows, summary_table, targets


def write_csvs(out, tests, columns, samples):
    """samples.csv (every number of every run) and results.csv (medians and
    ratios) in `out`."""
    with open(os.path.join(out, "samples.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "case", "allocator", "round", "key", "value"])
        for test in tests:
            for case in test.cases:
                for c in columns[test.key]:
                    for i, res in enumerate(samples.get((test.key, case.label, c.name), [])):
                        for k, v in res.items():
                            w.writerow([test.key, case.label, c.name, i + 1, k, v])
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "metric", "unit", "case", "x", "allocator", "median", "min", "max",
                    "rounds", "qslab_ratio"])
        for test in tests:
            cols = columns[test.key]
            for m in test.metrics:
                for case in test.cases:
                    row = [cell(samples, test, case, c, m) for c in cols]
                    for c, x in zip(cols, row):
                        if x is None:
                            continue
                        r = ratio(row[0], x)
                        w.writerow([test.key, m.key, m.unit, case.label,
                                    "" if case.x is None else case.x, c.name,
                                    f"{x.median:.6g}", f"{min(x.values):.6g}",
                                    f"{max(x.values):.6g}", len(x.values),
                                    "" if r is None else f"{r:.4f}"])


def machine():
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = f", {int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} CPUs{mem}, Linux {platform.release()}"


def cpu_times():
    """(busy, steal, total) jiffies from /proc/stat."""
    try:
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    steal = f[7] if len(f) > 7 else 0
    total = sum(f[:8])
    return total - idle, steal, total


def main(description):
    """The whole run, as bench/run.py's options say; its exit status.
    description: the head of --help (run.py's first paragraph)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--bin-dir", required=True, help="directory of the bench_* drivers")
    ap.add_argument("--qslab-lib", required=True, help="libqslab-malloc.so to preload")
    ap.add_argument("--quick", action="store_true", help="fewer sizes, rounds and messages")
    ap.add_argument("--smoke", action="store_true",
                    help="every test at a tiny size; fail if a run fails or does not parse")
    ap.add_argument("--rounds", type=int, help="rounds per case (default: by mode)")
    ap.add_argument("--only", help="comma-separated tests (e.g. slub.pair,prodcons; "
                                   "slub: every slub test; fronts: the front-end comparison; "
                                   "debug: the debugging costs; programs: the real programs "
                                   "and calloc, programs.sqlite: one of them; instructions: "
                                   "the fast paths' instruction counts, which slub includes)")
    ap.add_argument("--allocators", help="comma-separated allocators (default: all found)")
    ap.add_argument("--owners", help="comma-separated qslab owner modes, one qslab column each "
                                     "(QSLAB_OWNER=MODE; 'default': unset); default: "
                                     f"$QSLAB_OWNER if set, else {','.join(DEFAULT_OWNERS)}")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    args = ap.parse_args()
    # SIGTERM ends the run as an exception would: the programs' servers are
    # shut down and their scratch files removed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    params = MODES[mode]
    rounds = args.rounds or params["rounds"]
    ncpus = len(os.sched_getaffinity(0))
    if not os.path.exists(args.qslab_lib):
        sys.exit(f"run.py: {args.qslab_lib}: no such file (build the qslab_malloc target)")

    qslab_lib = os.path.abspath(args.qslab_lib)
    owners = (args.owners.split(",") if args.owners
              else [os.environ[OWNER_VAR]] if os.environ.get(OWNER_VAR) else DEFAULT_OWNERS)
    tests = build_tests(params, ncpus)
    if ncpus < 2:
        tests = [t for t in tests if t.key not in ("slub.remote", "slub.ring")]
    front_notes = []
    if not args.only or any(w.split(".")[0] == "fronts" for w in args.only.split(",")):
        more, front_notes = front_section(params, ncpus, args.bin_dir, qslab_lib, owners[0])
        tests += more
    debug_notes = []
    if not args.only or any(w.split(".")[0] == "debug" for w in args.only.split(",")):
        more, debug_notes = debug_section(params, args.bin_dir, owners[0])
        tests += more
        if not more and args.only:
            sys.exit(f"run.py: debug: {debug_notes[0]}")
    if not args.only or any(w.split(".")[0] == "defrag" for w in args.only.split(",")):
        tests += defrag_section(params, owners[0])
    program_notes, program_skipped, work = [], [], None
    only = args.only.split(",") if args.only else None
    picks_key = lambda w, k: k == w or k.startswith(w + ".")  # "slub": every slub.*
    # each qslab column of the programs section names its front end itself, so
    # the smoke under QSLAB_FRONT (make test runs the suite once per front end)
    # would run the very same programs again: once, where QSLAB_FRONT is unset
    smoke_again = args.smoke and not only and os.environ.get("QSLAB_FRONT")
    if (not only or any(w.split(".")[0] == "programs" for w in only)) and not smoke_again:
        if args.rounds:
            params = dict(params, program_rounds=args.rounds)
        work = tempfile.mkdtemp(prefix="qslab-bench-programs.")
        more, program_notes, program_skipped = programs_section(
            mode, params, args.bin_dir, work,
            lambda key: not only or any(picks_key(w, key) for w in only))
        tests += more
    if args.only:
        wanted = args.only.split(",")
        picks = lambda w, t: picks_key(w, t.key)
        unknown = [w for w in wanted if not any(picks(w, t) for t in tests)
                   and not any(picks_key(w, k) for k in program_skipped) and w != "instructions"]
        if unknown:
            sys.exit(f"run.py: unknown test {', '.join(unknown)}; tests: "
                     + ", ".join(t.key for t in tests))
        tests = [t for t in tests if any(picks(w, t) for w in wanted)]
    if tests and all(t.section == "programs" for t in tests):
        rounds = params["program_rounds"] if not args.rounds else rounds
    for t in tests:
        if t.shared:
            t.shared.members.append(t)
    allocs, missing = find_allocators(qslab_lib, owners)
    if args.allocators:
        keep = args.allocators.split(",")
        allocs = [a for a in allocs if a.subject or a.name in keep]
    os.makedirs(args.out, exist_ok=True)
    LOG.open(os.path.join(args.out, "log.txt"))
    LOG.write(f"bench/run.py {' '.join(sys.argv[1:])} ({mode} mode, {rounds} round"
              f"{'s' if rounds > 1 else ''}): " + ", ".join(a.describe() for a in allocs))
    # Seconds per run of each step, for the estimates of the time left: the
    # last run's in --out, else those of bench/timings.json (a full and a
    # quick run on the project's 2-core VM).
    timings = os.path.join(args.out, "timings.json")
    known, shipped = {}, {}
    for path, into in ((timings, known), (os.path.join(REPO, "bench", "timings.json"), shipped)):
        try:
            with open(path) as f:
                into.update(json.load(f))
        except (OSError, ValueError):
            pass
    prior = {**shipped.get(mode, {}), **known.get(mode, {})}

    load = os.getloadavg()[0]
    cpu0, t0 = cpu_times(), time.time()
    try:
        columns, samples, errors, seconds, per_run = run_suite(
            tests, allocs, rounds, args.bin_dir, args.timeout, prior)
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    # instruction counts: in full mode with the slub tests (about a minute,
    # not in bench-quick's first look), or alone: --only instructions
    instr = []
    wants = args.only.split(",") if args.only else []
    if shutil.which("valgrind") and ("instructions" in wants or (
            mode == "full" and (not wants or "slub" in wants))):
        fronts = discover_fronts(args.bin_dir)[0] or ["slqb"]
        t1 = time.time()
        sys.stderr.write(f"instructions: callgrind counts the fast paths ({len(fronts)} front ends "
                         "and the peers, about a minute)\n")
        LOG.write(f"instructions: callgrind, {len(fronts)} front ends")
        instr = instruction_counts(args.bin_dir, allocs, fronts)
        sys.stderr.write(f"instructions: done in {time.time() - t1:.0f} s\n")
    elapsed, cpu1 = time.time() - t0, cpu_times()
    known[mode] = {**known.get(mode, {}), **per_run}
    with open(timings, "w") as f:
        json.dump(known, f, indent=1, sort_keys=True)
    mismatches, compared = program_mismatches(tests)
    errors += mismatches

    report = [f"qslab benchmark suite ({mode} mode): qslab {allocs[0].version}",
              f"machine: {machine()}",
              f"date:    {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"run took {elapsed:.0f} s ("
              + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()) + ")"]
    if cpu0 and cpu1 and cpu1[2] > cpu0[2]:
        steal = (cpu1[1] - cpu0[1]) / (cpu1[2] - cpu0[2]) * 100
        report.append(f"noise:   load average {load:.2f} before the run; {steal:.1f}% of CPU "
                      "time stolen by the hypervisor during it")
    report.append("allocators: " + ", ".join(a.describe() for a in allocs))
    if missing:
        report.append("missing:    " + ", ".join(f"{n} (Debian package {p})" for n, p in missing)
                      + " -- scripts/install-peers installs them")
    subjects = [a for a in allocs if a.subject]
    report.append(f"method: each (test, case, allocator) in its own process (LD_PRELOAD; "
                  "lastwrite: every allocator in one process), "
                  f"{rounds} interleaved round{'s' if rounds > 1 else ''}; "
                  f"medians; ratio q/peer = {subjects[0].name}/peer"
                  + "".join(f", {a.short}/{subjects[0].short} = {a.name}/{subjects[0].name}"
                            for a in subjects[1:])
                  + "; spread = half the range over the rounds, relative, widest of the row")
    header_len = len(report)
    found = []  # the targets' verdicts, for the summary table
    peer_tests = [t for t in tests if not t.section]  # the front ends have tables only
    if peer_tests:
        for i in range(len(subjects)):
            report.append("")
            report += summary(peer_tests, columns, samples, i)
        report.append("")
        report += targets(peer_tests, columns, samples, found)

    fronts_started = debug_started = programs_started = defrag_started = False
    for t, test in enumerate(tests, 1):
        if test.section == "programs":  # the section prints its tables together
            if not programs_started:
                programs_started = True
                report += programs_report(tests, columns, samples, str(t), program_notes,
                                          mismatches, compared, found)
            continue
        if test.section == "defrag" and not defrag_started:
            defrag_started = True
            report += [""] + DEFRAG_HEADER
            report += defrag_target(test, columns, samples)
        if test.section == "fronts" and not fronts_started:
            fronts_started = True
            report += [""] + FRONTS_HEADER + [f"   {n}" for n in front_notes]
        if test.section == "debug":  # one table for the whole section
            if not debug_started:
                debug_started = True
                report += [""] + DEBUG_HEADER + [f"   {n}" for n in debug_notes] + [""]
                report += debug_table([x for x in tests if x.section == "debug"], columns,
                                      samples, f"{t}.")
            continue
        for i, metric in enumerate(test.metrics):
            number = f"{t}{'abc'[i] if len(test.metrics) > 1 else ''}."
            report.append("")
            report += table(test, metric, columns[test.key], samples, number)

    if debug_notes and not debug_started:  # the section could not run
        report += [""] + DEBUG_HEADER + [f"   {n}" for n in debug_notes]
    if program_notes and not programs_started:  # nothing of the section could run
        report += [""] + PROGRAMS_HEADER + [f"   {n}" for n in program_notes]

    if errors:
        report += ["", f"{len(errors)} run(s) failed:"] + [f"  {e}" for e in errors]

    write_csvs(args.out, tests, columns, samples)
    if any(t.program for t in tests):
        write_program_series(args.out, tests)
    plots = os.path.join(args.out, "plots")
    made, note = (([], "plots: not drawn") if (args.no_plots or args.smoke)
                  else plot(plots, tests, columns, samples))
    report += ["", f"CSV: {os.path.join(args.out, 'results.csv')} (medians), samples.csv "
                   f"(every run); {note}; log of every run: {os.path.join(args.out, 'log.txt')}"]

    # The summary table: first in the report, and all the terminal shows.
    rows = summary_rows(peer_tests, columns, samples, found)
    rows += program_summary_rows(tests, columns, samples, found)
    q = allocs[0].name
    short = [f"qslab benchmark summary ({mode} mode, {rounds} round{'s' if rounds > 1 else ''}, "
             f"{fmt_secs(elapsed)}): qslab {allocs[0].version}; {machine()}"]
    peers = [a.name for a in allocs if not a.subject]
    if rows:
        short += wrap(f"{q} against the best of {', '.join(peers)}"
                      + (f" ({', '.join(n for n, _ in missing)}: not installed)" if missing
                         else "")
                      + "; geometric means over the sizes or cases; ratio = "
                      f"{q} / best peer (↓ lower is better, ↑ higher); thr/cpu = "
                      f"{subjects[1].name if len(subjects) > 1 else '-'} / {q}; target met or "
                      "MISSED, else ahead/tie/behind (±5%)", 0, SUMMARY_WIDTH)
        short += summary_table(q, rows)
    short += front_summary(tests, columns, samples)
    short += debug_summary(tests, columns, samples)
    short += instruction_lines(instr, [a.name for a in allocs if not a.subject])
    if errors:
        short += [f"{len(errors)} run(s) failed (listed in the report); the first: "
                  + errors[0]][:1]
        short[-1] = short[-1][:SUMMARY_WIDTH * 2]
    rel = lambda path: os.path.relpath(path) if not os.path.relpath(path).startswith("..") \
        else path
    short.append(f"Full report: {rel(os.path.join(args.out, 'report.txt'))}; plots: "
                 + (f"{rel(plots)}/ ({len(made)} PNG)" if "PNG files" in note
                    else note.split(": ", 1)[1])
                 + f"; log: {rel(os.path.join(args.out, 'log.txt'))}")
    report[header_len:header_len] = [""] + short[1:-1]
    text = "\n".join(report) + "\n"
    with open(os.path.join(args.out, "report.txt"), "w") as f:
        f.write(text)
    sys.stdout.write("\n".join(short) + "\n")

    if args.smoke:
        expected = sum(len(t.cases) * len(columns[t.key]) for t in tests) * rounds
        got = sum(len(v) for v in samples.values())
        print(f"smoke: {got} passed, {expected - got} failed")
        return 0 if got == expected and not errors else 1
    return 1 if errors else 0
