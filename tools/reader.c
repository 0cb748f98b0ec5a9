/*
 * reader: locate and read another process's qslab (reader.h); shared by
 * qslabinfo and qslabtop.
 *
 * How: find the mapped ELF objects of the target in /proc/PID/maps, look
 * up `qslab_observe_root` in their .dynsym or .symtab (through
 * /proc/PID/map_files/, else the path), add the load bias, and read the
 * root and everything it points to with process_vm_readv.  Every pointer
 * followed must lie in a readable mapping of the target; every list walk
 * is bounded; a read whose generation (observe.h) was odd or moved is
 * retried a bounded number of times.  The statistics are computed by the
 * library's own arithmetic (src/observe/stats_calc.h).
 */
#define _GNU_SOURCE
#include "reader.h"
#include "observe/stats_calc.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

pid_t g_pid;
int g_pidfd = -1; /* g_pid's pidfd once attached (-1: none, or no pidfd_open) */
const char *prog = "qslabinfo";
void (*die_hook)(void);

void die(int status, const char *fmt, ...)
{
    if (die_hook)
        die_hook();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

/* A process id from the command line (-p), or the process ends with one
 * line. */
void die_no_qslab(void)
{
    die(EXIT_CANNOT, "process %d does not use qslab (no qslab_observe_root in its mapped objects%s%s%s): start "
        "the program with qslab-run (e.g. qslabinfo -- qslab-run PROGRAM), or with libqslab-malloc.so in "
        "LD_PRELOAD", (int)g_pid, stripped_exe[0] ? "; its executable " : "", stripped_exe,
        stripped_exe[0] ? " has no symbol table, so a qslab linked into it statically cannot be found" : "");
}

pid_t parse_pid(const char *arg)
{
    char *end;
    errno = 0;
    long pid = strtol(arg, &end, 10);
    if (errno || *end || pid <= 0 || pid > INT_MAX)
        die(EXIT_USAGE, "bad process id '%s': a number from 1", arg);
    return (pid_t)pid;
}

/* ---------------------------------------------------------------- maps */

struct mapping *maps;
size_t nmaps;

bool load_maps(void)
{
    char fn[64];
    snprintf(fn, sizeof fn, "/proc/%d/maps", (int)g_pid);
    FILE *f = fopen(fn, "r");
    if (!f) {
        if (errno == ENOENT)
            explain_access(ESRCH);
        explain_access(errno);
    }
    size_t cap = nmaps ? nmaps + 64 : 256;
    struct mapping *m = malloc(cap * sizeof(*m));
    size_t n = 0;
    char line[4096 + 512];
    while (m && fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n')) { /* an over-long line: skip its rest */
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
        }
        unsigned long long lo, hi, off;
        char perms[8];
        int pos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &lo, &hi, perms, &off, &pos) != 4)
            continue;
        if (n == cap) {
            if (cap > (1u << 24))
                break; /* a hostile map count: what we have */
            cap *= 2;
            struct mapping *g = realloc(m, cap * sizeof(*m));
            if (!g)
                break;
            m = g;
        }
        struct mapping *e = &m[n++];
        e->lo = lo;
        e->hi = hi;
        e->off = off;
        e->r = perms[0] == 'r';
        e->w = perms[1] == 'w';
        const char *p = line + pos;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, "\n");
        if (len >= sizeof e->path)
            len = sizeof e->path - 1;
        memcpy(e->path, p, len);
        e->path[len] = '\0';
    }
    fclose(f);
    if (!m)
        die(EXIT_CANNOT, "out of memory");
    free(maps);
    maps = m;
    nmaps = n;
    if (n == 0) /* a zombie, or a kernel thread: nothing mapped */
        return false;
    return true;
}

/* [addr, addr + len) inside readable mappings with no gap between them.
 * One object may span two: a program's .data/.bss ends in the last page
 * of its file's writable mapping and goes on in the anonymous mapping
 * after it (a structure across that boundary was refused as unreadable
 * once obs_fake's globals moved: the ASan build, 2026-12-01).  The list is
 * in address order, as /proc/PID/maps gives it. */
bool readable(uint64_t addr, size_t len)
{
    if (!addr || addr + len < addr)
        return false;
    uint64_t end = addr + len;
    for (size_t i = 0; i < nmaps && addr < end; i++)
        if (addr >= maps[i].lo && addr < maps[i].hi) {
            if (!maps[i].r)
                return false;
            addr = maps[i].hi; /* the rest must start where this one ends */
        }
    return addr >= end;
}

/* ---------------------------------------------------------------- reads */

