"""bench/runner/loop.py - the run loop: the plan of steps (a test's round, or
one process shared by several tests), the rounds interleaved and the
contenders taking turns at going first, and the progress lines on stderr
with the time elapsed and an estimate of the time left.
"""

import sys
import time

from .execute import LOG, RunError, finish, run_inproc, start
from .programs_section import run_program_round


def fmt_secs(s):
    """Seconds as m:ss (or h:mm:ss)."""
    s = int(round(max(s, 0)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """A line per step (one test's round: each case under each allocator, or
    one shared process) on stderr and in the log, with the time elapsed and an
    estimate of the time left; on a terminal, the run in progress on a line of
    its own, rewritten.  The estimate of a step: this run's mean seconds per
    run of the same step in the rounds done, else the last run's in the same
    mode (timings.json in --out), else this run's mean over every run so far."""

    def __init__(self, plan, rounds, prior):
        self.plan = plan                  # [(round, key, tests, runs)]
        self.rounds = rounds
        self.prior = prior                # key -> seconds per run, from the last run
        self.per_run = {}                 # key -> [seconds, runs] measured in this run
        self.done_runs, self.done_secs = 0, 0.0
        self.t0 = time.time()
        self.i, self.step_t0, self.step_runs = -1, self.t0, 0
        self.tty = sys.stderr.isatty()

    def guess(self, key, runs):
        if key in self.per_run:
            s, n = self.per_run[key]
            return s / n * runs
        if key in self.prior:
            return self.prior[key] * runs
        if self.done_runs:
            return self.done_secs / self.done_runs * runs
        return None

    def left(self):
        """Seconds left, or None when nothing is known yet."""
        total = 0.0
        for r, key, _, runs in self.plan[self.i + 1:]:
            g = self.guess(key, runs)
            if g is None:
                return None
            total += g
        if self.step_t0 is not None and 0 <= self.i < len(self.plan):
            g = self.guess(self.plan[self.i][1], self.plan[self.i][3])
            if g is None:
                return None
            total += max(g - (time.time() - self.step_t0), 0)
        return total

    def status(self):
        left = self.left()
        return (f"[{self.i + 1:>{len(str(len(self.plan)))}}/{len(self.plan)}] "
                f"{fmt_secs(time.time() - self.t0)} elapsed, "
                + (f"about {fmt_secs(left)} left" if left is not None else "time left unknown"))

    def begin(self, i):
        self.i, self.step_t0, self.step_runs = i, time.time(), 0

    def step(self, what, n=1):
        """`what` starts; n runs of the step's count are done with it."""
        self.step_runs += n
        if self.tty:
            r, key = self.plan[self.i][:2]
            sys.stderr.write(f"\r\033[K{self.status()} | round {r + 1}/{self.rounds} {what}"[:150])
            sys.stderr.flush()

    def end(self):
        """The step is done: its line."""
        r, key, _, runs = self.plan[self.i]
        secs = time.time() - self.step_t0
        s, n = self.per_run.get(key, (0.0, 0))
        self.per_run[key] = (s + secs, n + runs)
        self.done_secs += secs
        self.done_runs += runs
        self.step_t0 = None  # no step in progress: the estimate counts from the next one
        self.line(f"{self.status()} | round {r + 1}/{self.rounds} {key}: {runs} run{'s' if runs > 1 else ''}"
                  f" in {secs:.0f} s")

    def line(self, text):
        if self.tty:
            sys.stderr.write("\r\033[K")
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
        LOG.write(text)

    def finish(self):
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def step_key(test):
    """The progress step a test's round belongs to: the tests one process
    feeds (bench_fronts, bench_debug) make one step."""
    return test.shared.key if test.shared else test.key


def run_plan(tests, columns, rounds):
    """[(round, step key, tests, runs)] in the order they run; a step of no
    runs (a program past its rounds) is left out."""
    plan = []
    for r in range(rounds):
        for test in tests:
            n = len(test.cases) * sum(1 for c in columns[test.key]
                                      if c.rounds is None or r < c.rounds)
            if not n:
                continue
            key = step_key(test)
            if plan and plan[-1][0] == r and plan[-1][1] == key:
                plan[-1][2].append(test)
                plan[-1][3] += n
            else:
                plan.append([r, key, [test], n])
    return plan


def run_suite(tests, allocs, rounds, bin_dir, timeout, prior):
    """samples[(test, case label, contender)] = [result dict per round];
    seconds[test] = the time its runs took; per_run[step key] = seconds per
    run (for the next run's estimates)."""
    columns = {t.key: (t.contenders(allocs) if t.contenders else allocs) for t in tests}
    plan = run_plan(tests, columns, rounds)
    progress = Progress(plan, rounds, prior)
    samples, errors, seconds = {}, [], {}
    for i, (r, _, step_tests, _) in enumerate(plan):
        progress.begin(i)
        for test in step_tests:
            t0 = time.time()
            run_test_round(test, columns[test.key], r, bin_dir, timeout, samples, errors,
                           progress)
            key = (test.shared.key if test.shared else
                   test.section if test.section == "programs" else test.key)
            seconds[key] = seconds.get(key, 0) + time.time() - t0
        progress.end()
    progress.finish()
    per_run = {k: s / n for k, (s, n) in progress.per_run.items() if n}
    return columns, samples, errors, seconds, per_run


def run_test_round(test, cols, r, bin_dir, timeout, samples, errors, progress):
    """Round r of one test: every case under every contender."""
    if test.shared:  # one process for this test and the others it feeds
        if test.shared.round != r:
            progress.step(f"{test.shared.key} (in one process)", 0)
            test.shared.run(bin_dir, r, timeout, samples, errors)
        progress.step(test.key, len(test.cases) * len(cols))
        return
    if test.inproc:  # one process: every case, every contender
        k = r % len(cols)
        progress.step(f"{test.key} (in one process)", len(test.cases) * len(cols))
        try:
            got, skipped = run_inproc(bin_dir, test, cols[k:] + cols[:k], timeout)
            for (label, name), res in got.items():
                samples.setdefault((test.key, label, name), []).append(
                    {test.metrics[0].key: res["median"], **res})
            errors.extend(f"{test.key}: skipped {s}" for s in skipped)
        except (RunError, OSError) as e:
            errors.append(f"{test.key}: {e}")
        return
    for ci, case in enumerate(test.cases):
        k = (r + ci) % len(cols)
        order = [c for c in cols[k:] + cols[:k] if c.rounds is None or r < c.rounds]
        if test.program:
            run_program_round(test, case, order, r, timeout, samples, errors, progress)
            continue
        # Memory tests that mostly sleep run their allocators at once.
        procs = [start(bin_dir, test, case, c) for c in order] if test.parallel else None
        for i, c in enumerate(order):
            progress.step(f"{test.key} {case.label} {c.name}")
            try:
                cmd, proc = procs[i] if procs else start(bin_dir, test, case, c)
                res = finish(cmd, proc, test, timeout)
                samples.setdefault((test.key, case.label, c.name), []).append(res)
            except (RunError, OSError) as e:
                errors.append(f"{test.key} [{case.label}] {c.name}: {e}")
