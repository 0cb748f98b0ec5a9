#!/usr/bin/env python3
"""man_test (ctest, label integration): the man pages stay honest.

  - every option tools/qslabinfo.c accepts (its getopt_long short string and
    long option table) appears in man/man1/qslabinfo.1, and so does every
    option its --help names;
  - every QSLAB_* environment variable the library reads (getenv or
    qs_os_getenv in src/) appears in man/man3/qslab.3, and so does every
    function declared in include/qslab.h;
  - every option and sort key of tools/qslabtop.c appears in
    man/man1/qslabtop.1;
  - when groff is installed, the pages format without a warning
    (groff -man -ww -z); without it that check is skipped with a message.

Usage: man_test.py SOURCE_DIR [QSLABINFO]
"""
import glob
import os
import re
import shutil
import subprocess
import sys

src = sys.argv[1]
tool = sys.argv[2] if len(sys.argv) > 2 else None
errors = []


def page_text(path):
    """The words of a roff page: escapes for '-' made plain, fonts dropped."""
    t = open(path, encoding="utf-8").read()
    t = t.replace("\\-", "-").replace("\\(en", "-").replace("\\&", "")
    return re.sub(r"\\f[BIRP]|\\f\(..|\\f\[[^]]*\]", "", t)


def mentions(text, word):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


# qslabinfo(1) against the option parser.
c = open(os.path.join(src, "tools/qslabinfo.c"), encoding="utf-8").read()
m = re.search(r'getopt_long\(argc, argv, "([^"]*)"', c)
if not m:
    sys.exit("man_test: no getopt_long call found in tools/qslabinfo.c")
options = {"-" + ch for ch in m.group(1) if ch.isalnum()}
table = re.search(r"struct option longs\[\] = \{(.*?)\};", c, re.S)
if not table:
    sys.exit("man_test: no long option table (longs[]) found in tools/qslabinfo.c")
options |= {"--" + n for n in re.findall(r'\{"([\w-]+)"', table.group(1))}
if tool:
    h = subprocess.run([tool, "--help"], capture_output=True, text=True)
    if h.returncode != 0:
        errors.append(f"{tool} --help exited with status {h.returncode}: {h.stderr.strip()}")
    options |= set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", h.stdout + h.stderr))
page1 = page_text(os.path.join(src, "man/man1/qslabinfo.1"))
for o in sorted(options):
    if not mentions(page1, o):
        errors.append(f"man/man1/qslabinfo.1 does not mention option {o}")

# qslab(3) against the environment variables read and the API.
names = set()
for f in glob.glob(os.path.join(src, "src/**/*.c"), recursive=True):
    names |= set(re.findall(r'getenv\(\s*"(QSLAB_\w+)"', open(f, encoding="utf-8").read()))
if len(names) < 5:
    errors.append(f"only {len(names)} QSLAB_ getenv names found in src/: the pattern is stale")
h = open(os.path.join(src, "include/qslab.h"), encoding="utf-8").read()
funcs = set(re.findall(r"\b(qslab_\w+)\s*\(", re.sub(r"/\*.*?\*/", "", h, flags=re.S)))
page3 = page_text(os.path.join(src, "man/man3/qslab.3"))
for n in sorted(names):
    if not mentions(page3, n):
        errors.append(f"man/man3/qslab.3 does not mention environment variable {n}")
for n in sorted(funcs):
    if not mentions(page3, n):
        errors.append(f"man/man3/qslab.3 does not mention function {n}")

# qslabtop(1) against its option parser and its sort keys.
top_options = set()
c = open(os.path.join(src, "tools/qslabtop.c"), encoding="utf-8").read()
m = re.search(r'getopt_long\(argc, argv, "([^"]*)"', c)
table = re.search(r"struct option longs\[\] = \{(.*?)\};", c, re.S)
keys = re.search(r"sort_keys\[\] = \{(.*?)\};", c, re.S)
if not m or not table or not keys:
    errors.append("tools/qslabtop.c: no getopt_long call, long option table or sort_keys[]")
else:
    top_options = {"-" + ch for ch in m.group(1) if ch.isalnum()}
    top_options |= {"--" + n for n in re.findall(r'\{"([\w-]+)"', table.group(1))}
    page = open(os.path.join(src, "man/man1/qslabtop.1"), encoding="utf-8").read()
    text = page_text(os.path.join(src, "man/man1/qslabtop.1"))
    for o in sorted(top_options):
        if not mentions(text, o):
            errors.append(f"man/man1/qslabtop.1 does not mention option {o}")
    for k in re.findall(r"\{'(\w)'", keys.group(1)):
        if not re.search(r"^\.B %s$" % k, page, re.M):
            errors.append(f"man/man1/qslabtop.1 does not document sort key {k}")

# Formatting.
groff = shutil.which("groff")
if groff:
    for p in ("man/man1/qslabinfo.1", "man/man1/qslabtop.1", "man/man3/qslab.3"):
        r = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", os.path.join(src, p)],
                           capture_output=True, text=True)
        if r.returncode != 0 or r.stderr.strip():
            errors.append(f"groff warns about {p}:\n{r.stderr.strip()}")
else:
    print("man_test: groff not installed: formatting not checked (apt-get install groff-base)")

print(f"man_test: {len(options)} options of qslabinfo, {len(top_options)} of qslabtop, "
      f"{len(names)} environment variables, {len(funcs)} functions checked")
if errors:
    print("\n".join("man_test: FAIL: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
print("man_test: ok")
