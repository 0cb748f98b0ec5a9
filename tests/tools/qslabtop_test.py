#!/usr/bin/env python3
"""qslabtop against live processes (tests/tools/CMakeLists.txt).

  once           qslabtop -o -p PID of obs_target: the five summary lines, the
                 column header, each cache's line with its exact counts
                 (against the target's own qslab_cache_stats), the default
                 order (objects) and -s n, -s c; -o -d: the rates are read
  program        qslabtop -o -d 0.5 -- obs_target
  not qslab      `sleep`: one line, exit 1; a dead pid: one line, exit 1
  screen (tmux)  qslabtop -p PID -d 1 in a detached tmux pane: the caches shown,
                 the sort keys s, c, u and n give their orders, a smaller
                 window still shows the header, q quits (the pane's process
                 exits, status 0); the target's end: one line, status 0.
                 Skipped with a message when tmux is missing
                 (scripts/install-deps installs it).
  torn refresh   qslabtop -d 0.2 on obs_fake later: when every read of a
                 refresh is torn, the reading before stays, with a note on
                 line 7; the next good refresh clears it; q quits, status 0
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from toolstest import check, own_stats, start, stop, target_env  # shared by the tools' tests
import toolstest


def tool(args, **kw):
    return subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=60, **kw)


HEADER = "  OBJS ACTIVE  USE OBJ SIZE  SLABS OBJ/SLAB CACHE SIZE NAME"
ROW = re.compile(r"^ *(\d+) +(\d+) +(\d+)% +([\d.]+)K +(\d+) +(\d+) +(\d+)K (\S+) +(\S+) +(\S+) "
                 r"+([ ^v]?[-+]?[\d.]+[KMGTP]?)$")


def rows_of(screen):
    """The cache lines of a screen: [(name, fields...)] in screen order."""
    out = []
    for l in screen.splitlines():
        m = ROW.match(l.rstrip())
        if m:
            g = m.groups()
            out.append({"name": g[7], "objs": int(g[0]), "active": int(g[1]), "use": int(g[2]),
                        "objsize": float(g[3]), "slabs": int(g[4]), "ops": int(g[5]),
                        "size": int(g[6]), "alloc_rate": g[8], "remote_rate": g[9],
                        "trend": g[10]})
    return out


MINE = ["obs_a", "obs_b", "obs_freed", "kmalloc-64"]


def order_of(rows, names=MINE):
    return [r["name"] for r in rows if r["name"] in names]


def expected_order(rows, key):
    """The order of MINE under a sort key, from the rows' own figures."""
    mine = [r for r in rows if r["name"] in MINE]
    f = {"o": lambda r: (-r["objs"], r["name"]), "s": lambda r: (-r["objsize"], r["name"]),
         "c": lambda r: (-r["size"], r["name"]),
         "u": lambda r: (-(r["active"] / r["objs"] if r["objs"] else 0), r["name"]),
         "n": lambda r: r["name"]}[key]
    return [r["name"] for r in sorted(mine, key=f)]


