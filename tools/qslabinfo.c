/*
 * qslabinfo - read a running process's qslab counters from outside, with
 * nothing added to the program (docs/observability.md).
 *
 *   qslabinfo [-e] [-T] [-S] [-L] [--proc] [--json] -p PID
 *   qslabinfo [options] [--delay MS] -- PROGRAM [ARGS...]
 *
 * How: find the mapped ELF objects of the target in /proc/PID/maps, look
 * up `qslab_observe_root` in their .dynsym or .symtab (through
 * /proc/PID/map_files/, else the path), add the load bias, and read the
 * root and everything it points to with process_vm_readv.  Every pointer
 * followed must lie in a readable mapping of the target; every list walk
 * is bounded; a read whose generation (observe.h) was odd or moved is
 * retried a bounded number of times.  The statistics are computed by the
 * library's own arithmetic (src/stats_calc.h).
 *
 * Exit status: 0 read and printed; 1 cannot read (no such process,
 * permission, no qslab in it, bad usage); 2 a qslab of another layout
 * version; 3 no consistent snapshot (the target kept changing, or its data
 * does not hold together).
 */
#define _GNU_SOURCE
#include "observe.h"
#include "stats_calc.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_CANNOT 1
#define EXIT_VERSION 2
#define EXIT_TORN 3

#define MAX_QUEUES_PER_CACHE (1u << 20) /* bounded walks */
#define MAX_SEQ_TRIES 100

static pid_t g_pid;
static const char *prog = "qslabinfo";

static void die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

/* ---------------------------------------------------------------- maps */

struct mapping {
    uint64_t lo, hi, off;
    bool r, w;
    char path[256];
};
static struct mapping *maps;
static size_t nmaps;

static void explain_access(int err); /* never returns */

static bool load_maps(void)
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

/* [addr, addr + len) inside one readable mapping */
static bool readable(uint64_t addr, size_t len)
{
    if (!addr || addr + len < addr)
        return false;
    for (size_t i = 0; i < nmaps; i++)
        if (addr >= maps[i].lo && addr + len <= maps[i].hi)
            return maps[i].r;
    return false;
}

/* ---------------------------------------------------------------- reads */

