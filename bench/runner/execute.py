"""bench/runner/execute.py - running a driver and reading what it prints.

One run of bench_<driver> under one contender (start, finish), the run of
bench_inproc that loads every allocator into one process (run_inproc), the
parsing of the drivers' "result key=value ..." lines, RunError for a run
that fails or prints something that does not parse, and the run's log
(LOG: log.txt in --out).
"""

import math
import os
import subprocess
import time

from .allocators import run_env


class RunError(Exception):
    pass


def parse_result(text):
    """The numbers of the driver's "result key=value ..." line."""
    for line in text.splitlines():
        if line.startswith("result "):
            out = {}
            for tok in line.split()[1:]:
                key, sep, value = tok.partition("=")
                if not sep:
                    raise RunError(f"bad token {tok!r} in {line!r}")
                try:
                    out[key] = float(value)
                except ValueError:
                    raise RunError(f"bad number in {tok!r}")
                if not math.isfinite(out[key]):
                    raise RunError(f"not a finite number: {tok!r}")
            return out
    raise RunError("no result line")


def result_words(line, *names):
    """A "result name=word ... key=number ..." line of a driver that prints
    several: the words of `names` (KeyError if one is missing), then a dict
    of the other keys' numbers."""
    fields = dict(tok.partition("=")[::2] for tok in line.split()[1:])
    words = [fields.pop(n) for n in names]
    nums = {}
    for key, value in fields.items():
        nums[key] = float(value)
        if not math.isfinite(nums[key]):
            raise RunError(f"not a finite number: {key}={value}")
    return words + [nums]


def exit_error(returncode, stderr, cmd):
    """What a driver's failed run says: its exit status, its last line on
    stderr, its command."""
    msg = (stderr.strip().splitlines() or [""])[-1]
    return f"exit {returncode} ({msg}): {' '.join(cmd)}"


def start(bin_dir, test, case, cont):
    exe = os.path.join(bin_dir, "bench_" + test.driver)
    cmd = [exe] + case.args + cont.extra_args
    env = cont.environ()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    proc.qslab_t0, proc.qslab_env = time.time(), env  # for the log
    return cmd, proc


def finish(cmd, proc, test, timeout):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        LOG.write(f"timed out after {timeout} s: {' '.join(cmd)}")
        raise RunError(f"timed out after {timeout} s: {' '.join(cmd)}")
    LOG.run(cmd, proc.qslab_env, time.time() - proc.qslab_t0, out, err, proc.returncode)
    if proc.returncode != 0:
        raise RunError(exit_error(proc.returncode, err, cmd))
    result = parse_result(out)
    for m in test.metrics:
        keys = m.split or ()
        for key in (m.key,) + tuple(keys):
            if key not in result:
                raise RunError(f"no {key}= in the result line: {' '.join(cmd)}")
    return result


class Log:
    """The run's log file (log.txt in --out): every command run, its time and
    its result lines, the progress lines, the errors.  Off until opened."""

    def __init__(self):
        self.f, self.t0 = None, time.time()

    def open(self, path):
        self.f, self.t0 = open(path, "w"), time.time()

    def write(self, text):
        if self.f:
            self.f.write(f"[{time.time() - self.t0:7.1f} s] {text}\n")
            self.f.flush()

    def run(self, cmd, env, secs, stdout, stderr, status):
        """A process the runner ran: its command and the variables it set,
        its time, exit status, result lines and the end of its stderr."""
        if not self.f:
            return
        sets = " ".join(f"{k}={v}" for k, v in sorted(env.items())
                        if (k == "LD_PRELOAD" or k.startswith("QSLAB_")) and os.environ.get(k) != v)
        self.write(f"run {sets + ' ' if sets else ''}{' '.join(cmd)}: exit {status}, {secs:.2f} s")
        for line in (stdout or "").splitlines():
            if line.startswith("result "):
                self.f.write(f"    {line}\n")
        err = (stderr or "").strip().splitlines()
        for line in err[-5:]:
            self.f.write(f"    stderr: {line}\n")


LOG = Log()


def inproc_cmd(bin_dir, test, order):
    """bench_inproc with every contender of `order`, and its environment:
    the variables any contender sets are unset, then set per contender by
    bench_inproc (--env) while it loads that allocator."""
    cmd = [os.path.join(bin_dir, "bench_inproc")] + test.inproc + ["--result"]
    env = run_env({k: None for c in order for k in c.env})
    for c in order:
        cmd += ["--name", c.name]
        for k, v in c.env.items():
            if v is not None:
                cmd += ["--env", f"{k}={v}"]
        cmd.append(c.preload or "glibc")
    return cmd, env


def run_inproc(bin_dir, test, order, timeout):
    """{(case label, contender name): result} from one bench_inproc process;
    and the contenders it skipped, with its reason."""
    cmd, env = inproc_cmd(bin_dir, test, order)
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunError(f"timed out after {timeout} s: {' '.join(cmd)}")
    LOG.run(cmd, env, time.time() - t0, r.stdout, r.stderr, r.returncode)
    if r.returncode != 0:
        raise RunError(exit_error(r.returncode, r.stderr, cmd))
    by_x = {c.x: c for c in test.cases}
    got = {}
    for line in r.stdout.splitlines():
        if not line.startswith("result "):
            continue
        fields = dict(tok.partition("=")[::2] for tok in line.split()[1:])
        try:
            case = by_x[int(fields.pop("write"))]
            name = fields.pop("name")
            got[(case.label, name)] = {k: float(v) for k, v in fields.items()}
        except (KeyError, ValueError):
            raise RunError(f"bad result line {line!r}: {' '.join(cmd)}")
        if "median" not in got[(case.label, name)]:
            raise RunError(f"no median= in {line!r}")
    skipped = [f"{c.name}: {next((l for l in r.stderr.splitlines() if c.name in l), 'no result')}"
               for c in order if not any(n == c.name for _, n in got)]
    return got, skipped