int rd(uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(g_pid, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return 0;
    return n < 0 ? -errno : -EFAULT;
}

/* A checked read: the range must be mapped readable, the read complete. */
bool rdc(uint64_t addr, void *buf, size_t len, size_t align)
{
    if ((align && addr % align) || !readable(addr, len))
        return false;
    int r = rd(addr, buf, len);
    if (r == -EPERM || r == -ESRCH)
        explain_access(-r);
    return r == 0;
}

/* ---------------------------------------------------------------- permission */

long status_field(pid_t pid, const char *key)
{
    char fn[64], line[512];
    snprintf(fn, sizeof fn, pid ? "/proc/%d/status" : "/proc/self/status", (int)pid);
    FILE *f = fopen(fn, "r");
    if (!f)
        return -1;
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static bool have_cap_sys_ptrace(void)
{
    char line[512];
    FILE *f = fopen("/proc/self/status", "r");
    bool cap = false;
    if (!f)
        return false;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "CapEff:", 7) == 0) {
            unsigned long long v = strtoull(line + 7, NULL, 16);
            cap = (v >> 19) & 1; /* CAP_SYS_PTRACE */
        }
    fclose(f);
    return cap;
}

void explain_access(int err)
{
    if (err == ESRCH || (kill(g_pid, 0) != 0 && errno == ESRCH))
        die(EXIT_CANNOT, "no process %d (ESRCH: no such process)", (int)g_pid);
    if (err != EPERM && err != EACCES)
        die(EXIT_CANNOT, "cannot read process %d: %s", (int)g_pid, strerror(err));
    long uid = status_field(g_pid, "Uid"), me = (long)geteuid();
    bool cap = have_cap_sys_ptrace();
    int scope = -1;
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = -1;
        fclose(f);
    }
    if (uid >= 0 && uid != me && !cap)
        die(EXIT_CANNOT,
            "cannot read process %d (EPERM): it runs as uid %ld and you are uid %ld without "
            "CAP_SYS_PTRACE (run as that user, or as root)",
            (int)g_pid, uid, me);
    if (scope == 3)
        die(EXIT_CANNOT, "cannot read process %d (EPERM): kernel.yama.ptrace_scope is 3 (no "
                         "process may read another)", (int)g_pid);
    if (scope == 2 && !cap)
        die(EXIT_CANNOT, "cannot read process %d (EPERM): kernel.yama.ptrace_scope is 2 (only "
                         "with CAP_SYS_PTRACE)", (int)g_pid);
    if (scope == 1 && !cap)
        die(EXIT_CANNOT,
            "cannot read process %d (EPERM): kernel.yama.ptrace_scope is 1 (only its ancestors, "
            "or a process it named with prctl(PR_SET_PTRACER), may read it; or use "
            "CAP_SYS_PTRACE)", (int)g_pid);
    die(EXIT_CANNOT, "cannot read process %d (%s): the kernel refused (a process that is not "
                     "dumpable, e.g. setuid, or a security module)",
        (int)g_pid, err == EPERM ? "EPERM" : "EACCES");
}

/* ---------------------------------------------------------------- ELF */

/* The executable without a symbol table, if it is (for the message when no
 * qslab is found: a static qslab in it would not be seen). */
char stripped_exe[256];

static bool pread_all(int fd, void *buf, size_t len, uint64_t off, uint64_t fsize)
{
    if (off > fsize || len > fsize - off)
        return false;
    return pread(fd, buf, len, (off_t)off) == (ssize_t)len;
}

/* Look `name` up in one symbol table section (and its string table). */
static bool elf_lookup(int fd, uint64_t fsize, const Elf64_Shdr *sh, const Elf64_Shdr *strsh,
                       const char *name, Elf64_Sym *out)
{
    if (sh->sh_entsize != sizeof(Elf64_Sym) || strsh->sh_type != SHT_STRTAB)
        return false;
    uint64_t nsym = sh->sh_size / sizeof(Elf64_Sym);
    if (nsym > (1u << 22) || strsh->sh_size > (64u << 20))
        return false;
    char *str = malloc(strsh->sh_size + 1);
    Elf64_Sym *syms = malloc(nsym * sizeof(Elf64_Sym) + 1);
    bool found = false;
    if (str && syms && pread_all(fd, str, strsh->sh_size, strsh->sh_offset, fsize) &&
        pread_all(fd, syms, nsym * sizeof(Elf64_Sym), sh->sh_offset, fsize)) {
        str[strsh->sh_size] = '\0';
        size_t nl = strlen(name);
        for (uint64_t i = 0; i < nsym && !found; i++) {
            const Elf64_Sym *s = &syms[i];
            if (s->st_name >= strsh->sh_size || s->st_shndx == SHN_UNDEF)
                continue;
            if (strsh->sh_size - s->st_name > nl && memcmp(str + s->st_name, name, nl + 1) == 0 &&
                ELF64_ST_TYPE(s->st_info) == STT_OBJECT) {
                *out = *s;
                found = true;
            }
        }
    }
    free(str);
    free(syms);
    return found;
}

/* The root's address in the target if the object mapped at m (file
 * offset 0) defines it. */
