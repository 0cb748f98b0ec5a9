#!/usr/bin/env python3
"""The control channel (src/observe/control.c, tools/qslabinfo_control.c), driven on
ctl_target (tests/tools/CMakeLists.txt, test tools_control).

  place       the directory is 0700 and the socket 0600, both the user's;
              QSLAB_CONTROL_DIR, $XDG_RUNTIME_DIR/qslab found from the target's
              environment
  order       --set another order live: --get, --json and --control-stats show it,
              and the slabs made after it are of that order (the page layer's count)
  hiwater     --set freebatch=16, hiwater=32: --json shows them and freeing 500
              objects flushes (SLQB's queues)
  refusals    out-of-range values answered with the library's range text, one
              line, exit 1, nothing changed, nothing on the target's stderr
  shrink      after freeing every object, --shrink gives bytes back
  validate    one cache and every cache
  garbage     binary junk, malformed lines (each one "error:", the connection
              kept), an overlong line, endless data, a slow and a silent peer
              (dropped after QSLAB_CONTROL_TIMEOUT_MS), 40 connections at once
              (16 served, the rest "busy"), while a thread of the target
              allocates and checks its objects: it never sees one overwritten
  lifecycle   a forked child serves nothing and leaves the parent's socket;
              qslab_control_stop/start; the socket is gone after exit; a stale
              socket of a dead process is swept; no socket and a left-over one
              explained in one line
  other user  as root: nobody is refused by SO_PEERCRED (QSLAB_CONTROL_TEST_OPEN=1
              opens the directory and the socket so that only that check stands)
              and by the 0700 directory (EACCES); skipped when not root
"""
import argparse
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from toolstest import check  # shared by the tools' tests
import toolstest


class Target:
    def __init__(self, env_extra, args=(), drop_env=()):
        env = dict(os.environ)
        for k in ("QSLAB_CONTROL", "QSLAB_CONTROL_DIR", "XDG_RUNTIME_DIR",
                  "QSLAB_CONTROL_TEST_OPEN") + tuple(drop_env):
            env.pop(k, None)
        env["QSLAB_PURGE"] = "0"
        env.update(env_extra)
        self.err = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen([TARGET] + list(args), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, env=env, text=True)
        line = self.p.stdout.readline()
        if line != "READY\n":
            raise RuntimeError("ctl_target did not start: %r" % line)
        self.pid = self.p.pid

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def stop(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return -9


def tool(args, env=None, preexec=None, prefix=()):
    e = dict(os.environ)
    e.pop("QSLAB_CONTROL", None)
    e.pop("QSLAB_CONTROL_DIR", None)
    # qslabinfo starts no thread (and links neither qslab nor pthreads):
    # the TSan build makes it without TSan (tools/CMakeLists.txt), and where
    # a qslabinfo has TSan all the same, TSan's sleep at its exit
    # (atexit_sleep_ms, 100 ms: CMakeLists.txt), so that threads still
    # running can report, waits for nothing there.  (The last value of an
    # option wins; other builds ignore it.)
    if "TSAN_OPTIONS" in e:
        e["TSAN_OPTIONS"] += ":atexit_sleep_ms=0"
    if env:
        e.update(env)
    return subprocess.run(list(prefix) + [TOOL] + args, capture_output=True, text=True,
                          timeout=60, env=e)


def one_line(r):
    lines = r.stderr.strip("\n").split("\n")
    return len(lines) == 1 and lines[0].startswith("qslabinfo: ")


def json_cache(pid, name):
    r = tool(["--json", "-e", "-p", str(pid)])
    if r.returncode != 0:
        raise RuntimeError("qslabinfo --json: %s" % r.stderr)
    j = json.loads(r.stdout)
    for c in j["caches"]:
        if c["name"] == name:
            return c, j
    raise RuntimeError("no cache %s in --json" % name)


def kv(line):
    return dict(w.split("=", 1) for w in line.split())


class Conn:
    """A raw connection: the greeting read."""

    def __init__(self, path, read_greeting=True):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10)
        self.s.connect(path)
        self.buf = b""
        self.greeting = self.line() if read_greeting else None

    def line(self):
        while b"\n" not in self.buf:
            try:
                d = self.s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                d = b""
            if not d:
                out, self.buf = self.buf, b""
                return out.decode(errors="replace") if out else None
            self.buf += d
        l, self.buf = self.buf.split(b"\n", 1)
        return l.decode(errors="replace")

    def answer(self, req):
        """Send a request; the body lines and the terminator."""
        self.s.sendall(req)
        body = []
        while True:
            l = self.line()
            if l is None or l == "ok" or l.startswith("error: "):
                return body, l
            body.append(l)

    def eof(self):
        try:
            d = self.s.recv(1)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        return d == b""

    def close(self):
        self.s.close()


