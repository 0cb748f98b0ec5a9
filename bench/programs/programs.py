#!/usr/bin/env python3
"""bench/programs/programs.py - real programs under an allocator: peak RSS,
wall time, and their output to check against glibc's (the `programs`
section of `make bench`; docs/benchmarks.md, "Programs").

Each program runs in a process of its own with the allocator preloaded
(LD_PRELOAD) and the allocator's variables set (QSLAB_FRONT, QSLAB_OWNER);
nothing else runs preloaded (redis-cli, which feeds redis-server, runs on
glibc).  While it runs, its resident memory is sampled from
/proc/PID/statm every 25 ms; its peak is the kernel's high-water mark:
ru_maxrss from wait4 (VmHWM at its exit), which bench_spawn (bench/spawn.c),
the small process the program is forked from, reports; for redis-server,
the server's VmHWM read before it is shut down.

    python3 bench/programs/programs.py --list
    python3 bench/programs/programs.py PROGRAM [--mode full|quick|smoke]
        [--preload LIB] [--env NAME=VALUE]... [--series FILE] [--bin-dir DIR]

prints the check text (the program's output, which must not depend on the
allocator), then `result peak_rss_kib=... wall_s=... ...`.  With --series the
RSS samples go to FILE (seconds, KiB).  bench/run.py's programs section
(bench/runner/programs_section.py) imports this module and runs every program
under every allocator.  Standard library only.
"""

import argparse
import ctypes
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SAMPLE_S = 0.025  # RSS sampling period
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024

# Sizes per mode.  Full: a few seconds per run under glibc on the 2-vCPU VM;
# quick: about half, tens of MiB at the peak (docs/benchmarks.md, "Quick mode").
SCALES = {
    "full": dict(dict_gens=10, dict_entries=30000, threads_rounds=4, sqlite_rows=180000,
                 redis_keys=50000),
    "quick": dict(dict_gens=6, dict_entries=12000, threads_rounds=2, sqlite_rows=40000,
                  redis_keys=15000),
    "smoke": dict(dict_gens=3, dict_entries=1000, threads_rounds=1, sqlite_rows=1000,
                  redis_keys=300),
}


class RunError(Exception):
    pass


# --------------------------------------------------------------------------
# One process, measured

def die_with_parent():
    """In the child, before the exec: SIGKILL when the runner dies, so that
    a server never outlives it (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Proc:
    """A started process: its RSS sampled while it runs, its rusage (wait4)
    once it has exited.  A server (Redis) is killed if the runner dies."""

    def __init__(self, argv, env, executable=None, stdin=None, stdout=None, stderr=None,
                 cwd=None):
        self.t0 = time.monotonic()
        self.popen = subprocess.Popen(argv, executable=executable, env=env, stdin=stdin,
                                      stdout=stdout, stderr=stderr, cwd=cwd,
                                      preexec_fn=die_with_parent)
        self.pid = self.popen.pid
        self.series = []          # (seconds since the start, RSS KiB)
        self.rusage = None
        self.code = None          # exit code, -signal if killed
        self.wall = None
        self.sample()

    def sample(self):
        try:
            with open(f"/proc/{self.pid}/statm") as f:
                resident = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            return
        if resident:  # 0 once it is a zombie
            self.series.append((time.monotonic() - self.t0, resident * PAGE_KIB))

    def status_kib(self, field):
        """A "Field: N kB" line of /proc/PID/status (VmHWM, VmRSS), or None."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return None

    def poll(self):
        """True once the process has exited (and been waited for)."""
        if self.rusage is not None:
            return True
        pid, status, ru = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.wall = time.monotonic() - self.t0
        self.rusage = ru
        self.code = os.waitstatus_to_exitcode(status)
        self.popen.returncode = self.code  # waited for here, not by Popen
        return True

    def wait(self, deadline, what):
        """Sample until the process exits; kill it at the deadline."""
        while not self.poll():
            if time.monotonic() > deadline:
                self.kill()
                raise RunError(f"{what}: timed out, killed")
            self.sample()
            time.sleep(SAMPLE_S)

    def kill(self):
        if self.poll():
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status, ru = os.wait4(self.pid, 0)
        self.rusage, self.code = ru, os.waitstatus_to_exitcode(status)
        self.wall = time.monotonic() - self.t0
        self.popen.returncode = self.code