static bool elf_find_root(const struct mapping *m, struct root_loc *loc)
{
    char fn[512];
    int fd = -1;
    snprintf(fn, sizeof fn, "/proc/%d/map_files/%llx-%llx", (int)g_pid, (unsigned long long)m->lo,
             (unsigned long long)m->hi);
    fd = open(fn, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(fn, sizeof fn, "/proc/%d/root%s", (int)g_pid, m->path);
        fd = open(fn, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0)
        fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat sb;
    bool ok = false;
    Elf64_Ehdr eh;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        goto out;
    uint64_t fsize = (uint64_t)sb.st_size;
    if (!pread_all(fd, &eh, sizeof eh, 0, fsize) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_shnum == 0 || eh.e_phnum == 0 ||
        eh.e_phnum > 1024)
        goto out;
    /* the load bias: the mapping at file offset 0 holds the PT_LOAD at offset 0 */
    Elf64_Phdr ph[1024];
    if (!pread_all(fd, ph, eh.e_phnum * sizeof(Elf64_Phdr), eh.e_phoff, fsize))
        goto out;
    long pagesz = sysconf(_SC_PAGESIZE);
    bool have_load = false;
    uint64_t bias = 0;
    for (unsigned i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_offset & ~(uint64_t)(pagesz - 1)) == 0) {
            bias = m->lo - (ph[i].p_vaddr & ~(uint64_t)(pagesz - 1));
            have_load = true;
            break;
        }
    if (!have_load)
        goto out;
    Elf64_Shdr *sh = malloc(eh.e_shnum * sizeof(Elf64_Shdr));
    if (!sh || !pread_all(fd, sh, eh.e_shnum * sizeof(Elf64_Shdr), eh.e_shoff, fsize)) {
        free(sh);
        goto out;
    }
    Elf64_Sym sym;
    for (unsigned i = 0; i < eh.e_shnum; i++)
        if (sh[i].sh_type == SHT_SYMTAB)
            loc->has_symtab = true;
    /* .dynsym first (a shared library's), then .symtab (a static link) */
    for (int pass = 0; pass < 2 && !ok; pass++)
        for (unsigned i = 0; i < eh.e_shnum && !ok; i++) {
            if (sh[i].sh_type != (pass ? SHT_SYMTAB : SHT_DYNSYM) || sh[i].sh_link >= eh.e_shnum)
                continue;
            if (elf_lookup(fd, fsize, &sh[i], &sh[sh[i].sh_link], "qslab_observe_root", &sym)) {
                loc->addr = (eh.e_type == ET_DYN ? bias : 0) + sym.st_value;
                snprintf(loc->path, sizeof loc->path, "%s", m->path);
                ok = true;
            }
        }
    free(sh);
out:
    close(fd);
    return ok;
}

/* Every root in the target (a process may hold two qslabs: e.g. a static
 * one in the executable and the drop-in); returns how many. */
size_t find_roots(struct root_loc *locs, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < nmaps && n < max; i++) {
        const struct mapping *m = &maps[i];
        if (m->off != 0 || m->path[0] != '/' || !m->r)
            continue;
        bool seen = false; /* the same object mapped twice at offset 0 */
        for (size_t j = 0; j < i; j++)
            if (maps[j].off == 0 && strcmp(maps[j].path, m->path) == 0)
                seen = true;
        if (seen)
            continue;
        locs[n].has_symtab = false;
        if (elf_find_root(m, &locs[n]))
            n++;
        else if (!locs[n].has_symtab && !stripped_exe[0]) {
            char fn[64], exe[256];
            snprintf(fn, sizeof fn, "/proc/%d/exe", (int)g_pid);
            ssize_t l = readlink(fn, exe, sizeof exe - 1);
            if (l > 0 && (exe[l] = '\0', strcmp(exe, m->path) == 0))
                snprintf(stripped_exe, sizeof stripped_exe, "%s", m->path);
        }
    }
    return n;
}

/* ---------------------------------------------------------------- snapshot */

struct qs_observe_root root;
uint64_t root_addr;
char why[256]; /* why the last attempt failed */

#define BAD(...) (snprintf(why, sizeof why, __VA_ARGS__), false)

/* Brent's cycle detection for the lists walked in the target: each address
 * visited is checked against one saved address, which moves to the current
 * one after 1, 2, 4, ... steps.  A list that loops is caught within twice
 * its length's steps, instead of after the walk's bound (65536 caches: 3
 * such walks took 2.5 s before the reader could say the data is bad).  A
 * list that changed while read can repeat an address too: the caller's
 * generation check tells a torn read from bad data, as for every BAD. */
struct cycle {
    uint64_t saved;
    unsigned long power, steps;
};
#define CYCLE_INIT {0, 1, 0}

static bool cycle_seen(struct cycle *c, uint64_t addr)
{
    if (addr == c->saved)
        return true;
    if (++c->steps == c->power) {
        c->saved = addr;
        c->power *= 2;
        c->steps = 0;
    }
    return false;
}

/* The snapshot read_all is filling: read_cache appends each cache's queues
 * and nodes to its arrays (NULL: a caller outside read_all, nothing kept). */
static struct snap *cur_snap;