# ------------------------------------------------------------------ parts

def place(t, cdir):
    path = "%s/%d.sock" % (cdir, t.pid)
    st = os.lstat(cdir)
    check(stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
          and st.st_uid == os.geteuid(), "the directory is 0700 and ours",
          "%o uid %d" % (st.st_mode, st.st_uid))
    st = os.lstat(path)
    check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
          and st.st_uid == os.geteuid(), "the socket is 0600 and ours", "%o" % st.st_mode)
    c = Conn(path)
    check(c.greeting == "qslab-control 1 pid %d" % t.pid, "greeting with the version",
          c.greeting)
    c.close()
    return path


def order(t):
    c0, j0 = json_cache(t.pid, "ctl_a")
    o = 3 if c0["order"] == 2 else 2  # another order than the default
    r = tool(["-p", str(t.pid), "--set", "ctl_a", "order=%d" % o])
    check(r.returncode == 0 and r.stdout.strip() == "ctl_a order %d -> %d" % (c0["order"], o),
          "--set order=%d" % o, r.stdout + r.stderr)
    r = tool(["-p", str(t.pid), "--get", "ctl_a", "order"])
    check(r.returncode == 0 and r.stdout.strip() == str(o), "--get order", r.stdout + r.stderr)
    c1, j1 = json_cache(t.pid, "ctl_a")
    check(c1["order"] == o, "--json shows order %d" % o, c1["order"])
    r = tool(["-p", str(t.pid), "--get", "ctl_a", "front"])
    check(r.returncode == 0 and r.stdout.strip() == c1["front"], "--get front: its name",
          r.stdout + r.stderr)
    if c1["front"] == "slob":
        print("order: SLOB has no slabs of its own: its effect not checked")
        return
    ratio = c1["objs_per_slab"] / (c0["objs_per_slab"] * 2.0 ** (o - c0["order"]))
    check(0.75 <= ratio <= 1.34, "objects per slab follow the order",
          (c0["order"], c0["objs_per_slab"], o, c1["objs_per_slab"]))
    t.cmd("alloc 3000")
    c2, j2 = json_cache(t.pid, "ctl_a")
    new = c2["new_slab"] - c1["new_slab"]
    grown = j2["totals"]["page_layer_slab_bytes"] - j1["totals"]["page_layer_slab_bytes"]
    check(new > 0 and grown >= new * (4096 << o),
          "the slabs made after the change are of order %d (%d KiB)" % (o, 4 << o), (new, grown))
    r = tool(["-p", str(t.pid), "--control-stats", "ctl_a"])
    s = kv(r.stdout) if r.returncode == 0 and r.stdout.count("\n") == 1 else {}
    check(s.get("order") == str(o) and s.get("objs_per_slab") == str(c2["objs_per_slab"])
          and s.get("active_objs") == str(c2["active_objs"]) and s.get("name") == "ctl_a",
          "--control-stats agrees with --json", r.stdout + r.stderr)


def hiwater(t):
    for a, v in (("freebatch", 16), ("hiwater", 32)):
        r = tool(["-p", str(t.pid), "--set", "ctl_a", "%s=%d" % (a, v)])
        check(r.returncode == 0 and r.stdout.strip().endswith("-> %d" % v), "--set %s" % a,
              r.stdout + r.stderr)
    c1, _ = json_cache(t.pid, "ctl_a")
    check(c1["tunables"]["hiwater"] == 32 and c1["tunables"]["freebatch"] == 16,
          "--json shows hiwater 32, freebatch 16", c1["tunables"])
    t.cmd("free 500")
    c2, _ = json_cache(t.pid, "ctl_a")
    if c2["front"] == "slqb":
        # past hiwater, a per-CPU queue flushes batches home, a thread's
        # queue sends each object straight to its slab (free_slow): either
        # way the queue stays near hiwater (it took 500 at the default 1024)
        went = (c2["flush"] - c1["flush"]) + (c2["free_slow"] - c1["free_slow"])
        check(went >= 10 and c2["queued_objs"] <= 64,
              "500 frees over hiwater 32: the queue stays short",
              (c1["flush"], c2["flush"], c1["free_slow"], c2["free_slow"], c2["queued_objs"]))
    else:
        print("hiwater: front %s does not flush by hiwater: its effect not checked" % c2["front"])