static int rd(uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(g_pid, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return 0;
    return n < 0 ? -errno : -EFAULT;
}

/* A checked read: the range must be mapped readable, the read complete. */
static bool rdc(uint64_t addr, void *buf, size_t len, size_t align)
{
    if ((align && addr % align) || !readable(addr, len))
        return false;
    int r = rd(addr, buf, len);
    if (r == -EPERM || r == -ESRCH)
        explain_access(-r);
    return r == 0;
}

/* ---------------------------------------------------------------- permission */

static long status_field(pid_t pid, const char *key)
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

static void explain_access(int err)
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

struct root_loc {
    uint64_t addr;
    char path[256];
    bool has_symtab; /* out: the object has a .symtab (not stripped) */
};

/* The executable without a symbol table, if it is (for the message when no
 * qslab is found: a static qslab in it would not be seen). */
static char stripped_exe[256];

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
static size_t find_roots(struct root_loc *locs, size_t max)
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

struct cache_snap {
    uint64_t addr;
    char name[QS_NAME_MAX];
    char front[8];
    char debug[8];
    unsigned id, front_nr, debug_bits;
    bool is_kmalloc, ctor, queues;
    unsigned long flags;
    size_t align;
    unsigned long hiwater, freebatch, slab_limit, slab_batch, slab_shared;
    unsigned long nr_queues, nr_owned_queues, partial_slabs, owner_slabs;
    size_t meta_bytes; /* cache, nodes, queues, queue slots */
    struct qslab_cache_stats st;
};

struct snap {
    unsigned long generation;
    int attempts;
    int nr_nodes, owner_kind, nr_cpu_ids, front_default;
    char owner_why[160];
    struct cache_snap *caches;
    size_t n, cap;
    struct cache_snap arena;
    unsigned long large_alloc, large_free, large_live;
    size_t large_bytes, page_slab_bytes;
    char path[256];
};

static struct qs_observe_root root;
static uint64_t root_addr;
static char why[256]; /* why the last attempt failed */

#define BAD(...) (snprintf(why, sizeof why, __VA_ARGS__), false)

static bool read_cache(uint64_t addr, struct cache_snap *cs, int nr_nodes)
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

    unsigned long sum[QS_STAT_NR] = {0};
    struct qslab_cache_stats *st = &cs->st;
    uint64_t qa = (uint64_t)(uintptr_t)c.queues;
    unsigned long nq = 0;
    while (qa) {
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
        qs_calc_queue(&r, cs->queues, &pops_seen, &pops_raw, sum);
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
    if (nr_nodes > 0) {
        static struct qs_node nodes[QS_MAX_NODES];
        if (!rdc((uint64_t)(uintptr_t)c.nodes, nodes, (size_t)nr_nodes * sizeof(struct qs_node), 64))
            return BAD("cache %s: its node array is not readable", cs->name);
        for (int n = 0; n < nr_nodes; n++) {
            st->empty_slabs += nodes[n].nr_empty + nodes[n].nr_free_slabs;
            cs->partial_slabs += nodes[n].list.nr_partial;
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

static bool read_all(struct snap *s)
{
    s->n = 0;
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
    uint64_t head = 0;
    if (!rdc((uint64_t)(uintptr_t)root.caches, &head, 8, 8))
        return BAD("the cache list head is not readable");
    for (uint64_t a = head; a;) {
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
    if (!read_cache((uint64_t)(uintptr_t)root.slob_arena, &s->arena, s->nr_nodes))
        return false;
    uint64_t lp = 0, sp = 0;
    unsigned long large[4];
    if (!rdc((uint64_t)(uintptr_t)root.large, &lp, 8, 8) || !rdc(lp, large, sizeof large, 8) ||
        !rdc((uint64_t)(uintptr_t)root.page_slab_bytes, &sp, 8, 8) ||
        !rdc(sp, &s->page_slab_bytes, sizeof(size_t), 8))
        return BAD("the large-block or page-layer counters are not readable");
    s->large_alloc = large[0];
    s->large_free = large[1];
    s->large_live = large[2];
    s->large_bytes = large[3];
    return true;
}

static unsigned long read_generation(void)
{
    unsigned long g = 1;
    int r = rd(root_addr + offsetof(struct qs_observe_root, generation), &g, sizeof g);
    if (r == -EPERM || r == -ESRCH)
        explain_access(-r);
    return r == 0 ? g : 1; /* unreadable: as if changing */
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int opt_retries = 50;

/* Attach: locate and validate the root.  Returns false if the process has
 * no qslab (the caller explains). */
static bool attach(struct snap *s)
{
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
    };
    for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++)
        if (chk[i].theirs != chk[i].ours)
            die(EXIT_VERSION, "process %d: layout version %u, but its %s is %u where this "
                              "qslabinfo has %u: a mismatched build (the layout version should "
                              "have been bumped)",
                (int)g_pid, root.version, chk[i].what, chk[i].theirs, chk[i].ours);
    for (int f = 0; f < QS_OBSERVE_FRONTS; f++) /* names as printed: terminated, printable */
        for (int i = 0; i < 8; i++) {
            char *ch = &root.front_names[f][i];
            if (i == 7)
                *ch = '\0';
            else if (*ch && (*ch <= ' ' || *ch >= 127))
                *ch = '?';
        }
    for (unsigned i = 0; i < QS_OBSERVE_NR_OFFSETS; i++)
        if (root.offsets[i] != mine[i])
            die(EXIT_VERSION, "process %d: layout version %u, but field offset %u is %u where "
                              "this qslabinfo has %u: a mismatched build",
                (int)g_pid, root.version, i, root.offsets[i], mine[i]);
    return true;
}

/* One consistent snapshot, or exit 3. */
static void snapshot(struct snap *s)
{
    unsigned long g = 0;
    int stable_failures = 0;
    for (int attempt = 1; attempt <= opt_retries; attempt++) {
        s->attempts = attempt;
        if (attempt > 1) {
            pause_ms(attempt < 10 ? 1 : 5);
            load_maps(); /* new mappings since (meta blocks, queues) */
        }
        g = read_generation();
        if (g & 1) {
            snprintf(why, sizeof why, "a change was in progress (generation odd)");
            continue;
        }
        bool ok = read_all(s);
        unsigned long g2 = read_generation();
        if (ok && g2 == g) {
            s->generation = g;
            return;
        }
        if (ok)
            snprintf(why, sizeof why, "the caches changed while read (generation %lu -> %lu)", g,
                     g2);
        else if (g2 == g && ++stable_failures >= 3) /* nothing changed: the data is bad */
            die(EXIT_TORN, "process %d: its qslab data does not hold together (%s), though "
                           "nothing changed while it was read (generation %lu)",
                (int)g_pid, why, g);
    }
    die(EXIT_TORN, "process %d: no consistent snapshot in %d reads (last: %s); try again",
        (int)g_pid, opt_retries, why);
}

/* ---------------------------------------------------------------- output */

static const char *human(unsigned long long v, char *buf, size_t len)
{
    const char *u = "KMGTP";
    if (v < 1024) {
        snprintf(buf, len, "%llu", v);
        return buf;
    }
    double d = (double)v / 1024;
    int i = 0;
    while (d >= 1024 && i < 4) {
        d /= 1024;
        i++;
    }
    snprintf(buf, len, d < 10 ? "%.1f%c" : "%.0f%c", d, u[i]);
    return buf;
}

static size_t slab_bytes_of(const struct cache_snap *c)
{
    return (size_t)1 << (root.page_shift + c->st.order);
}
static size_t space_of(const struct cache_snap *c)
{
    return c->st.num_slabs * slab_bytes_of(c);
}
static size_t loss_of(const struct cache_snap *c)
{
    size_t used = c->st.active_objs * c->st.object_size, sp = space_of(c);
    return sp > used ? sp - used : 0;
}

static void flags_of(const struct cache_snap *c, char *out)
{
    int k = 0;
    if (c->flags & QSLAB_HWCACHE_ALIGN)
        out[k++] = 'A';
    for (const char *d = c->debug; *d; d++)
        out[k++] = *d;
    if (c->is_kmalloc)
        out[k++] = 'k';
    if (c->ctor)
        out[k++] = 'c';
    out[k] = '\0';
}

static int sort_mode; /* 0 name, 1 size (space), 2 loss */
static int cmp_cache(const void *a, const void *b)
{
    const struct cache_snap *x = a, *y = b;
    if (sort_mode == 1 && space_of(x) != space_of(y))
        return space_of(x) < space_of(y) ? 1 : -1;
    if (sort_mode == 2 && loss_of(x) != loss_of(y))
        return loss_of(x) < loss_of(y) ? 1 : -1;
    return strcmp(x->name, y->name);
}

static bool opt_empty;

static void print_default(struct snap *s)
{
    struct cache_snap *v = malloc((s->n + 1) * sizeof(*v));
    if (!v)
        die(EXIT_CANNOT, "out of memory");
    memcpy(v, s->caches, s->n * sizeof(*v));
    qsort(v, s->n, sizeof(*v), cmp_cache);
    printf("Name                   Objects Objsize    Space Slabs/Part/Own O/S O %%Fr %%Ef Flg  "
           "Front\n");
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &v[i];
        const struct qslab_cache_stats *st = &c->st;
        if (!opt_empty && st->num_slabs == 0 && st->active_objs == 0)
            continue;
        char sp[16], sl[40], fl[16];
        size_t space = space_of(c);
        snprintf(sl, sizeof sl, "%lu/%lu/%lu", st->num_slabs, c->partial_slabs, c->owner_slabs);
        flags_of(c, fl);
        printf("%-20s %9lu %7zu %8s %14s %3u %1u %3lu %3lu %-4s %s\n", c->name, st->active_objs,
               st->object_size, human(space, sp, sizeof sp), sl, st->objs_per_slab, st->order,
               st->num_slabs ? c->partial_slabs * 100 / st->num_slabs : 0,
               space ? (unsigned long)(st->active_objs * st->object_size * 100 / space) : 0, fl,
               c->front);
    }
    if (s->large_live || s->large_alloc) {
        char b[16];
        printf("%-20s %9lu %7s %8s %14s   (mapped blocks: %lu allocated, %lu freed)\n",
               "large (mapped)", s->large_live, "-", human(s->large_bytes, b, sizeof b), "-",
               s->large_alloc, s->large_free);
    }
    free(v);
}

static unsigned pct(unsigned long part, unsigned long whole)
{
    return whole ? (unsigned)(part * 100 / whole) : 0;
}

/* -A: activity, most active first (SLUB's slabinfo -A) */
static int cmp_activity(const void *a, const void *b)
{
    const struct cache_snap *x = a, *y = b;
    unsigned long ax = x->st.alloc + x->st.free, ay = y->st.alloc + y->st.free;
    if (ax != ay)
        return ax < ay ? 1 : -1;
    return strcmp(x->name, y->name);
}

static void print_activity(struct snap *s)
{
    struct cache_snap *v = malloc((s->n + 1) * sizeof(*v));
    if (!v)
        die(EXIT_CANNOT, "out of memory");
    memcpy(v, s->caches, s->n * sizeof(*v));
    qsort(v, s->n, sizeof(*v), cmp_activity);
    printf("Name                   Objects      Alloc       Free %%AFst %%FFst   Remote  Batches "
           "  Flushes  Refills  Claims\n");
    for (size_t i = 0; i < s->n; i++) {
        const struct qslab_cache_stats *st = &v[i].st;
        if (!opt_empty && !st->alloc && !st->free)
            continue;
        printf("%-20s %9lu %10lu %10lu %5u %5u %8lu %8lu %9lu %8lu %7lu\n", v[i].name,
               st->active_objs, st->alloc, st->free, pct(st->alloc_fast, st->alloc),
               pct(st->free_fast, st->free), st->remote_free, st->remote_batch, st->flush,
               st->refill, st->claim);
    }
    free(v);
}

/* -r CACHE: everything about one cache */
static int print_one(struct snap *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        const struct qslab_cache_stats *st = &c->st;
        if (strcmp(c->name, name) != 0)
            continue;
        char fl[16], b[16];
        flags_of(c, fl);
        printf("Cache %s (process %d, id %u, front %s%s%s)\n", c->name, (int)g_pid, c->id,
               c->front, c->debug[0] ? ", debug " : "", c->debug);
        printf("  object size %zu, slot %zu, align %zu, flags %s (0x%lx)\n", st->object_size,
               st->slot_size, c->align, fl[0] ? fl : "-", c->flags);
        printf("  slabs: %lu of order %u (%zu bytes, %u objects each), %lu partial, %lu held "
               "by owners, %lu empty kept; space %s\n",
               st->num_slabs, st->order, slab_bytes_of(c), st->objs_per_slab, c->partial_slabs,
               c->owner_slabs, st->empty_slabs, human(space_of(c), b, sizeof b));
        printf("  objects: %lu in use of %lu in slabs, %lu free in queues and inboxes "
               "(%lu queues, %lu with an owner)\n",
               st->active_objs, st->num_objs, st->queued_objs, c->nr_queues, c->nr_owned_queues);
        printf("  alloc %lu (fast %lu, slow %lu, from node lists %lu), free %lu (fast %lu, slow "
               "%lu)\n",
               st->alloc, st->alloc_fast, st->alloc_slow, st->node_alloc, st->free, st->free_fast,
               st->free_slow);
        printf("  remote frees %lu in %lu batches, claims %lu, flushes %lu, refills %lu, slabs "
               "new %lu freed %lu\n",
               st->remote_free, st->remote_batch, st->claim, st->flush, st->refill, st->new_slab,
               st->free_slab);
        printf("  tunables: hiwater %lu, freebatch %lu, limit %lu, batchcount %lu, shared %lu\n",
               c->hiwater, c->freebatch, c->slab_limit, c->slab_batch, c->slab_shared);
        printf("  metadata %zu bytes; efficiency %u%%\n", c->meta_bytes,
               pct(st->active_objs * st->object_size, space_of(c)));
        return 0;
    }
    die(EXIT_CANNOT, "process %d has no cache named %s", (int)g_pid, name);
    return EXIT_CANNOT;
}

static void print_proc(struct snap *s)
{
    fputs(QS_SLABINFO_HEADER, stdout);
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        bool slab = c->front_nr == QS_FRONT_SLAB;
        struct qs_slabinfo_row row = {
            .name = c->name,
            .front = c->front,
            .st = &c->st,
            .limit = slab ? c->slab_limit : c->hiwater,
            .batchcount = slab ? c->slab_batch : c->freebatch,
            .sharedfactor = slab ? c->slab_shared : 0,
            .debug = c->debug,
        };
        char line[256];
        size_t n = qs_slabinfo_line(line, sizeof line, &row);
        fwrite(line, 1, n, stdout);
    }
}

/* -T: where the process's qslab memory is. */
struct totals {
    size_t inuse, partial_free, queued, empty, overhead, slob_free, slabs, large, meta;
    unsigned long inuse_objs, queued_objs, partial_free_objs, empty_slabs;
    long long unaccounted; /* page layer's slab bytes - the caches' slabs */
    size_t total;
    long rss_anon_kb;
};

static size_t take(size_t *left, size_t want)
{
    size_t t = want < *left ? want : *left;
    *left -= t;
    return t;
}

static void compute_totals(const struct snap *s, struct totals *t)
{
    memset(t, 0, sizeof(*t));
    size_t slob_inuse = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        const struct qslab_cache_stats *st = &c->st;
        t->meta += c->meta_bytes;
        if (c->front_nr == QS_FRONT_SLOB) { /* its objects sit in the arena's pages */
            slob_inuse += st->active_objs * st->slot_size;
            t->inuse_objs += st->active_objs;
            continue;
        }
        size_t left = space_of(c), slot = st->slot_size;
        t->slabs += left;
        t->inuse += take(&left, st->active_objs * slot);
        t->queued += take(&left, st->queued_objs * slot);
        t->empty += take(&left, st->empty_slabs * slab_bytes_of(c));
        unsigned long free_born = st->num_objs > st->active_objs + st->queued_objs
                                      ? st->num_objs - st->active_objs - st->queued_objs
                                      : 0;
        unsigned long in_empty = st->empty_slabs * st->objs_per_slab;
        free_born = free_born > in_empty ? free_born - in_empty : 0;
        t->partial_free += take(&left, free_born * slot);
        t->overhead += left; /* tails past the last object, objects not born yet */
        t->inuse_objs += st->active_objs;
        t->queued_objs += st->queued_objs;
        t->partial_free_objs += free_born;
        t->empty_slabs += st->empty_slabs;
    }
    /* SLOB's pages: the arena's slabs, holding its caches' objects */
    size_t arena = space_of(&s->arena), left = arena;
    t->meta += s->arena.meta_bytes;
    t->slabs += arena;
    t->inuse += take(&left, slob_inuse);
    t->slob_free = left;
    t->unaccounted = (long long)(s->page_slab_bytes - t->slabs); /* unsigned: no overflow */
    t->large = s->large_bytes;
    t->total = t->inuse + t->partial_free + t->queued + t->empty + t->overhead + t->slob_free +
               t->large + t->meta;
    if (t->unaccounted > 0)
        t->total += (size_t)t->unaccounted;
    t->rss_anon_kb = status_field(g_pid, "RssAnon");
}