static void *grow(void *v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return v;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    v = realloc(v, c * size);
    if (!v)
        die(EXIT_CANNOT, "out of memory");
    *cap = c;
    return v;
}

bool read_cache(uint64_t addr, struct cache_snap *cs, int nr_nodes)
{
    struct qslab_cache c;
    if (!rdc(addr, &c, sizeof c, 8))
        return BAD("cache at 0x%" PRIx64 " is not readable", addr);
    memset(cs, 0, sizeof(*cs));
    cs->addr = addr;
    if (!memchr(c.name, '\0', sizeof c.name))
        return BAD("cache at 0x%" PRIx64 ": its name is not terminated", addr);
    for (size_t i = 0; c.name[i]; i++) /* printable, for every output mode */
        cs->name[i] = (c.name[i] > ' ' && c.name[i] < 127) ? c.name[i] : '?';
    if (c.id >= root.max_caches || c.front >= QS_FRONT_NR || c.front >= QS_OBSERVE_FRONTS ||
        c.order > QS_MAX_ORDER || c.slot_size < 8 || c.slot_size > (QS_PAGE_SIZE << QS_MAX_ORDER))
        return BAD("cache %s: id, front, order or slot size out of range", cs->name);
    cs->id = c.id;
    cs->front_nr = c.front;
    memcpy(cs->front, root.front_names[c.front], 7);
    cs->front[7] = '\0';
    cs->queues = (root.front_queues >> c.front) & 1;
    cs->debug_bits = c.debug;
    qs_debug_letters(c.debug, cs->debug);
    uint8_t km; /* a bool of the target's: any byte value, read as a byte */
    memcpy(&km, (const char *)&c + offsetof(struct qslab_cache, is_kmalloc), 1);
    cs->is_kmalloc = km != 0;
    cs->ctor = c.ctor != NULL;
    cs->flags = c.flags;
    cs->align = c.align;
    cs->hiwater = c.hiwater;
    cs->freebatch = c.freebatch;
    cs->slab_limit = c.slab_limit;
    cs->slab_batch = c.slab_batch;
    cs->slab_shared = c.slab_shared;
    cs->meta_bytes = sizeof(c) + (size_t)nr_nodes * sizeof(struct qs_node);
    struct snap *S = cur_snap;
    struct node_snap *ns = NULL; /* this cache's nodes, when kept */
    if (S) {
        cs->q_first = S->nq;
        cs->node_first = S->nn;
        S->nodes = grow(S->nodes, &S->ncap, S->nn + (size_t)nr_nodes, sizeof(*S->nodes));
        ns = S->nodes + S->nn;
        memset(ns, 0, (size_t)nr_nodes * sizeof(*ns));
        S->nn += (size_t)nr_nodes;
    }

    unsigned long sum[QS_STAT_NR] = {0};
    struct qslab_cache_stats *st = &cs->st;
    uint64_t qa = (uint64_t)(uintptr_t)c.queues;
    unsigned long nq = 0;
    struct cycle qcyc = CYCLE_INIT;
    while (qa) {
        if (cycle_seen(&qcyc, qa))
            return BAD("cache %s: its queue list is a cycle (0x%" PRIx64 " again)", cs->name, qa);
        if (++nq > MAX_QUEUES_PER_CACHE)
            return BAD("cache %s: more than %u queues (a cycle?)", cs->name, MAX_QUEUES_PER_CACHE);
        static struct qs_queue q; /* 640 bytes, 64-aligned */
        bool got = false;
        for (int t = 0; t < MAX_SEQ_TRIES && !got; t++) {
            if (!rdc(qa, &q, sizeof q, 64))
                return BAD("cache %s: queue at 0x%" PRIx64 " is not readable", cs->name, qa);
            unsigned seq2;
            if (rd(qa + offsetof(struct qs_queue, nr_seq), &seq2, sizeof seq2) != 0)
                return BAD("cache %s: queue at 0x%" PRIx64 " went away", cs->name, qa);
            got = !(q.nr_seq & 1) && seq2 == q.nr_seq;
        } /* else its last reading, as the in-process reader does */
        if ((uint64_t)(uintptr_t)q.cache != addr)
            return BAD("cache %s: queue at 0x%" PRIx64 " belongs to another cache", cs->name, qa);
        struct qs_queue_raw r;
        memcpy(r.stat, q.stat, sizeof r.stat);
        r.moved = q.moved;
        r.top = q.top;
        r.fb = q.fb;
        r.fb_base = q.fb_base;
        r.sl_pops = q.sl.pops;
        r.sl_pushes = q.sl.pushes;
        unsigned long pops_seen = q.pops_seen;
        uint64_t pops_raw = q.pops_raw;
        unsigned long qsum[QS_STAT_NR] = {0};
        qs_calc_queue(&r, cs->queues, &pops_seen, &pops_raw, qsum);
        for (int i = 0; i < QS_STAT_NR; i++)
            sum[i] += qsum[i];
        if (S) { /* the queue's own line (-l) and its node's share (-n) */
            S->queues = grow(S->queues, &S->qcap, S->nq + 1, sizeof(*S->queues));
            struct queue_snap *o = &S->queues[S->nq++];
            cs->q_count++;
            struct qslab_cache_stats qst;
            memset(&qst, 0, sizeof qst);
            qs_calc_fill(qsum, &qst);
            o->cpu = q.cpu;
            o->tid = -1;
            o->node = q.node;
            o->owned = q.owner != NULL;
            if (q.owner && q.cpu < 0) { /* a thread's: its id, if its owner is still mapped */
                int tid;
                if (rd((uint64_t)(uintptr_t)q.owner + offsetof(struct qs_owner, tid), &tid,
                       sizeof tid) == 0 && tid > 0)
                    o->tid = tid;
            }
            o->queued = QS_TOP_NR(q.top);
            o->inbox = q.inbox.nr;
            o->partial = q.list.nr_partial + q.sl.nr_partial;
            o->full = q.list.nr_full;
            o->stash = q.nr_stash;
            o->alloc = qst.alloc;
            o->alloc_fast = qst.alloc_fast;
            o->free = qst.free;
            o->free_fast = qst.free_fast;
            o->remote_free = qst.remote_free;
            o->refill = qst.refill;
            o->flush = qst.flush;
            if (q.node >= 0 && q.node < nr_nodes) {
                ns[q.node].owner_slabs += q.list.nr_partial + q.list.nr_full + q.nr_stash +
                                          q.sl.nr_partial + (q.sl.slab != NULL);
                ns[q.node].queued += QS_TOP_NR(q.top) + q.inbox.nr;
                ns[q.node].queues++;
            }
        }
        st->empty_slabs += q.nr_stash;
        st->queued_objs += QS_TOP_NR(q.top) + q.inbox.nr;
        cs->partial_slabs += q.list.nr_partial + q.sl.nr_partial;
        cs->owner_slabs += q.list.nr_partial + q.list.nr_full + q.nr_stash + q.sl.nr_partial +
                           (q.sl.slab != NULL);
        cs->nr_queues++;
        cs->nr_owned_queues += q.owner != NULL;
        cs->meta_bytes += sizeof q + (size_t)(q.cap + 1) * sizeof(void *);
        qa = (uint64_t)(uintptr_t)q.all_next;
    }
    for (int i = 0; i < QS_STAT_NR; i++)
        sum[i] += c.orphan_stat[i];
    st->alloc_fast = 0; /* qs_calc_fill sets every event field */
    qs_calc_fill(sum, st);
    st->defrag_passes = c.defrag_passes; /* a mobile cache's (api/defrag.c) */
    st->defrag_moved = c.defrag_moved;
    st->defrag_declined = c.defrag_declined;
    st->defrag_slabs = c.defrag_slabs;
    if (nr_nodes > 0) {
        static struct qs_node nodes[QS_MAX_NODES];
        if (!rdc((uint64_t)(uintptr_t)c.nodes, nodes, (size_t)nr_nodes * sizeof(struct qs_node), 64))
            return BAD("cache %s: its node array is not readable", cs->name);
        for (int n = 0; n < nr_nodes; n++) {
            st->empty_slabs += nodes[n].nr_empty + nodes[n].nr_free_slabs;
            cs->partial_slabs += nodes[n].list.nr_partial;
            if (ns) {
                ns[n].partial = nodes[n].list.nr_partial;
                ns[n].full = nodes[n].list.nr_full;
                ns[n].empty = nodes[n].nr_empty;
                ns[n].free_slabs = nodes[n].nr_free_slabs;
                ns[n].shared_avail = nodes[n].shared_avail;
            }
        }
    }
    st->object_size = c.obj_size;
    st->slot_size = c.slot_size;
    st->order = c.order;
    uint32_t ops = 0;
    if (!rdc((uint64_t)(uintptr_t)root.objs_per_slab + (uint64_t)c.id * 4, &ops, 4, 4))
        return BAD("the objects-per-slab table is not readable");
    st->objs_per_slab = ops;
    return true;
}