def cached(t, path):
    """The cached-memory cap set, read and refused on the live process."""
    r = tool(["-p", str(t.pid), "--set", "*", "cached_max=1048576"])
    check(r.returncode == 0 and "cached_max = 1048576" in r.stdout, "--set * cached_max=1048576",
          r.stdout + r.stderr)
    _, j = json_cache(t.pid, "ctl_a")
    check(j["cached"]["max"] == 1048576 and j["cached"]["walks"] >= 1,
          "--json shows the cap and its walk at the set", j["cached"])
    r = tool(["-p", str(t.pid)])
    check(r.returncode == 0 and "Cached: cap 1048576 bytes; " in r.stdout,
          "qslabinfo's Cached: line shows the cap", r.stdout[-600:])
    c = Conn(path)
    body, end = c.answer(b"get ctl_a cached_max\n")
    check(end == "ok" and body == ["1048576"], "get ctl_a cached_max", (body, end))
    body, end = c.answer(b"stats\n")
    last = kv(body[-1]) if body else {}
    check(end == "ok" and last.get("cached_max") == "1048576" and "cached_cut_bytes" in last,
          "stats ends with the cap's counters", body[-2:])
    c.close()
    for args, pat in ((["ctl_a", "cached_max=1"],
                       r"tune ctl_a cached_max refused: the cached-memory cap is the process's"),
                      (["*", "cached_max=4M"],
                       r"tune kmalloc-8 cached_max=4M refused: not a number; allowed range is "
                       r"0\.\.1099511627776 bytes")):
        r = tool(["-p", str(t.pid), "--set"] + args)
        check(r.returncode == 1 and one_line(r) and re.search(pat, r.stderr),
              "--set %s refused with the library's text" % " ".join(args), r.stdout + r.stderr)
    r = tool(["-p", str(t.pid), "--set", "*", "cached_max=0"])
    _, j = json_cache(t.pid, "ctl_a")
    check(r.returncode == 0 and j["cached"]["max"] == 0, "--set * cached_max=0: no cap", j["cached"])


def refusals(t):
    c0, _ = json_cache(t.pid, "ctl_a")
    cases = [
        (["ctl_a", "order=99"], r"tune ctl_a order=99 refused: allowed range is \d+\.\.\d+ log2 pages"),
        (["ctl_a", "hiwater=1"], r"tune ctl_a hiwater=1 refused: allowed range is 16\.\.\d+ objects"),
        (["ctl_a", "freebatch=0"], r"tune ctl_a freebatch=0 refused: allowed range is 1\.\.32 objects"),
        (["ctl_a", "order=two"], r"tune ctl_a order=two refused: not a number; allowed range is"),
        (["ctl_a", "nosuch=1"], r"tune ctl_a: unknown attribute .nosuch."),
        (["ctl_a", "hiwatr=1"], r"tune ctl_a: unknown attribute .hiwatr. \(did you mean .hiwater.\?\)"),
        (["nosuch", "order=1"], r"no cache named nosuch"),
    ]
    for args, pat in cases:
        r = tool(["-p", str(t.pid), "--set"] + args)
        check(r.returncode == 1 and one_line(r) and re.search(pat, r.stderr),
              "--set %s refused with the library's text" % " ".join(args), r.stdout + r.stderr)
    c1, _ = json_cache(t.pid, "ctl_a")
    check(c1["order"] == c0["order"] and c1["tunables"] == c0["tunables"],
          "refused values change nothing", (c0["tunables"], c1["tunables"]))
    check("refused" not in t.stderr(), "refusals are not written on the target's stderr",
          t.stderr())