def check_once(target):
    p, text = start([target])
    try:
        own = own_stats(text)
        r = tool(["-o", "-p", str(p.pid)])
        check(r.returncode == 0 and r.stderr == "", "-o: exit 0, nothing on stderr", r.stderr)
        lines = r.stdout.splitlines()
        labels = ["Active / Total Objects (% used)    : ", "Active / Total Slabs (% used)      : ",
                  "Active / Total Caches (% used)     : ", "Active / Total Size (% used)       : ",
                  "Minimum / Average / Maximum Object : "]
        for i, lab in enumerate(labels):
            check(len(lines) > i and lines[i].startswith(" " + lab), "-o: summary line %d" % (i + 1),
                  r.stdout[:600])
        check(any(l.startswith(HEADER + " ") for l in lines), "-o: the column header",
              r.stdout[:900])
        rows = rows_of(r.stdout)
        byname = {x["name"]: x for x in rows}
        exact = {"obs_a": 1000, "obs_b": 37, "obs_freed": 100, "obs_empty": 0, "kmalloc-64": 500}
        for name, n in exact.items():
            got = byname.get(name)
            check(got is not None and got["active"] == n, "-o: %s has %d active objects" % (name, n),
                  str(got))
            want = own.get(name)
            if got and want:
                check(got["objs"] == want["num_objs"] and got["slabs"] == want["num_slabs"] and
                      got["ops"] == want["objs_per_slab"],
                      "-o: %s's objects, slabs, objects per slab as the target's" % name,
                      "tool %s, target %s" % (got, want))
        total_active = sum(x["active"] for x in rows)
        total_objs = sum(x["objs"] for x in rows)
        m = re.match(r" Active / Total Objects \(% used\)    : (\d+) / (\d+) ", lines[0] if lines else "")
        check(m is not None and int(m.group(1)) == total_active and int(m.group(2)) == total_objs,
              "-o: the summary's objects are the lines' sum", "%s vs %d / %d" %
              (lines[0] if lines else "", total_active, total_objs))
        m = re.search(r"Caches \(% used\)     : (\d+) / (\d+)", r.stdout)
        check(m is not None and int(m.group(1)) == sum(1 for x in rows if x["active"]) and
              int(m.group(2)) == len(rows), "-o: the summary's caches", r.stdout[:600])
        check(all(x["alloc_rate"] == "-" for x in rows), "-o without -d: rates not known ('-')")
        check(order_of(rows) == expected_order(rows, "o"), "-o: sorted by objects (default)",
              str(order_of(rows)))
        for key in ("n", "c"):
            r = tool(["-o", "-s", key, "-p", str(p.pid)])
            rows = rows_of(r.stdout)
            check(order_of(rows) == expected_order(rows, key), "-o -s %s: the order" % key,
                  str(order_of(rows)))
        n = [x["name"] for x in rows_of(tool(["-o", "-s", "n", "-p", str(p.pid)]).stdout)]
        check(n == sorted(n) and len(n) >= 6, "-o -s n: every cache by name", str(n))
        r = tool(["-o", "-d", "0.3", "-p", str(p.pid)])
        rows = rows_of(r.stdout)
        check(rows and all(x["alloc_rate"] == "0" and x["remote_rate"] == "0" for x in rows),
              "-o -d 0.3: the rates of an idle process are 0", r.stdout[-800:])
        check(re.search(r"allocs/s 0, remote frees/s 0", r.stdout) is not None,
              "-o -d 0.3: the process's rates", r.stdout[:900])
        r = tool(["-o", "-s", "x", "-p", str(p.pid)])
        check(r.returncode == 2 and "bad sort key" in r.stderr, "-s x refused (bad usage: 2)", r.stderr)
    finally:
        stop(p)
    # -- PROGRAM
    p = subprocess.Popen([TOOL, "-o", "-d", "0.5", "--", target], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=target_env())
    try:
        out = ""
        deadline = time.time() + 20
        while time.time() < deadline and p.poll() is None:
            time.sleep(0.1)
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    rows = {x["name"]: x for x in rows_of(out)}
    check(p.returncode == 0 and rows.get("obs_a", {}).get("active") == 1000,
          "-o -- obs_target: read after the delay", out[:600] + err)


def one_line(r):
    lines = r.stderr.strip("\n").split("\n")
    return len(lines) == 1 and lines[0].startswith("qslabtop: ")


def check_not_qslab():
    s = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.2)
        for args in (["-o", "-p", str(s.pid)], ["-p", str(s.pid)]):
            r = tool(args)
            check(r.returncode == 1 and one_line(r) and "does not use qslab" in r.stderr and
                  r.stdout == "", "not qslab (%s): one line, exit 1" % " ".join(args), r.stderr)
    finally:
        s.kill()
        s.wait()
    r = tool(["-o", "-p", str(s.pid)])
    check(r.returncode == 1 and one_line(r) and "no process" in r.stderr, "a dead pid: one line",
          r.stderr)