/* The root's globals: node count, owner kind (and why), CPU ids, default
 * front end.  Part of read_all; alone for a record's header when the first
 * snapshot is torn. */
bool read_globals(struct snap *s)
{
    if (!rdc((uint64_t)(uintptr_t)root.nr_nodes, &s->nr_nodes, sizeof(int), 4) ||
        !rdc((uint64_t)(uintptr_t)root.owner_kind, &s->owner_kind, sizeof(int), 4) ||
        !rdc((uint64_t)(uintptr_t)root.nr_cpu_ids, &s->nr_cpu_ids, sizeof(int), 4) ||
        !rdc((uint64_t)(uintptr_t)root.front_default, &s->front_default, sizeof(int), 4))
        return BAD("the root's globals are not readable");
    if (s->nr_nodes < 1 || s->nr_nodes > (int)root.max_nodes || s->nr_nodes > QS_MAX_NODES)
        return BAD("node count %d out of range", s->nr_nodes);
    if (s->front_default < 0 || s->front_default >= QS_FRONT_NR)
        return BAD("default front end %d out of range", s->front_default);
    uint64_t whyp = 0;
    s->owner_why[0] = '\0';
    if (rdc((uint64_t)(uintptr_t)root.owner_why, &whyp, 8, 8) && whyp) {
        /* a string of unknown length: read up to the end of its mapping */
        char buf[sizeof s->owner_why];
        size_t len = sizeof buf - 1;
        while (len && !readable(whyp, len))
            len /= 2;
        if (len && rd(whyp, buf, len) == 0) {
            buf[len] = '\0';
            for (size_t i = 0; buf[i]; i++)
                s->owner_why[i] = (buf[i] >= ' ' && buf[i] < 127) ? buf[i] : '?',
                s->owner_why[i + 1] = '\0';
        }
    }
    return true;
}