def shrink_validate(t):
    r = tool(["-p", str(t.pid), "--validate", "ctl_a"])
    check(r.returncode == 0 and r.stdout.strip() == "validated 1 cache, 0 with problems",
          "--validate ctl_a", r.stdout + r.stderr)
    r = tool(["-p", str(t.pid), "--validate"])
    m = re.fullmatch(r"validated (\d+) caches, 0 with problems\n", r.stdout)
    check(r.returncode == 0 and m and int(m.group(1)) >= 4, "--validate (every cache)",
          r.stdout + r.stderr)
    r = tool(["-p", str(t.pid), "--validate", "nosuch"])
    check(r.returncode == 1 and one_line(r) and "no cache named nosuch" in r.stderr,
          "--validate nosuch", r.stderr)
    t.cmd("free 100000")
    c0, _ = json_cache(t.pid, "ctl_a")
    r = tool(["-p", str(t.pid), "--shrink", "ctl_a"])
    m = re.fullmatch(r"freed (\d+) bytes\n", r.stdout)
    check(r.returncode == 0 and m, "--shrink ctl_a", r.stdout + r.stderr)
    c1, _ = json_cache(t.pid, "ctl_a")
    if c0["front"] != "slob":
        check(m and int(m.group(1)) > 0 and c1["num_slabs"] < c0["num_slabs"],
              "--shrink gives the empty slabs back", (r.stdout, c0["num_slabs"], c1["num_slabs"]))
    r = tool(["-p", str(t.pid), "--shrink"])
    check(r.returncode == 0 and re.fullmatch(r"freed \d+ bytes\n", r.stdout), "--shrink (all)",
          r.stdout + r.stderr)
    r = tool(["-p", str(t.pid), "--shrink", "nosuch"])
    check(r.returncode == 1 and one_line(r) and "no cache named nosuch" in r.stderr,
          "--shrink nosuch", r.stderr)
    r = tool(["-p", str(t.pid), "--control-stats"])
    names = [kv(l).get("name") for l in r.stdout.splitlines()]
    check(r.returncode == 0 and "ctl_a" in names and "ctl_b" in names and "kmalloc-64" in names,
          "--control-stats (every cache)", r.stdout[:300] + r.stderr)
    pl = [kv(l) for l in r.stdout.splitlines() if l.startswith("pressure=")]
    check(len(pl) == 1 and pl[0]["pressure"] in ("cgroup", "system", "none") and
          all(pl[0][k].isdigit() for k in ("events", "event_bytes", "high_trims", "high_bytes",
                                            "limit", "trim_ms_max")),
          "--control-stats: the pressure line", r.stdout[-400:])


def debug_live(t):
    """Debugging turned on for ctl_a in use: its twin ctl_a:FZ takes the
    new allocations (src/debug/twin.c), and turned off again."""
    c0, _ = json_cache(t.pid, "ctl_a")
    if c0["debug"]:
        print("debug: ctl_a was made a debug cache (%s): not checked" % c0["debug"])
        return
    r = tool(["-p", str(t.pid), "--set", "ctl_a", "debug=FZ"])
    check(r.returncode == 0 and r.stdout.strip() == "ctl_a debug - -> FZ", "--set debug=FZ",
          r.stdout + r.stderr)
    r = tool(["-p", str(t.pid), "--get", "ctl_a", "debug"])
    check(r.returncode == 0 and r.stdout.strip() == "FZ", "--get debug: its letters",
          r.stdout + r.stderr)
    t.cmd("alloc 3000")
    tw, _ = json_cache(t.pid, "ctl_a:FZ")
    # the target's own queue hands out its objects first: at most SLQB's
    # hiwater (32 here) or SLAB's limit (120 for ctl_a)
    check(tw["debug"] == "FZ" and tw["front"] == "debug" and tw["active_objs"] >= 3000 - 128
          and tw["num_slabs"] > 0, "the twin ctl_a:FZ holds the new objects in debug slabs",
          (tw["debug"], tw["front"], tw["active_objs"], tw["num_slabs"]))
    r = tool(["-p", str(t.pid), "--set", "ctl_a", "debug=-"])
    check(r.returncode == 0 and r.stdout.strip() == "ctl_a debug FZ -> -", "--set debug=-",
          r.stdout + r.stderr)
    r = tool(["-p", str(t.pid), "--set", "ctl_a:FZ", "debug=P"])
    check(r.returncode == 1 and one_line(r) and "it is the debug twin of ctl_a" in r.stderr,
          "--set on the twin refused", r.stdout + r.stderr)
    t.cmd("free 100000")
    tw, _ = json_cache(t.pid, "ctl_a:FZ")
    check(tw["active_objs"] == 0, "its objects freed through ctl_a went back to the twin",
          tw["active_objs"])
    r = tool(["-p", str(t.pid), "--validate", "ctl_a"])
    check(r.returncode == 0 and "0 with problems" in r.stdout, "--validate ctl_a (and its twin)",
          r.stdout + r.stderr)


