"""bench/runner/allocators.py - the columns of the tables: qslab (a column per
owner mode), glibc and the peer allocators installed on this machine.

A Contender is one column: an allocator's library to preload (none for
glibc), the driver arguments it gets and the environment it runs in.
find_allocators looks for the peers' libraries (PEERS) in the usual library
directories; qslab_version names the version and commit the report shows.
"""

import os
import re
import subprocess


# the repository: bench/runner/allocators.py is three levels down
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64",
            "/usr/local/lib", "/usr/lib"]

# name: (library file names, Debian package)
PEERS = {
    "jemalloc": (["libjemalloc.so.2"], "libjemalloc2"),
    "tcmalloc": (["libtcmalloc_minimal.so.4"], "libtcmalloc-minimal4"),
    "mimalloc": (["libmimalloc.so.2", "libmimalloc.so.2.0"], "libmimalloc2.0"),
}


def run_env(overrides, preload=None):
    """This process's environment without LD_PRELOAD, then `preload` as
    LD_PRELOAD (if any) and the overrides (name -> value; None: unset)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


class Contender:
    """One column of a table: an allocator, the driver arguments it gets, and
    the environment it runs in (env: name -> value, None to unset).

    The subjects (qslab, one column per owner mode: qslab-cpu, qslab-thread)
    come first; the first of them is the primary one, whose ratio to every
    other column the tables show; each further subject gets a ratio to the
    primary.  An `info` column (qslab through malloc in the object-cache test)
    is shown but is not a peer: summaries and targets ignore it.
    """

    def __init__(self, name, preload, version, extra_args=(), info=False, env=None,
                 subject=False, short=None, rounds=None):
        self.name = name
        self.rounds = rounds  # runs only in the first `rounds` rounds (None: in every one)
        self.preload = preload
        self.version = version
        self.extra_args = list(extra_args)
        self.info = info
        self.env = dict(env or {})
        self.subject = subject
        self.short = short or name  # in ratio headers between owner modes: thread/cpu

    def environ(self):
        """The environment of this contender's runs."""
        return run_env(self.env, self.preload)

    def describe(self):
        env = " ".join(f"{k}={v}" for k, v in self.env.items() if v is not None)
        return f"{self.name} {self.version}".strip() + (f" ({env})" if env else "")


def package_version(pkg):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


# qslab's owner modes (QSLAB_OWNER): who owns the object queues.  One qslab
# column per mode; "default" leaves QSLAB_OWNER unset (the library's choice).
OWNER_VAR = "QSLAB_OWNER"
DEFAULT_OWNERS = ["cpu", "thread"]


def qslab_contenders(qslab_lib, owners=None):
    """One qslab column per owner mode, the first the primary subject."""
    version = qslab_version()
    cols = []
    for mode in owners or DEFAULT_OWNERS:
        if mode == "default":
            cols.append(Contender("qslab", qslab_lib, version, env={OWNER_VAR: None},
                                  subject=True, short="q"))
        else:
            cols.append(Contender(f"qslab-{mode}", qslab_lib, version,
                                  env={OWNER_VAR: mode}, subject=True, short=mode))
    return cols


def find_allocators(qslab_lib, owners=None):
    """qslab (a column per owner mode), glibc, then the peers that are
    installed; and the missing ones."""
    glibc = os.confstr("CS_GNU_LIBC_VERSION") or "glibc"
    allocs = qslab_contenders(qslab_lib, owners) + [
        Contender("glibc", None, glibc.replace("glibc ", ""))]
    missing = []
    for name, (files, pkg) in PEERS.items():
        path = next((os.path.join(d, f) for f in files for d in LIB_DIRS
                     if os.path.exists(os.path.join(d, f))), None)
        if path:
            allocs.append(Contender(name, path, package_version(pkg)))
        else:
            missing.append((name, pkg))
    return allocs, missing


def qslab_version():
    try:
        text = open(os.path.join(REPO, "include", "qslab.h")).read()
        major = re.search(r"QSLAB_VERSION_MAJOR (\d+)", text).group(1)
        minor = re.search(r"QSLAB_VERSION_MINOR (\d+)", text).group(1)
        version = f"{major}.{minor}"
    except (OSError, AttributeError):
        version = "?"
    commit = git("rev-parse", "--short", "HEAD")
    if commit:  # local changes to the allocator itself, not to bench/ or docs
        dirty = git("status", "--porcelain", "--", "src", "include")
        version += f" at {commit}" + (" + local changes to src/" if dirty else "")
    return version


def git(*args):
    try:
        out = subprocess.run(["git", "-C", REPO] + list(args), capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""