bool read_all(struct snap *s)
{
    s->n = 0;
    s->nq = s->nn = 0;
    cur_snap = NULL; /* until the node count is known */
    if (!read_globals(s))
        return false;
    uint64_t head = 0;
    if (!rdc((uint64_t)(uintptr_t)root.caches, &head, 8, 8))
        return BAD("the cache list head is not readable");
    cur_snap = s;
    struct cycle cyc = CYCLE_INIT;
    for (uint64_t a = head; a;) {
        if (cycle_seen(&cyc, a))
            return BAD("the cache list is a cycle (0x%" PRIx64 " again)", a);
        if (s->n >= root.max_caches)
            return BAD("more than %u caches on the list (a cycle?)", root.max_caches);
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 64;
            s->caches = realloc(s->caches, s->cap * sizeof(*s->caches));
            if (!s->caches)
                die(EXIT_CANNOT, "out of memory");
        }
        if (!read_cache(a, &s->caches[s->n], s->nr_nodes))
            return false;
        uint64_t next;
        if (!rdc(a + offsetof(struct qslab_cache, next), &next, 8, 8))
            return BAD("cache list link not readable");
        s->n++;
        a = next;
    }
    cur_snap = NULL; /* SLOB's pages: no queues, its nodes not shown */
    bool arena_ok = read_cache((uint64_t)(uintptr_t)root.slob_arena, &s->arena, s->nr_nodes);
    if (!arena_ok)
        return false;
    uint64_t lp = 0, sp = 0;
    struct qs_large_counters large;
    uint64_t cp = 0, tp = 0, mp = 0, wp = 0;
    if (!rdc((uint64_t)(uintptr_t)root.large, &lp, 8, 8) || !rdc(lp, &large, sizeof large, 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_slab_bytes, &sp, 8, 8) ||
        !rdc(sp, &s->page_slab_bytes, sizeof(size_t), 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_chunk_bytes, &cp, 8, 8) ||
        !rdc(cp, &s->page_chunk_bytes, sizeof(size_t), 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_slot_bytes, &tp, 8, 8) ||
        !rdc(tp, &s->page_slot_bytes, sizeof(size_t), 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_warm_bytes, &wp, 8, 8) ||
        !rdc(wp, &s->page_warm_bytes, sizeof(size_t), 8) ||
        !rdc((uint64_t)(uintptr_t)root.meta_mapped_bytes, &mp, 8, 8) ||
        !rdc(mp, &s->meta_mapped, sizeof(size_t), 8))
        return BAD("the large-block, page-layer or metadata counters are not readable");
    /* memory pressure (core/pressure.c): the published text, bounded and
     * printable whatever was read */
    struct qs_pressure pr;
    if (!rdc((uint64_t)(uintptr_t)root.pressure, &pr, sizeof pr, 8))
        return BAD("the memory pressure counters are not readable");
    s->pressure = pr;
    if (!rdc((uint64_t)(uintptr_t)root.cached, &s->cached, sizeof s->cached, 8))
        return BAD("the cached-memory cap's counters are not readable");
    char *t = pr.text[pr.cur & 1];
    t[sizeof pr.text[0] - 1] = '\0';
    size_t i = 0;
    for (; t[i]; i++)
        s->pressure_text[i] = (t[i] >= ' ' && t[i] < 127) ? t[i] : '?';
    s->pressure_text[i] = '\0';
    s->large_alloc = large.alloc;
    s->large_free = large.free;
    s->large_live = large.live;
    s->large_bytes = large.live_bytes;
    memcpy(s->large_bucket, large.bucket, sizeof large.bucket);
    return true;
}

unsigned long read_generation(void)
{
    unsigned long g = 1;
    int r = rd(root_addr + offsetof(struct qs_observe_root, generation), &g, sizeof g);
    if (r == -EPERM || r == -ESRCH)
        explain_access(-r);
    return r == 0 ? g : 1; /* unreadable: as if changing */
}

void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Is pid still there: not gone, not a zombie (a zombie's memory is gone;
 * its parent has not reaped it yet)?  An unreadable /proc entry other than
 * a missing one counts as alive. */