MALFORMED = [b"\n", b" stats\n", b"stats \n", b"stats  ctl_a\n", b"STATS\n",
             b"set ctl_a order\n", b"set ctl_a order 3 4\n", b"set ctl_a Order 3\n",
             b"get * order\n", b"shrink a b\n", b"validate *\n", b"x" * 70 + b"\n",
             b"set ctl_a order\t3\n", b"stats ctl_a\x00\n", b"set ctl_a order 3\r\r\n",
             b"\xff\xfe\xfd\n", b"set " + b"c" * 64 + b" order 1\n", b"help me\n"]


def garbage(t, path):
    c0, _ = json_cache(t.pid, "ctl_a")
    check(t.cmd("churn") == "DONE", "the target churns")
    r0 = int(t.cmd("count").split()[1])
    # junk, then a good request on the same connection
    c = Conn(path)
    body, term = c.answer(b"\x00\x01\x02\x03\xff garbage \x7f\n")
    check(body == [] and term and term.startswith("error: byte 0x00 at offset 0"),
          "binary junk: one error line", (body, term))
    for m in MALFORMED:
        body, term = c.answer(m)
        check(body == [] and term and term.startswith("error: "), "malformed %r: error" % m,
              (body, term))
    body, term = c.answer(b"stats ctl_a\n")
    check(term == "ok" and len(body) == 1 and kv(body[0]).get("name") == "ctl_a",
          "the connection still serves after the errors", (body, term))
    c.close()
    c1, _ = json_cache(t.pid, "ctl_a")
    check(c1["order"] == c0["order"] and c1["tunables"] == c0["tunables"],
          "malformed requests changed nothing", (c0["tunables"], c1["tunables"]))
    # an overlong line
    c = Conn(path)
    c.s.sendall(b"a" * 5000)
    l = c.line()
    check(l == "error: request line over 4096 bytes: closing" and c.eof(),
          "an overlong line: error, then closed", l)
    c.close()
    # endless data
    c = Conn(path)
    sent = 0
    try:
        for _ in range(1000):
            c.s.sendall(b"z" * 1024)
            sent += 1024
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    check(sent < 1000 * 1024, "endless data: the server stops taking it", sent)
    c.close()
    # a slow peer (half a request) and a silent one, at once
    slow, silent = Conn(path), Conn(path)
    slow.s.sendall(b"stats ct")
    t0 = time.monotonic()
    l1, l2 = slow.line(), silent.line()
    dt = time.monotonic() - t0
    check(l1 == "error: no whole request within 1000 ms: closing" and slow.eof(),
          "a slow peer is dropped with an error", l1)
    check(l2 == "error: no whole request within 1000 ms: closing" and silent.eof(),
          "a silent peer is dropped with an error", l2)
    check(0.8 <= dt < 5, "... after the timeout", dt)
    slow.close()
    silent.close()
    # many connections
    conns = [Conn(path, read_greeting=False) for _ in range(40)]
    first = [c.line() for c in conns]
    served = sum(1 for l in first if l and l.startswith("qslab-control 1 pid"))
    busy = sum(1 for l in first if l and l.startswith("error: busy: 16 connections"))
    check(served == 16 and busy == 24, "40 connections: 16 served, 24 busy", (served, busy))
    for c in conns:
        c.close()
    for _ in range(50):  # the server notices the closes at its next poll
        r = tool(["-p", str(t.pid), "--get", "ctl_a", "order"])
        if "busy" not in r.stderr:
            break
        time.sleep(0.05)
    check(r.returncode == 0 and r.stdout.strip() == str(c0["order"]),
          "served again once they are gone", r.stdout + r.stderr)
    r1 = t.cmd("count").split()
    check(int(r1[1]) > r0 and r1[3] == "0", "the target kept allocating, correctly", (r0, r1))