static void print_totals(const struct snap *s)
{
    struct totals t;
    compute_totals(s, &t);
    char b[16];
    printf("qslab memory of process %d (%s)\n", (int)g_pid, s->path);
#define ROW(label, bytes, extra)                                                                   \
    printf("  %-40s %10s %14zu%s\n", label, human(bytes, b, sizeof b), (size_t)(bytes), extra)
    char x[96];
    snprintf(x, sizeof x, "  (%lu objects)", t.inuse_objs);
    ROW("objects in use", t.inuse, x);
    snprintf(x, sizeof x, "  (%lu objects)", t.partial_free_objs);
    ROW("free objects in partial slabs", t.partial_free, x);
    snprintf(x, sizeof x, "  (%lu objects)", t.queued_objs);
    ROW("free objects held in queues (per owner)", t.queued, x);
    snprintf(x, sizeof x, "  (%lu slabs)", t.empty_slabs);
    ROW("empty slabs kept", t.empty, x);
    ROW("slab tails and objects not born yet", t.overhead, "");
    if (t.slob_free)
        ROW("free space in SLOB pages", t.slob_free, "");
    if (t.unaccounted > 0)
        ROW("other page-layer slabs", (size_t)t.unaccounted, "");
    snprintf(x, sizeof x, "  (%lu blocks)", s->large_live);
    ROW("large blocks (mapped)", t.large, x);
    ROW("metadata (caches, nodes, queues)", t.meta, "");
    ROW("total held from the OS", t.total, "");
    printf("  slabs: %zu bytes from the page layer, %zu in the caches' slabs (%s)\n",
           s->page_slab_bytes, t.slabs,
           t.unaccounted == 0 ? "they match" : "they differ: order tuned while slabs lived");
    if (t.rss_anon_kb >= 0) {
        size_t rss = (size_t)t.rss_anon_kb * 1024;
        char o[16];
        if (rss >= t.total)
            printf("  process anonymous RSS: %s (%ld kB): %s of it outside qslab (other "
                   "allocators, stacks, data)\n",
                   human(rss, b, sizeof b), t.rss_anon_kb, human(rss - t.total, o, sizeof o));
        else
            printf("  process anonymous RSS: %s (%ld kB): below qslab's mapped total (pages never "
                   "touched, e.g. of large blocks, are not resident)\n",
                   human(rss, b, sizeof b), t.rss_anon_kb);
    }
#undef ROW
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void print_json(const struct snap *s)
{
    struct totals t;
    compute_totals(s, &t);
    printf("{\"pid\": %d, \"layout_version\": %u, \"library\": ", (int)g_pid, root.version);
    json_str(s->path);
    printf(", \"generation\": %lu, \"attempts\": %d, \"nr_nodes\": %d, \"owner\": \"%s\", "
           "\"owner_why\": ",
           s->generation, s->attempts, s->nr_nodes,
           s->owner_kind == QS_OWNER_CPU ? "cpu" : "thread");
    json_str(s->owner_why);
    printf(", \"nr_cpu_ids\": %d, \"front_default\": ", s->nr_cpu_ids);
    char fd[8];
    memcpy(fd, root.front_names[s->front_default], 7);
    fd[7] = '\0';
    json_str(fd);
    printf(",\n \"caches\": [");
    for (size_t i = 0; i < s->n; i++) {
        const struct cache_snap *c = &s->caches[i];
        const struct qslab_cache_stats *st = &c->st;
        printf("%s\n  {\"name\": ", i ? "," : "");
        json_str(c->name);
        printf(", \"id\": %u, \"front\": \"%s\", \"debug\": \"%s\", \"kmalloc\": %s, "
               "\"ctor\": %s, \"flags\": %lu, \"align\": %zu, \"object_size\": %zu, "
               "\"slot_size\": %zu, \"objs_per_slab\": %u, \"order\": %u, \"slab_bytes\": %zu,"
               " \"active_objs\": %lu, \"num_objs\": %lu, \"num_slabs\": %lu, "
               "\"empty_slabs\": %lu, \"partial_slabs\": %lu, \"owner_slabs\": %lu, "
               "\"queued_objs\": %lu, \"queues\": %lu, \"owned_queues\": %lu, "
               "\"space\": %zu, \"metadata_bytes\": %zu,",
               c->id, c->front, c->debug, c->is_kmalloc ? "true" : "false",
               c->ctor ? "true" : "false", c->flags, c->align, st->object_size, st->slot_size,
               st->objs_per_slab, st->order, slab_bytes_of(c), st->active_objs, st->num_objs,
               st->num_slabs, st->empty_slabs, c->partial_slabs, c->owner_slabs, st->queued_objs,
               c->nr_queues, c->nr_owned_queues, space_of(c), c->meta_bytes);
        printf("\n   \"alloc\": %lu, \"alloc_fast\": %lu, \"alloc_slow\": %lu, \"free\": %lu, "
               "\"free_fast\": %lu, \"free_slow\": %lu, \"flush\": %lu, \"remote_free\": %lu, "
               "\"remote_batch\": %lu, \"claim\": %lu, \"refill\": %lu, \"new_slab\": %lu, "
               "\"free_slab\": %lu, \"node_alloc\": %lu,",
               st->alloc, st->alloc_fast, st->alloc_slow, st->free, st->free_fast, st->free_slow,
               st->flush, st->remote_free, st->remote_batch, st->claim, st->refill,
               st->new_slab, st->free_slab, st->node_alloc);
        printf("\n   \"tunables\": {\"hiwater\": %lu, \"freebatch\": %lu, \"limit\": %lu, "
               "\"batchcount\": %lu, \"shared\": %lu}}",
               c->hiwater, c->freebatch, c->slab_limit, c->slab_batch, c->slab_shared);
    }
    printf("],\n \"slob_pages\": {\"slabs\": %lu, \"bytes\": %zu},\n", s->arena.st.num_slabs,
           space_of(&s->arena));
    printf(" \"large\": {\"alloc\": %lu, \"free\": %lu, \"live\": %lu, \"live_bytes\": %zu},\n",
           s->large_alloc, s->large_free, s->large_live, s->large_bytes);
    printf(" \"totals\": {\"objects_in_use\": %zu, \"free_in_partial_slabs\": %zu, "
           "\"held_in_queues\": %zu, \"empty_slabs\": %zu, \"slab_overhead\": %zu, "
           "\"slob_free\": %zu, \"large\": %zu, \"metadata\": %zu, \"total\": %zu, "
           "\"slabs\": %zu, \"page_layer_slab_bytes\": %zu, \"unaccounted\": %lld, "
           "\"rss_anon_kb\": %ld}}\n",
           t.inuse, t.partial_free, t.queued, t.empty, t.overhead, t.slob_free, t.large, t.meta,
           t.total, t.slabs, s->page_slab_bytes, t.unaccounted, t.rss_anon_kb);
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [-T|-A|-r CACHE|--proc|--json] [-e] [-S|-L] -p PID\n"
            "       %s [options] [--delay MS] -- PROGRAM [ARGS...]\n"
            "Read the qslab counters of a running process (docs/observability.md).\n"
            "  (default)   one line per cache, after SLUB's slabinfo\n"
            "  -T          totals: where the process's qslab memory is\n"
            "  -A          activity: allocs, frees, %% fast, remote frees, flushes, refills\n"
            "  -r CACHE    everything about one cache\n"
            "  --proc      /proc/slabinfo version 2.1 text\n"
            "  --json      every counter, for scripts\n"
            "  -e          caches without slabs too\n"
            "  -S, -L      sort by space, by loss (default: by name)\n"
            "  --retries N reads before giving up on a changing target (default 50)\n"
            "  --delay MS  with PROGRAM: read after MS ms instead of at its exit\n"
            "Exit: 0 ok, 1 cannot read (no process, permission, no qslab), 2 another layout\n"
            "version, 3 no consistent snapshot.\n",
            prog, prog);
}