class Tmux:
    count = 0

    def __init__(self, tmp):
        # a socket of its own: a server killed by the check before may
        # still be exiting on the old one, and a new client that reaches it
        # fails with "server exited unexpectedly" (a fresh-clone CI did)
        Tmux.count += 1
        self.sock = os.path.join(tmp, "tmux-%d.sock" % Tmux.count)
        conf = os.path.join(tmp, "tmux.conf")
        with open(conf, "w") as f:
            f.write("set-option -g remain-on-exit on\nset-option -g status off\n")
        self.base = ["tmux", "-S", self.sock, "-f", conf]
        self.tmp = tmp

    def run(self, *args):
        return subprocess.run(self.base + list(args), capture_output=True, text=True, timeout=10)

    def new(self, name, cmd, x=160, y=50):
        """Run cmd (a shell command) in a new session; its exit status and
        stderr go to files (tmux may report neither reliably)."""
        self.status = getattr(self, "status", {})
        self.err = getattr(self, "err", {})
        self.status[name] = os.path.join(self.tmp, name + ".status")
        self.err[name] = os.path.join(self.tmp, name + ".err")
        full = "TERM=xterm-256color %s 2>%s; echo $? >%s.tmp; mv %s.tmp %s" % (
            cmd, self.err[name], self.status[name], self.status[name], self.status[name])
        r = self.run("new-session", "-d", "-s", name, "-x", str(x), "-y", str(y), full)
        check(r.returncode == 0, "tmux new-session", r.stderr)

    def exit_status(self, name, timeout=6):
        """The command's exit status once the pane's process ended, or None."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(self.status[name]) and self.pane(name, "#{pane_dead}") == "1":
                with open(self.status[name]) as f:
                    return f.read().strip()
            time.sleep(0.1)
        return None

    def stderr(self, name):
        try:
            with open(self.err[name]) as f:
                return f.read()
        except FileNotFoundError:  # the pane's command never ran
            return "(no stderr file: the command never ran)"

    def capture(self, name):
        return self.run("capture-pane", "-p", "-t", name).stdout

    def pane(self, name, fmt):
        return self.run("display-message", "-p", "-t", name, fmt).stdout.strip()

    def wait(self, name, cond, timeout=6):
        """The screen once cond holds and it is drawn completely (the same in
        two captures in a row: a capture may fall in the middle of a draw)."""
        deadline = time.time() + timeout
        last = None
        while True:
            s = self.capture(name)
            if (cond(s) and s == last) or time.time() > deadline:
                return s
            last = s
            time.sleep(0.1)

    def kill(self):
        self.run("kill-server")


def check_screen(target, tmp):
    if not shutil.which("tmux"):
        print("SKIP: tmux is missing (scripts/install-deps installs it): the screen is not tested",
              flush=True)
        return
    t = Tmux(tmp)
    p, _ = start([target])
    try:
        t.new("top", "%s -p %d -d 1" % (TOOL, p.pid))
        s = t.wait("top", lambda s: "obs_freed" in s)
        rows = rows_of(s)
        check(HEADER in s and "obs_a" in s and " Active / Total Objects (% used)" in s,
              "screen: the summary, the header and the caches", s)
        check({"obs_a": 1000, "obs_b": 37, "obs_freed": 100, "kmalloc-64": 500} ==
              {x["name"]: x["active"] for x in rows if x["name"] in MINE},
              "screen: the counts", s)
        check(order_of(rows) == expected_order(rows, "o"), "screen: sorted by objects at first",
              str(order_of(rows)))
        # the rates come with the second reading, a second later
        s = t.wait("top", lambda s: re.search(r"allocs/s \d", s) is not None)
        check(re.search(r"allocs/s 0, remote frees/s 0", s) is not None,
              "screen: the rates after a refresh", s)
        for key, what in (("s", "object size"), ("c", "cache size"), ("u", "utilisation"),
                          ("n", "name")):
            t.run("send-keys", "-t", "top", key)
            s = t.wait("top", lambda s: ("sort: %s\n" % what) in s + "\n" or
                       ("sort: %s " % what) in s)
            rows = rows_of(s)
            check(order_of(rows) == expected_order(rows, key),
                  "screen: key %s sorts by %s" % (key, what), str(order_of(rows)) + "\n" + s)
        names = [x["name"] for x in rows]
        check(names == sorted(names) and len(names) >= 6, "screen: n sorts every line by name",
              str(names))
        check(len(s.rstrip("\n").split("\n")) <= 50, "screen: no more lines than the window")
        # a smaller window: the screen is drawn again to its size
        t.run("resize-window", "-t", "top", "-x", "90", "-y", "20")
        s = t.wait("top", lambda s: len(s.rstrip("\n").split("\n")) <= 20 and HEADER in s)
        lines = s.rstrip("\n").split("\n")
        check(HEADER in s and len(lines) <= 20 and max(len(l) for l in lines) <= 90,
              "screen: resized to 90x20, still the header", s)
        t.run("send-keys", "-t", "top", "q")
        st = t.exit_status("top")
        check(st == "0" and t.stderr("top") == "",
              "screen: q quits (the pane's process exits, status 0, nothing on stderr)",
              "status %s, stderr %r\n%s" % (st, t.stderr("top"), t.capture("top")))
        # the target's end while watched
        q, _ = start([target])
        t.new("end", "%s -p %d -d 0.2" % (TOOL, q.pid))
        t.wait("end", lambda s: "obs_a" in s)
        stop(q)
        st = t.exit_status("end")
        check(st == "0" and t.stderr("end") == "qslabtop: process %d exited\n" % q.pid,
              "screen: the target's end said in one line, status 0",
              "status %s, stderr %r" % (st, t.stderr("end")))
    finally:
        t.kill()
        stop(p)


def check_torn_refresh(fake, tmp):
    """A refresh whose every read is torn keeps the reading before on the
    screen and says so; the next good one clears the note."""
    if not shutil.which("tmux"):
        return
    t = Tmux(tmp)
    p, _ = start([fake, "later"], env=dict(os.environ))
    note = "no consistent snapshot at this refresh"
    try:
        t.new("torn", "%s -p %d -d 0.2 --retries 3" % (TOOL, p.pid))
        s = t.wait("torn", lambda s: HEADER in s and re.search(r" loop +", s) is not None)
        check(HEADER in s and note not in s, "torn refresh: the first reading, no note", s)
        p.stdin.write("t")
        p.stdin.flush()
        s = t.wait("torn", lambda s: note in s)
        check(note in s and "in 3 reads" in s and "loop" in s,
              "torn refresh: the note, and the reading before still shown", s)
        p.stdin.write("u")
        p.stdin.flush()
        s = t.wait("torn", lambda s: note not in s)
        check(note not in s and "loop" in s, "torn refresh: a good refresh clears the note", s)
        t.run("send-keys", "-t", "torn", "q")
        st = t.exit_status("torn")
        check(st == "0" and t.stderr("torn") == "", "torn refresh: q quits, status 0",
              "status %s, stderr %r" % (st, t.stderr("torn")))
    finally:
        t.kill()
        stop(p)


def main():
    global TOOL
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--fake", required=True)
    # Two parts (tests/tools/CMakeLists.txt): "counts" (once, program) checks
    # every count qslabtop shows against the target's own, which the mode
    # (QSLAB_OWNER, QSLAB_FRONT) shapes; "screen" (not qslab, screen, torn
    # refresh) drives the tool's refusals and its screen, keys and window
    # over the same reading code, which no mode changes: make test runs it
    # in each build's first run only (label "once").
    ap.add_argument("--part", choices=("counts", "screen", "all"), default="all")
    a = ap.parse_args()
    TOOL = a.tool
    t0 = time.time()
    if a.part in ("counts", "all"):
        check_once(a.target)
    if a.part in ("screen", "all"):
        check_not_qslab()
        with tempfile.TemporaryDirectory(prefix="qslabtop-test-") as tmp:
            check_screen(a.target, tmp)
            check_torn_refresh(a.fake, tmp)
    print("qslabtop_test: %d checks passed, %d failed (%.1f s)" % (toolstest.passes, toolstest.failures,
                                                                    time.time() - t0))
    return 1 if toolstest.failures else 0


if __name__ == "__main__":
    sys.exit(main())