def destroy_race(t, path):
    """Requests naming a cache that another thread creates and destroys in
    a loop: each is answered (ok, or no such cache), the target survives."""
    check(t.cmd("destroyloop") == "DONE", "the target destroys caches in a loop")
    r0 = int(t.cmd("rounds").split()[1])
    c = Conn(path)
    reqs = [b"validate ctl_tmp\n", b"shrink ctl_tmp\n", b"get ctl_tmp order\n",
            b"set ctl_tmp hiwater 2000\n", b"stats ctl_tmp\n"]  # (not every cache: ctl_b is busy)
    answered, bad, hits = 0, [], 0
    # 0.6 s of requests, longer (up to 10 s) until one finds the cache alive:
    # under load the destroy loop may hold it dead for a whole short window
    end, hard_end = time.monotonic() + 0.6, time.monotonic() + 10
    while time.monotonic() < end or (hits == 0 and time.monotonic() < hard_end):
        for q in reqs:
            body, term = c.answer(q)
            answered += 1
            if term == "ok":
                hits += 1
            elif not (term and (term.startswith("error: no cache named ctl_tmp")
                                or term.startswith("error: tune: no cache named ctl_tmp"))):
                bad.append((q, body, term))
    c.close()
    r1 = int(t.cmd("rounds").split()[1])
    check(not bad and answered > 20, "requests on a cache being destroyed: all answered",
          (answered, bad[:3]))
    check(r1 > r0 and hits > 0, "... while it was created and destroyed", (r0, r1, hits))


def lifecycle(t, path, cdir):
    check(t.cmd("fork") == "FORK -1 ENOENT", "a forked child serves nothing")
    r = tool(["-p", str(t.pid), "--get", "ctl_a", "order"])
    check(os.path.exists(path) and r.returncode == 0, "the child left the parent's socket",
          r.stderr)
    check(t.cmd("stop") == "STOP 0" and not os.path.exists(path), "qslab_control_stop removes it")
    r = tool(["-p", str(t.pid), "--get", "ctl_a", "order"])
    check(r.returncode == 1 and one_line(r) and re.search(
        r"process \d+ serves no qslab control socket \(no .*\): start it with QSLAB_CONTROL=1 "
        r"or qslab_control_start\(\)", r.stderr), "no socket: one line, exit 1", r.stderr)
    check(t.cmd("stop") == "STOP -1", "a second stop: -1")
    check(t.cmd("start") == "START 0" and os.path.exists(path), "qslab_control_start again")
    r = tool(["-p", str(t.pid), "--get", "ctl_a", "order"])
    check(r.returncode == 0, "served after the restart", r.stderr)


def stale(cdir):
    # a socket left by a process that was killed
    dead = subprocess.Popen(["true"])
    dead.wait()
    spath = "%s/%d.sock" % (cdir, dead.pid)
    s = socket.socket(socket.AF_UNIX)
    s.bind(spath)
    s.close()
    t = Target({"QSLAB_CONTROL_DIR": cdir}, args=["api"])
    check(not os.path.exists(spath), "a dead process's socket is swept at start", spath)
    check(os.path.exists("%s/%d.sock" % (cdir, t.pid)), "started by qslab_control_start()")
    check(t.stop() == 0, "the api target ends well")
    # a live process that serves nothing, with a left-over socket of its pid
    sl = subprocess.Popen(["sleep", "30"])
    try:
        r = tool(["-p", str(sl.pid), "--shrink"], env={"QSLAB_CONTROL_DIR": cdir})
        check(r.returncode == 1 and one_line(r) and "serves no qslab control socket" in r.stderr,
              "a process without the channel: one line", r.stderr)
        lpath = "%s/%d.sock" % (cdir, sl.pid)
        s = socket.socket(socket.AF_UNIX)
        s.bind(lpath)
        s.close()
        r = tool(["-p", str(sl.pid), "--shrink"], env={"QSLAB_CONTROL_DIR": cdir})
        check(r.returncode == 1 and one_line(r) and "is left over, nobody listens" in r.stderr,
              "a left-over socket: one line", r.stderr)
        os.unlink(lpath)
    finally:
        sl.kill()
        sl.wait()


def xdg(tmp):
    x = tmp + "/xdg"
    os.mkdir(x, 0o700)
    t = Target({"QSLAB_CONTROL": "1", "XDG_RUNTIME_DIR": x})
    path = "%s/qslab/%d.sock" % (x, t.pid)
    check(os.path.exists(path), "$XDG_RUNTIME_DIR/qslab holds the socket", path)
    r = tool(["-p", str(t.pid), "--get", "ctl_a", "order"])
    check(r.returncode == 0, "the tool finds it through the target's environment", r.stderr)
    check(t.stop() == 0 and not os.path.exists(path), "removed at exit")