bool process_alive(pid_t pid)
{
    if (pid == g_pid && g_pidfd >= 0) {
        struct pollfd p = {.fd = g_pidfd, .events = POLLIN};
        return poll(&p, 1, 0) == 0; /* readable once it has exited */
    }
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    char fn[64], buf[512];
    snprintf(fn, sizeof fn, "/proc/%d/stat", (int)pid);
    int fd = open(fn, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold anything: the state follows its ')' */
    return !(p && (p[2] == 'Z' || p[2] == 'X'));
}

/* A process on its way out fails reads (ESRCH: its memory is gone) before
 * it is a zombie: has the target finished exiting within ms?  The die
 * hooks ask this before a failed read counts as one (a CI run saw "no
 * process N (ESRCH)" for a target stopped while watched, 2026-12-01). */
bool exited_within(int ms)
{
    for (int waited = 0; waited < ms; waited += 10) {
        if (!process_alive(g_pid))
            return true;
        pause_ms(10);
    }
    return false;
}

int opt_retries = 50;

/* The front ends' names as printed: terminated, printable. */
static void clean_front_names(void)
{
    for (int f = 0; f < QS_OBSERVE_FRONTS; f++)
        for (int i = 0; i < 8; i++) {
            char *ch = &root.front_names[f][i];
            if (i == 7)
                *ch = '\0';
            else if (*ch && (*ch <= ' ' || *ch >= 127))
                *ch = '?';
        }
}

/* How long a snapshot waits for a starting process's qslab to run. */
#define READY_WAIT_MS 1000

/* Read the root again (attach checked its layout; what changes after load
 * is `ready`, the generation and the front ends' names, filled at the first
 * cache), and wait until the library has run: before that the process is
 * starting, and the root's addresses are link-time values the dynamic
 * loader has not yet relocated (observe.h, `ready`). */
static void reread_root(void)
{
    for (int waited = 0;; waited += 5) {
        struct qs_observe_root r;
        /* its fixed part (magic to offsets) as attach checked it: else
         * another root, or a process rewriting it.  /proc/PID/maps is read
         * in pieces and is no consistent view while the process maps and
         * unmaps (a thread starting): one read can miss the library's
         * mapping, so a failed read is retried with the maps read again. */
        bool same = false;
        for (int tries = 0; tries < 20 && !same; tries++) {
            if (tries) {
                pause_ms(5);
                load_maps();
            }
            same = rdc(root_addr, &r, sizeof r, 8) &&
                   memcmp(&r, &root, offsetof(struct qs_observe_root, generation)) == 0;
        }
        if (!same)
            die(EXIT_TORN, "process %d: its qslab root (0x%" PRIx64 ") is no longer the one "
                           "attached to (the library was unmapped, or the process ran another "
                           "program)",
                (int)g_pid, root_addr);
        root = r;
        clean_front_names();
        if (root.ready)
            return;
        if (waited >= READY_WAIT_MS)
            die(EXIT_TORN, "process %d: its qslab is loaded but has not run in %d ms (the "
                           "process is starting, or stopped, before the dynamic loader "
                           "relocated it); try again",
                (int)g_pid, READY_WAIT_MS);
        pause_ms(5);
        load_maps();
    }
}

/* Attach: locate and validate the root.  Returns false if the process has
 * no qslab (the caller explains). */
bool attach(struct snap *s)
{
#ifdef SYS_pidfd_open
    /* the process itself, not its number: a busy machine reuses a number
     * within milliseconds of the process's exit, and a record would go on
     * reading whatever process got it */
    if (g_pidfd < 0)
        g_pidfd = (int)syscall(SYS_pidfd_open, g_pid, 0);
#endif
    if (kill(g_pid, 0) != 0 && errno == ESRCH)
        explain_access(ESRCH);
    if (!load_maps())
        return false;
    struct root_loc locs[8];
    size_t n = find_roots(locs, 8);
    if (n == 0)
        return false;
    if (n > 1)
        fprintf(stderr, "%s: process %d holds %zu qslab instances; reading the one in %s\n", prog,
                (int)g_pid, n, locs[0].path);
    root_addr = locs[0].addr;
    snprintf(s->path, sizeof s->path, "%s", locs[0].path);
    /* the root's fixed part first: magic and version decide how to read on */
    struct {
        uint64_t magic;
        uint32_t version, root_size, ptr_size;
    } head;
    if (!rdc(root_addr, &head, sizeof head, 8)) {
        int r = rd(root_addr, &head, sizeof head);
        if (r == -EPERM || r == -EACCES || r == -ESRCH)
            explain_access(-r);
        die(EXIT_CANNOT, "process %d: the qslab root in %s (0x%" PRIx64 ") is not readable: %s",
            (int)g_pid, s->path, root_addr, strerror(-r ? -r : EFAULT));
    }
    if (head.magic != QS_OBSERVE_MAGIC)
        die(EXIT_VERSION, "process %d: %s has a qslab_observe_root without qslab's magic "
                          "(0x%016" PRIx64 "): not a layout this qslabinfo knows",
            (int)g_pid, s->path, head.magic);
    if (head.version != QS_OBSERVE_VERSION)
        die(EXIT_VERSION, "process %d: its qslab (%s) has observation layout version %u; this "
                          "qslabinfo reads version %u: use the qslabinfo of that qslab",
            (int)g_pid, s->path, head.version, QS_OBSERVE_VERSION);
    if (head.root_size != sizeof root || !rdc(root_addr, &root, sizeof root, 8))
        die(EXIT_VERSION, "process %d: layout version %u but a root of %u bytes (this qslabinfo: "
                          "%zu): a mismatched build",
            (int)g_pid, head.version, head.root_size, sizeof root);
    static const uint32_t mine[] = {
#define OFF_(st, f) (uint32_t) offsetof(struct st, f),
        QS_OBSERVE_OFFSETS(OFF_)
#undef OFF_
    };
    struct {
        const char *what;
        uint32_t theirs, ours;
    } chk[] = {
        {"pointer size", root.ptr_size, sizeof(void *)},
        {"statistics items", root.stat_nr, QS_STAT_NR},
        {"sizeof(qslab_cache)", root.sizeof_cache, sizeof(struct qslab_cache)},
        {"sizeof(qs_queue)", root.sizeof_queue, sizeof(struct qs_queue)},
        {"sizeof(qs_node)", root.sizeof_node, sizeof(struct qs_node)},
        {"sizeof(qs_list)", root.sizeof_list, sizeof(struct qs_list)},
        {"sizeof(qs_owner)", root.sizeof_owner, sizeof(struct qs_owner)},
        {"sizeof(qs_inbox)", root.sizeof_inbox, sizeof(struct qs_inbox)},
        {"cache ids", root.max_caches, QS_MAX_CACHES},
        {"nodes", root.max_nodes, QS_MAX_NODES},
        {"page shift", root.page_shift, QS_PAGE_SHIFT},
        {"name length", root.name_max, QS_NAME_MAX},
        {"front ends", root.front_nr, QS_FRONT_NR},
        {"field offsets", root.nr_offsets, QS_OBSERVE_NR_OFFSETS},
        {"large buckets", root.large_buckets, QS_LARGE_BUCKETS},
        {"large bucket shift", root.large_bucket_shift0, QS_LARGE_BUCKET_SHIFT0},
        {"sizeof(qs_large_counters)", root.sizeof_large, sizeof(struct qs_large_counters)},
        {"sizeof(qs_pressure)", root.sizeof_pressure, sizeof(struct qs_pressure)},
        {"sizeof(qs_cached)", root.sizeof_cached, sizeof(struct qs_cached)},
    };
    for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++)
        if (chk[i].theirs != chk[i].ours)
            die(EXIT_VERSION, "process %d: layout version %u, but its %s is %u where this "
                              "qslabinfo has %u: a mismatched build (the layout version should "
                              "have been bumped)",
                (int)g_pid, root.version, chk[i].what, chk[i].theirs, chk[i].ours);
    clean_front_names();
    for (unsigned i = 0; i < QS_OBSERVE_NR_OFFSETS; i++)
        if (root.offsets[i] != mine[i])
            die(EXIT_VERSION, "process %d: layout version %u, but field offset %u is %u where "
                              "this qslabinfo has %u: a mismatched build",
                (int)g_pid, root.version, i, root.offsets[i], mine[i]);
    return true;
}

