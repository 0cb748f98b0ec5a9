#!/usr/bin/env bash
# git_session.sh: a deterministic git workload, run by real_git.sh in an empty
# directory on glibc and under qslab-run.  Fixed authors, dates and
# configuration make every object id, and so the whole output, the same.
set -euo pipefail
export HOME=$PWD/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$PWD/home/gitconfig
export GIT_AUTHOR_NAME="A U Thor" GIT_AUTHOR_EMAIL=author@example.com
export GIT_COMMITTER_NAME="C O Mitter" GIT_COMMITTER_EMAIL=committer@example.com
export GIT_PAGER=cat PAGER=cat GIT_TERMINAL_PROMPT=0 TZ=UTC LC_ALL=C
mkdir -p home
: > home/gitconfig

day=0
commit() { # commit MESSAGE: the next day at noon
    day=$((day + 1))
    local d
    d=$(printf '2024-01-%02dT12:00:00+0000' "$day")
    GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git commit -q -m "$1"
}

# f PATH SEED LINES: a text file whose lines depend on SEED.  fs: the same
# for every "PATH SEED LINES" line of its input, in one awk (a process per
# file cost most of this script's time: these VMs start a process slowly).
fs() {
    local spec
    spec=$(cat)
    printf '%s\n' "$spec" | awk '{ d = $1; if (sub(/\/[^\/]*$/, "", d)) print d }' | sort -u |
        xargs -r mkdir -p
    printf '%s\n' "$spec" | awk '{ x = $2 + 1; for (i = 0; i < $3; i++) {
        x = (x * 16807) % 2147483647; printf "line %d of file %d: %d %s\n", i, $2, x, substr("qslab-preload-test", 1 + x % 10) > ($1)
    } close($1) }'
}
f() { echo "$1 $2 $3" | fs; }

git init -q -b main repo
cd repo
git config gc.auto 0
git config gc.autoDetach false
git config core.autocrlf false
git config pack.threads 2

for i in $(seq 0 199); do echo "src/d$((i % 10))/file$i.txt $i $((20 + i % 50))"; done | fs
git add -A
commit "initial: 200 files"

{
    for i in $(seq 0 4 199); do echo "src/d$((i % 10))/file$i.txt $((i + 1000)) $((30 + i % 40))"; done
    for i in $(seq 200 219); do echo "src/new/file$i.txt $i 25"; done
} | fs
git rm -q src/d3/file3.txt src/d3/file13.txt src/d7/file7.txt
git add -A
commit "modify 50, add 20, remove 3"

git checkout -q -b topic
mkdir -p src/moved
for i in $(seq 1 10); do git mv "src/d1/file$((i * 10 + 1)).txt" "src/moved/"; done
f big/data.txt 7 40000
head -c 300000 big/data.txt | tr 'a-z' 'n-za-m' > big/rot13.txt
git add -A
commit "topic: move 10 files, add 2 large files"

git checkout -q main
for i in $(seq 2 10 199); do echo "src/d2/file$i.txt $((i + 2000)) 33"; done | fs
git add -A
commit "main: rewrite d2"
day=$((day + 1))
d=$(printf '2024-01-%02dT12:00:00+0000' "$day")
GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git merge -q --no-ff -m "merge topic" topic

echo "== log --stat"
git log --stat --format='%H %an %ad %s' --date=iso
echo "== diff --stat"
git diff --stat HEAD~3 HEAD
echo "== diff of one file"
git diff HEAD~3 HEAD -- src/d4/file4.txt | head -n 20
echo "== ls-tree"
git ls-tree -r HEAD | cksum
echo "== blame"
git blame --line-porcelain src/d2/file2.txt | grep -c '^author '
echo "== gc"
git gc --quiet
git count-objects -v | grep -E '^(count|in-pack|packs|garbage):'
echo "== fsck"
git fsck --full --strict --no-progress 2>&1
echo "== after gc"
git log --format='%H %T %s' | cksum
git rev-parse HEAD HEAD^{tree}
git archive --format=tar HEAD | cksum
git cat-file -p HEAD
git status --short | head -n 5
echo "== end"
