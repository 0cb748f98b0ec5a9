/*
 * reader_elf.c - finding qslab in the target, for the reader (reader.h): the
 * objects mapped at file offset 0 (/proc/PID/maps), each opened through
 * /proc/PID/map_files/ (else its path), `qslab_observe_root` looked up in
 * its .dynsym, then its .symtab, and the load bias added.
 */
#define _GNU_SOURCE
#include "reader.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