/* One consistent snapshot; false when --retries reads all changed under
 * the reader (why: the last reason); data that does not hold together,
 * or a process gone, exits as below. */
bool snapshot_try(struct snap *s)
{
    unsigned long g = 0;
    int stable_failures = 0;
    for (int attempt = 1; attempt <= opt_retries; attempt++) {
        s->attempts = attempt;
        if (attempt > 1) {
            pause_ms(attempt < 10 ? 1 : 5);
            load_maps(); /* new mappings since (meta blocks, queues) */
        }
        reread_root();
        g = read_generation();
        if (g & 1) {
            snprintf(why, sizeof why, "a change was in progress (generation odd)");
            continue;
        }
        bool ok = read_all(s);
        unsigned long g2 = read_generation();
        if (ok && g2 == g) {
            s->generation = g;
            return true;
        }
        if (ok)
            snprintf(why, sizeof why, "the caches changed while read (generation %lu -> %lu)", g,
                     g2);
        else if (g2 == g && ++stable_failures >= 3) /* nothing changed: the data is bad */
            die(EXIT_TORN, "process %d: its qslab data does not hold together (%s), though "
                           "nothing changed while it was read (generation %lu)",
                (int)g_pid, why, g);
    }
    return false;
}

/* One consistent snapshot, or exit 3. */
void snapshot(struct snap *s)
{
    if (!snapshot_try(s))
        die(EXIT_TORN, "process %d: no consistent snapshot in %d reads (last: %s); try again",
            (int)g_pid, opt_retries, why);
}