def other_user(tmp, cdir, t):
    if os.geteuid() != 0:
        print("other user: skipped (run as root to check that another user is refused)")
        return
    setpriv = shutil.which("setpriv")
    if not setpriv:
        print("other user: skipped (no setpriv: util-linux)")
        return
    nobody = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    r = subprocess.run(nobody + ["true"], capture_output=True)
    if r.returncode != 0:
        nobody = [setpriv, "--reuid=nobody", "--regid=nobody", "--clear-groups"]
    odir = tmp + "/open"
    o = Target({"QSLAB_CONTROL": "1", "QSLAB_CONTROL_DIR": odir, "QSLAB_CONTROL_TEST_OPEN": "1"})
    try:
        opath = "%s/%d.sock" % (odir, o.pid)
        check(stat.S_IMODE(os.lstat(opath).st_mode) == 0o666, "test-open: the socket is 0666")
        c0, _ = json_cache(o.pid, "ctl_a")
        want = 3 if c0["order"] == 1 else 1  # another order than the default
        r = tool(["-p", str(o.pid), "--set", "ctl_a", "order=%d" % want], env={"QSLAB_CONTROL_DIR": odir},
                 prefix=nobody)
        check(r.returncode == 1 and one_line(r) and re.search(
            r"process \d+ refused the control connection: uid 65534 is neither the user of "
            r"process \d+ \(uid 0\) nor root", r.stderr),
            "nobody refused by SO_PEERCRED: one line", r.stdout + r.stderr)
        c, _ = json_cache(o.pid, "ctl_a")
        check(c["order"] == c0["order"], "the refused peer changed nothing", (c0["order"], c["order"]))
    finally:
        o.stop()
    r = tool(["-p", str(t.pid), "--set", "ctl_a", "order=1"], env={"QSLAB_CONTROL_DIR": cdir},
             prefix=nobody)
    check(r.returncode == 1 and one_line(r) and "cannot reach the control socket" in r.stderr
          and "EACCES" in r.stderr, "nobody stopped by the 0700 directory: one line",
          r.stdout + r.stderr)


def main():
    global TOOL, TARGET
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--target", required=True)
    # Two halves, each on a target of its own, so that ctest runs them side by
    # side (tools_control, tools_control_peers): this test was the longest of
    # every concurrency run of make test, under TSan twice the next one.
    ap.add_argument("--part", choices=("requests", "peers", "all"), default="all",
                    help="requests: place to debug_live; peers: garbage to xdg")
    a = ap.parse_args()
    TOOL, TARGET = a.tool, a.target
    tmp = tempfile.mkdtemp(prefix="qslab-ctl-")
    os.chmod(tmp, 0o711)  # nobody may pass (other_user); the directories below decide
    cdir = tmp + "/ctl"
    try:
        env = {"QSLAB_CONTROL": "1", "QSLAB_CONTROL_DIR": cdir}
        if a.part != "requests":
            # garbage's slow and silent peers are dropped after this (the
            # default, 5 s, would make them wait 5); the requests part keeps
            # the default, so that a tool stalled for a second by a loaded
            # machine between its connect and its request is still served
            env["QSLAB_CONTROL_TIMEOUT_MS"] = "1000"
        t = Target(env)
        try:
            path = place(t, cdir)
            if a.part in ("requests", "all"):
                order(t)
                hiwater(t)
                refusals(t)
                cached(t, path)
                shrink_validate(t)
                debug_live(t)
            if a.part in ("peers", "all"):
                garbage(t, path)
                destroy_race(t, path)
                lifecycle(t, path, cdir)
                other_user(tmp, cdir, t)
        finally:
            rc = t.stop()
        check(rc == 0, "the target ends well (its objects intact)", "%s\n%s" % (rc, t.stderr()))
        check(not os.path.exists(path), "the socket is removed at exit")
        if a.part in ("peers", "all"):
            stale(cdir)
            xdg(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("control_test: %d checks passed, %d failed" % (toolstest.passes, toolstest.failures))
    return 1 if toolstest.failures else 0


if __name__ == "__main__":
    sys.exit(main())