def tail(path, n=3):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip()]
        return " | ".join(lines[-n:])
    except OSError:
        return ""


# bench_spawn (bench/spawn.c), set by set_bin_dir: starts the programs that
# run to their end, so that their peak RSS is theirs alone.
SPAWN = None


def set_bin_dir(bin_dir):
    global SPAWN
    SPAWN = os.path.join(os.path.abspath(bin_dir), "bench_spawn")


class Watched:
    """The RSS of a process we did not start ourselves (bench_spawn's child)."""

    def __init__(self, pid, t0):
        self.pid, self.t0, self.series = pid, t0, []

    sample = Proc.sample


def run_simple(argv, env, work, timeout, stdin_path=None):
    """Run argv to its end through bench_spawn: (result numbers, stdout
    text, RSS series).  env is the program's; bench_spawn itself runs
    without LD_PRELOAD and passes it on."""
    if not SPAWN or not os.access(SPAWN, os.X_OK):
        raise RunError(f"no {SPAWN or 'bench_spawn'} (build the bench target)")
    out_path = os.path.join(work, "stdout")
    err_path = os.path.join(work, "stderr")
    plain = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    rfd, wfd = os.pipe()
    cmd = [SPAWN, "--fd", str(wfd)]
    cmd += ["-e", f"LD_PRELOAD={env['LD_PRELOAD']}"] if env.get("LD_PRELOAD") else []
    cmd += ["--"] + argv
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    report = os.fdopen(rfd)
    helper = child = None
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                helper = subprocess.Popen(cmd, env=plain, stdin=stdin, stdout=out, stderr=err,
                                          pass_fds=(wfd,))
            except OSError as e:
                raise RunError(f"{SPAWN}: {e}")
        os.close(wfd)
        wfd = -1
        first = report.readline().split()
        if len(first) != 2 or first[0] != "pid":
            helper.wait()
            raise RunError(f"bench_spawn exit {helper.returncode}: {tail(err_path)}")
        child = Watched(int(first[1]), time.monotonic())
        deadline = time.monotonic() + timeout
        while helper.poll() is None:
            if time.monotonic() > deadline:
                raise RunError(f"{os.path.basename(argv[0])}: timed out after {timeout} s, killed")
            child.sample()
            time.sleep(SAMPLE_S)
        last = report.readline().split()
    finally:
        if wfd >= 0:
            os.close(wfd)
        report.close()
        if stdin_path:
            stdin.close()
        if helper and helper.poll() is None:
            if child:
                try:
                    os.kill(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            helper.wait()
    fields = dict(zip(last[0::2], last[1::2]))
    if helper.returncode != 0 or "exit" not in fields:
        raise RunError(f"bench_spawn exit {helper.returncode}: {tail(err_path)}")
    if fields["exit"] != "0":
        raise RunError(f"{os.path.basename(argv[0])} exit {fields['exit']}: {tail(err_path)}")
    with open(out_path, errors="replace") as f:
        text = f.read()
    nums = {"peak_rss_kib": float(fields["maxrss_kib"]), "wall_s": float(fields["wall"]),
            "minflt": float(fields["minflt"]), "cpu_s": float(fields["utime"]) + float(fields["stime"]),
            "sampled_peak_kib": float(max((k for _, k in child.series), default=0))}
    return nums, text, child.series


# --------------------------------------------------------------------------
# The programs

def python_exe():
    """Debian's python3 (what tests/preload uses), else the one running us."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def python_version():
    py = python_exe()
    ver = version_of([py, "--version"], r"Python (\S+)")
    return f"{py} {ver}"


def version_of(argv, pattern, executable=None):
    try:
        r = subprocess.run(argv, executable=executable, capture_output=True, text=True,
                           timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "?"
    m = re.search(pattern, r.stdout + r.stderr)
    return m.group(1) if m else "?"


class Program:
    key = title = models = seed = ""
    metrics = ()  # extra result keys beyond peak_rss_kib and wall_s

    def available(self):
        """(True, what runs it) or (False, why not)."""
        return True, ""

    def run(self, scale, env, work, timeout):
        """Numbers, check text, RSS series of one run under env."""
        raise NotImplementedError


class PythonDicts(Program):
    def __init__(self, pymalloc):
        self.pymalloc = pymalloc
        self.key = "py_dict" if pymalloc else "py_dict_malloc"
        mode = "pymalloc (default)" if pymalloc else "PYTHONMALLOC=malloc"
        self.title = f"Python, {mode}: build and drop dicts of strings of mixed sizes"
        self.models = ("bench/programs/dict_churn.py: generations of dicts of str keys to str "
                       "values of 1 B..8 KiB, holes punched in the previous one, 3 kept alive"
                       + ("; pymalloc serves objects of 512 B and less from its own arenas "
                          "(mmap), malloc the rest" if pymalloc else
                          "; every object through malloc"))
        self.seed = "a language runtime's churn of dicts and strings of many sizes"

    def available(self):
        return True, python_version()

    def run(self, scale, env, work, timeout):
        env = dict(env, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
        if self.pymalloc:
            env.pop("PYTHONMALLOC", None)
        else:
            env["PYTHONMALLOC"] = "malloc"
        argv = [python_exe(), os.path.join(HERE, "dict_churn.py"), str(scale["dict_gens"]),
                str(scale["dict_entries"])]
        return run_simple(argv, env, work, timeout)


class PythonThreads(Program):
    key = "py_threads"
    title = "Python, PYTHONMALLOC=malloc: 4 threads handing objects to each other"
    models = ("tests/preload/alloc_heavy.py (the drop-in's test): 4 threads build dicts, "
              "lists, strings and bytearrays and hand some to the next thread, which frees "
              "them")
    seed = "threads handing objects to each other: frees far from their allocations"

    def available(self):
        return True, python_version()

    def run(self, scale, env, work, timeout):
        env = dict(env, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", PYTHONMALLOC="malloc")
        argv = [python_exe(), os.path.join(REPO, "tests", "preload", "alloc_heavy.py"),
                str(scale["threads_rounds"])]
        return run_simple(argv, env, work, timeout)


class Sqlite(Program):
    key = "sqlite"
    title = "sqlite3: build an indexed table in an in-memory database, 1 KiB pages"
    seed = "a database's page cache: one malloc of a page and its header per page"

    @property
    def models(self):
        return ("bench/programs/sqlite_fill.sql: rows of 200..1,399-byte text (about 800 B) "
                "from a recursive CTE, then an index; every page of the database is a malloc "
                "of a little over 1 KiB in SQLite's page cache")

    def available(self):
        exe = shutil.which("sqlite3")
        if not exe:
            return False, "no sqlite3 (Debian package sqlite3; scripts/install-peers installs it)"
        ver = version_of([exe, "--version"], r"^(\S+)")
        return True, f"{exe} {ver}"

    def run(self, scale, env, work, timeout):
        argv = [shutil.which("sqlite3"), "-batch", "-cmd",
                f".parameter set @rows {scale['sqlite_rows']}", ":memory:"]
        return run_simple(argv, env, work, timeout,
                          stdin_path=os.path.join(HERE, "sqlite_fill.sql"))


class Resp:
    """A minimal client of the Redis protocol over a unix socket."""

    def __init__(self, path, timeout):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.f = self.sock.makefile("rb")

    def cmd(self, *args):
        words = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.sock.sendall(b"*%d\r\n" % len(words)
                          + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words))
        return self.reply()

    def reply(self):
        line = self.f.readline()
        if not line:
            raise EOFError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RunError("redis: " + rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode(errors="replace")
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RunError(f"redis: bad reply {line!r}")

    def close(self):
        self.f.close()
        self.sock.close()


def redis_lengths(n):
    """Value lengths: 90% 500..2,000 bytes, 10% 2,001..6,000, fixed by n."""
    rng = random.Random(34)
    return [500 + rng.randrange(1501) if rng.random() < 0.9 else 2001 + rng.randrange(4000)
            for _ in range(n)]


def redis_protocol(path, n):
    """n SET commands in the Redis protocol, for redis-cli --pipe."""
    rng = random.Random(35)
    base = bytes(33 + rng.randrange(94) for _ in range(16384))
    with open(path, "wb") as f:
        chunk = []
        for i, ln in enumerate(redis_lengths(n)):
            k = b"key:%08d" % i
            o = (i * 7919) % 8192
            v = base[o:o + ln]
            chunk.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
            if len(chunk) == 4096:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))


class Redis(Program):
    key = "redis"
    title = "redis-server: filled with values of 500 B to 6 KiB through redis-cli --pipe"
    models = ("SET of N keys (90% of the values 500..2,000 bytes, 10% 2,001..6,000) on a "
              "private unix socket, no persistence; then INFO memory, DBSIZE, DEBUG DIGEST, "
              "SHUTDOWN NOSAVE. Peak: the server's VmHWM; used_memory: redis's own count, "
              "malloc_usable_size of every block it holds (so each allocator's size classes)")
    seed = "a cache server's values of a few hundred bytes to a few KiB"
    metrics = ("used_memory_kib",)

    def __init__(self):
        self.protocols = {}  # key count -> protocol file, made once per workspace
        self.major = None    # redis's major version, from available()

    @staticmethod
    def server():
        """(executable, argv[0]): redis-server, or redis-tools' redis-check-rdb
        (the same binary: it runs the server when called redis-server)."""
        exe = shutil.which("redis-server")
        if exe:
            return exe, "redis-server"
        exe = shutil.which("redis-check-rdb")
        return (exe, "redis-server") if exe else (None, None)

    def available(self):
        exe, _ = self.server()
        if not exe:
            return False, ("no redis-server (Debian package redis-tools; scripts/install-peers "
                           "installs it)")
        if not shutil.which("redis-cli"):
            return False, "no redis-cli (Debian package redis-tools)"
        ver = version_of(["redis-server", "--version"], r"v=(\S+)", executable=exe)
        m = re.match(r"(\d+)", ver)
        self.major = int(m.group(1)) if m else 0
        return True, (f"{exe} {ver} (glibc's column preloads libc.so.6: the binary is linked "
                      "with libjemalloc)")

    def run(self, scale, env, work, timeout):
        n = scale["redis_keys"]
        proto = self.protocols.get((work, n))
        if not proto or not os.path.exists(proto):
            proto = os.path.join(work, f"redis-{n}.proto")
            redis_protocol(proto, n)
            self.protocols[(work, n)] = proto
        exe, argv0 = self.server()
        env = dict(env)
        if not env.get("LD_PRELOAD"):
            # Debian's redis-server is linked with libjemalloc: without a
            # preload it would run on jemalloc.  libc.so.6 first in the
            # search order gives it glibc's malloc.
            env["LD_PRELOAD"] = "libc.so.6"
        plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        d = tempfile.mkdtemp(prefix="redis.", dir=work)
        sock = os.path.join(d, "redis.sock")
        conf = os.path.join(d, "redis.conf")
        if self.major is None:
            self.available()
        with open(conf, "w") as f:
            f.write(f"port 0\nunixsocket {sock}\nunixsocketperm 700\nsave \"\"\n"
                    f"appendonly no\ndir {d}\ndatabases 1\ndaemonize no\nloglevel warning\n")
            if self.major >= 7:  # DEBUG DIGEST: allowed by default before 7.0
                f.write("enable-debug-command local\n")
        log = os.path.join(d, "redis.log")
        deadline = time.monotonic() + timeout
        conn = server = None
        try:
            with open(log, "wb") as lf:
                try:
                    server = Proc([argv0, conf], env, executable=exe, stdout=lf,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                except OSError as e:
                    raise RunError(f"{exe}: {e}")
            try:
                while True:  # until it answers PING
                    if server.poll():
                        raise RunError(f"redis-server exit {server.code}: {tail(log)}")
                    if time.monotonic() > deadline:
                        raise RunError("redis-server did not answer in time")
                    server.sample()
                    try:
                        conn = Resp(sock, timeout)
                        if conn.cmd("PING") == "PONG":
                            break
                    except OSError:
                        if conn:
                            conn.close()
                        conn = None
                    time.sleep(0.01)
                cli_out = os.path.join(d, "cli.out")
                with open(proto, "rb") as pin, open(cli_out, "wb") as pout:
                    cli = subprocess.Popen(["redis-cli", "-s", sock, "--pipe"], stdin=pin,
                                           stdout=pout, stderr=subprocess.STDOUT, env=plain)
                    try:
                        while cli.poll() is None:
                            if server.poll():
                                raise RunError(f"redis-server exit {server.code} during the "
                                               f"fill: {tail(log)}")
                            if time.monotonic() > deadline:
                                raise RunError("redis-cli --pipe: timed out")
                            server.sample()
                            time.sleep(SAMPLE_S)
                    finally:
                        if cli.poll() is None:
                            cli.kill()
                            cli.wait()
                piped = tail(cli_out, 1)
                m = re.search(r"errors: (\d+), replies: (\d+)", piped)
                if cli.returncode != 0 or not m:
                    raise RunError(f"redis-cli --pipe exit {cli.returncode}: {piped}")
                server.sample()
                info = conn.cmd("INFO", "memory")
                used = re.search(r"^used_memory:(\d+)", info, re.M)
                if not used:
                    raise RunError("redis: no used_memory in INFO memory")
                dbsize = conn.cmd("DBSIZE")
                try:
                    digest = conn.cmd("DEBUG", "DIGEST")
                except RunError as e:  # DEBUG refused: the key count only
                    digest = f"(none: {e})"
                hwm = server.status_kib("VmHWM")
                try:
                    conn.cmd("SHUTDOWN", "NOSAVE")
                except (EOFError, OSError):
                    pass  # the server closes the connection as it goes
                server.wait(deadline, "redis-server")
            finally:
                if conn:
                    conn.close()
                server.kill()  # only if still running
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if hwm is None:
            raise RunError("redis-server: no VmHWM in /proc/PID/status")
        nums = {"peak_rss_kib": float(hwm), "wall_s": server.wall,
                "used_memory_kib": int(used.group(1)) / 1024,
                "cpu_s": server.rusage.ru_utime + server.rusage.ru_stime,
                "minflt": float(server.rusage.ru_minflt),
                "sampled_peak_kib": float(max((k for _, k in server.series), default=0))}
        check = (f"dbsize {dbsize}\ndigest {digest}\n"
                 f"replies {m.group(2)}, errors {m.group(1)}\n")
        return nums, check, server.series


PROGRAMS = [PythonDicts(pymalloc=False), PythonDicts(pymalloc=True), PythonThreads(), Sqlite(),
            Redis()]


def by_key(key):
    return next((p for p in PROGRAMS if p.key == key), None)


# --------------------------------------------------------------------------
# By hand

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("program", nargs="?", help=", ".join(p.key for p in PROGRAMS))
    ap.add_argument("--list", action="store_true", help="the programs and what runs them")
    ap.add_argument("--mode", default="full", choices=sorted(SCALES))
    ap.add_argument("--preload", default="", help="allocator library to preload (default: none)")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the program")
    ap.add_argument("--series", help="write the RSS samples (seconds, KiB) to this file")
    ap.add_argument("--timeout", type=int, default=600, help="seconds")
    ap.add_argument("--bin-dir", default=os.path.join(REPO, "build", "release", "bench"),
                    help="where bench_spawn is (default: build/release/bench)")
    args = ap.parse_args()
    set_bin_dir(args.bin_dir)
    if args.list:
        for p in PROGRAMS:
            ok, what = p.available()
            print(f"{p.key:15} {'' if ok else 'MISSING: '}{what}")
        return 0
    prog = by_key(args.program or "")
    if not prog:
        ap.error(f"name a program: {', '.join(p.key for p in PROGRAMS)}")
    ok, why = prog.available()
    if not ok:
        print(f"programs.py: {prog.key}: {why}", file=sys.stderr)
        return 1
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if args.preload:
        env["LD_PRELOAD"] = args.preload
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v
    work = tempfile.mkdtemp(prefix="qslab-programs.")
    try:
        nums, check, series = prog.run(SCALES[args.mode], env, work, args.timeout)
    except RunError as e:
        print(f"programs.py: {prog.key}: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(check if check.endswith("\n") else check + "\n")
    print("result " + " ".join(f"{k}={v:.6g}" for k, v in nums.items()))
    if args.series:
        with open(args.series, "w") as f:
            f.write("# seconds\tRSS KiB\n")
            f.writelines(f"{t:.3f}\t{k}\n" for t, k in series)
    return 0


if __name__ == "__main__":
    sys.exit(main())
