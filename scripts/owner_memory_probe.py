"""owner_memory_probe.py - the Python half of owner_memory.py's probe:
builds scripts/owner_memory_probe.c and scripts/owner_memory_workloads.c
against a build's libqslab.a, runs it with the library's defaults (under
QSLAB_FAKE_NUMA when asked) and parses its "kind key=value ..." lines; and
what this machine has (CPUs, nodes, possible CPUs).
"""

import glob
import os
import re
import subprocess
import sys

from owner_memory_model import FRONTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_lib(build):
    lib = os.path.join(build, "libqslab.a")
    if not os.path.exists(lib):
        print(f"# {lib} missing: building it", file=sys.stderr)
        subprocess.run(["cmake", "-S", ROOT, "-B", build], check=True, stdout=sys.stderr)
        subprocess.run(["cmake", "--build", build, "-j2"], check=True, stdout=sys.stderr)
    return lib


def build_probe(build, tmp):
    lib = ensure_lib(build)
    exe = os.path.join(tmp, "owner_memory_probe")
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O2", "-std=gnu11", "-pthread", "-I", os.path.join(ROOT, "src"),
           "-I", os.path.join(ROOT, "include"),
           os.path.join(ROOT, "scripts", "owner_memory_probe.c"),
           os.path.join(ROOT, "scripts", "owner_memory_workloads.c"), lib, "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("owner_memory.py: the probe does not build:\n" + " ".join(cmd) + "\n" + r.stderr)
    return exe


def parse_probe(text):
    """Lines "kind key=value ...": a list of (kind, {key: int or str})."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        kv = {}
        for f in parts[1:]:
            k, _, v = f.partition("=")
            kv[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
        out.append((parts[0], kv))
    return out


def run_probe(exe, args, nodes=None):
    env = dict(os.environ, QSLAB_PURGE="0")
    env.pop("QSLAB_TUNE", None)   # the defaults, whatever the caller's shell says
    env.pop("QSLAB_FRONT", None)
    if nodes:
        env["QSLAB_FAKE_NUMA"] = str(nodes)
    else:
        env.pop("QSLAB_FAKE_NUMA", None)
    r = subprocess.run([exe] + args, capture_output=True, text=True, env=env, timeout=120)
    if r.returncode != 0:
        sys.exit(f"owner_memory.py: probe {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    return parse_probe(r.stdout)


def read_params(exe, specs, nodes=None):
    """{front: [cache params]}, and the machine line (sizes of the structures)."""
    res, machine = {}, None
    for f in FRONTS:
        lines = run_probe(exe, ["params", f] + specs, nodes)
        machine = next(kv for k, kv in lines if k == "machine")
        res[f] = [kv for k, kv in lines if k == "cache"]
    return res, machine


def this_vm():
    """(CPUs, nodes) of this machine: os.cpu_count() and sysfs's nodes."""
    nodes = len(glob.glob("/sys/devices/system/node/node[0-9]*")) or 1
    return os.cpu_count() or 1, nodes


def possible_cpus():
    """Possible CPUs (/sys/devices/system/cpu/possible, as the library's
    qs_os_cpu_possible reads them): what SLUB's order and SLAB's free_limit
    count; 0 if unknown."""
    try:
        text = open("/sys/devices/system/cpu/possible").read().strip()
    except OSError:
        return 0
    last = -1
    for part in text.split(","):
        last = max(last, int(part.split("-")[-1]))
    return last + 1