enum { MODE_DEFAULT, MODE_TOTALS, MODE_PROC, MODE_JSON, MODE_ACTIVITY, MODE_ONE };
static const char *opt_cache;
static int mode = MODE_DEFAULT;

static int report(void)
{
    static struct snap s;
    if (!attach(&s))
        die(EXIT_CANNOT, "process %d does not use qslab (no qslab_observe_root in its mapped "
                         "objects%s%s%s)", (int)g_pid,
            stripped_exe[0] ? "; its executable " : "", stripped_exe,
            stripped_exe[0] ? " has no symbol table, so a qslab linked into it statically "
                              "cannot be found" : "");
    snapshot(&s);
    switch (mode) {
    case MODE_TOTALS:
        print_totals(&s);
        break;
    case MODE_PROC:
        print_proc(&s);
        break;
    case MODE_JSON:
        print_json(&s);
        break;
    case MODE_ACTIVITY:
        print_activity(&s);
        break;
    case MODE_ONE:
        print_one(&s, opt_cache);
        break;
    default:
        print_default(&s);
    }
    fflush(stdout);
    return 0;
}

/* Run PROGRAM as a traced child and read it when it exits (PTRACE_EVENT_EXIT:
 * its memory is still there), or after --delay MS. */
static int run_program(char **argv, long delay_ms)
{
    pid_t pid = fork();
    if (pid < 0)
        die(EXIT_CANNOT, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (delay_ms < 0) {
            if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
                fprintf(stderr, "%s: cannot trace %s (ptrace: %s): use --delay MS to read it "
                                "while it runs\n", prog, argv[0], strerror(errno));
                _exit(126);
            }
            raise(SIGSTOP);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[0], strerror(errno));
        _exit(127);
    }
    g_pid = pid;
    int status, rc = EXIT_CANNOT;
    if (delay_ms >= 0) {
        pause_ms((int)delay_ms);
        if (waitpid(pid, &status, WNOHANG) == pid)
            die(EXIT_CANNOT, "%s exited before %ld ms", argv[0], delay_ms);
        rc = report();
        waitpid(pid, &status, 0);
        return rc;
    }
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
        exit(EXIT_CANNOT); /* the child said why */
    ptrace(PTRACE_SETOPTIONS, pid, NULL,
           (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL));
    ptrace(PTRACE_CONT, pid, NULL, NULL);
    bool done = false;
    for (;;) {
        if (waitpid(pid, &status, 0) != pid)
            break;
        if (WIFEXITED(status) || WIFSIGNALED(status))
            break;
        if (!WIFSTOPPED(status))
            continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (sig == SIGTRAP && event == PTRACE_EVENT_EXIT) {
            if (!done) {
                rc = report();
                done = true;
            }
            sig = 0;
        } else if (sig == SIGTRAP && event) {
            sig = 0; /* exec */
        }
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
    }
    if (!done)
        die(EXIT_CANNOT, "%s ended without an exit to read at", argv[0]);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"proc", no_argument, NULL, 'P'},   {"json", no_argument, NULL, 'J'},
        {"retries", required_argument, NULL, 'R'}, {"delay", required_argument, NULL, 'D'},
        {"pid", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long pid = -1, delay = -1;
    int o;
    while ((o = getopt_long(argc, argv, "+p:TeSLAr:h", longs, NULL)) != -1) {
        char *end;
        switch (o) {
        case 'p':
            errno = 0;
            pid = strtol(optarg, &end, 10);
            if (errno || *end || pid <= 0 || pid > INT_MAX)
                die(EXIT_CANNOT, "bad process id '%s'", optarg);
            break;
        case 'T':
            mode = MODE_TOTALS;
            break;
        case 'A':
            mode = MODE_ACTIVITY;
            break;
        case 'r':
            mode = MODE_ONE;
            opt_cache = optarg;
            break;
        case 'P':
            mode = MODE_PROC;
            break;
        case 'J':
            mode = MODE_JSON;
            break;
        case 'e':
            opt_empty = true;
            break;
        case 'S':
            sort_mode = 1;
            break;
        case 'L':
            sort_mode = 2;
            break;
        case 'R':
            opt_retries = atoi(optarg);
            if (opt_retries < 1 || opt_retries > 100000)
                die(EXIT_CANNOT, "--retries wants 1..100000");
            break;
        case 'D':
            delay = strtol(optarg, &end, 10);
            if (*end || delay < 0 || delay > 86400000)
                die(EXIT_CANNOT, "--delay wants milliseconds");
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_CANNOT;
        }
    }
    if (pid > 0) {
        if (optind < argc)
            die(EXIT_CANNOT, "-p and a program to run: choose one");
        g_pid = (pid_t)pid;
        return report();
    }
    if (optind < argc)
        return run_program(argv + optind, delay);
    usage(stderr);
    return EXIT_CANNOT;
}
