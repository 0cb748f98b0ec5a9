"""toolstest: what the tests of tests/tools/ share (qslabinfo_test.py,
qslabtop_test.py, control_test.py): the pass/fail counters and check(), and
starting and stopping a target that prints its own view, then READY, and
waits until its stdin closes (obs_target, ctl_target)."""
import os
import subprocess

failures = 0
passes = 0


def check(cond, what, detail=""):
    """Count one check; print it (and the detail, indented) when it fails."""
    global failures, passes
    if cond:
        passes += 1
    else:
        failures += 1
        print("FAIL: %s%s" % (what, ("\n  " + str(detail).replace("\n", "\n  ")) if detail else ""),
              flush=True)


def own_stats(text):
    """The target's own view of its caches: {name: {field: number}} from its
    "STATS name active num slabs empty queued per-slab" lines."""
    stats = {}
    for line in text.splitlines():
        if line.startswith("STATS "):
            f = line.split()
            stats[f[1]] = dict(zip(["active_objs", "num_objs", "num_slabs", "empty_slabs",
                                    "queued_objs", "objs_per_slab"], map(int, f[2:])))
    return stats


def target_env():
    env = dict(os.environ)
    env["QSLAB_PURGE"] = "0"  # nothing moves while the target waits
    return env


def start(argv, env=None):
    """Start a target; return it and what it printed before READY."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=None, env=env or target_env(), text=True)
    out = []
    while True:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("%s ended before READY: %r" % (argv, out))
        if line == "READY\n":
            return p, "".join(out)
        out.append(line)


def stop(p):
    """Close the target's stdin (it exits) and reap it."""
    try:
        p.stdin.close()
    except BrokenPipeError:
        pass
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
