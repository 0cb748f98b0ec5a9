// containers.cpp - C++ standard containers from 4 threads, on operator new.
//
// Each thread fills and drains std::vector, std::map, std::unordered_map,
// std::string and std::shared_ptr from its own seeded generator; shared_ptrs
// made by one thread are released by the next one (objects freed by another
// thread), and the output (checksums and sizes, printed by the main thread in
// thread order) depends only on the seeds.  real_cxx.sh compares a run on
// glibc with one under qslab-run.
//
// `containers --check-qslab` (under the preload) checks instead that operator
// new's memory is qslab's: qslab_object_node(p) >= 0 through dlsym, which
// resolves only when libqslab-malloc.so is loaded, and malloc_usable_size(p)
// covers the request.
#include <dlfcn.h>
#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 40;

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1)
    {
    }
    uint64_t next()
    {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    size_t below(size_t n)
    {
        return static_cast<size_t>(next() % n);
    }
};

uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001B3ull;
}

struct Node {
    std::string name;
    std::vector<int> payload;
    Node(std::string n, size_t k) : name(std::move(n)), payload(k, static_cast<int>(k))
    {
    }
};

// Hand-off between threads: slot t is filled by thread t and emptied by t+1.
std::mutex g_lock;
std::vector<std::shared_ptr<Node>> g_slot[kThreads];

struct Result {
    uint64_t hash = 0xcbf29ce484222325ull;
    size_t vec = 0, map = 0, umap = 0, str = 0, shared = 0, received = 0;
};

void worker(int tid, Result *out)
{
    Rng rng(static_cast<uint64_t>(tid) + 1);
    Result r;
    for (int round = 0; round < kRounds; round++) {
        // vectors of vectors, grown by push_back (reallocations), then shrunk
        std::vector<std::vector<uint32_t>> vv;
        for (int i = 0; i < 300; i++) {
            std::vector<uint32_t> v;
            size_t n = rng.below(200);
            for (size_t j = 0; j < n; j++)
                v.push_back(static_cast<uint32_t>(rng.next()));
            vv.push_back(std::move(v));
        }
        vv.erase(vv.begin(), vv.begin() + 100);
        vv.shrink_to_fit();
        for (auto &v : vv)
            for (uint32_t x : v)
                r.hash = mix(r.hash, x);
        r.vec += vv.size();

        // ordered map with string keys; erase every other one
        std::map<std::string, std::vector<int>> m;
        for (int i = 0; i < 2000; i++)
            m["key" + std::to_string(rng.below(5000))].push_back(i);
        int k = 0;
        for (auto it = m.begin(); it != m.end(); k++)
            it = (k % 2) ? m.erase(it) : std::next(it);
        for (auto &kv : m)
            r.hash = mix(r.hash, kv.first.size() * 131 + kv.second.size());
        r.map += m.size();

        // unordered_map: rehashing growth, lookups, erases (no iteration
        // order printed: only a sum)
        std::unordered_map<uint64_t, std::string> um;
        for (int i = 0; i < 5000; i++)
            um.emplace(rng.below(20000), std::string(rng.below(100), 'a' + i % 26));
        uint64_t sum = 0;
        for (uint64_t key = 0; key < 20000; key += 7) {
            auto it = um.find(key);
            if (it != um.end()) {
                sum += it->second.size() + key;
                um.erase(it);
            }
        }
        r.hash = mix(r.hash, sum);
        r.umap += um.size();

        // strings: appends past the small-string buffer, copies, substrings
        std::string s;
        for (int i = 0; i < 3000; i++) {
            s += std::to_string(rng.below(1000000));
            if (s.size() > 20000)
                s = s.substr(s.size() / 3);
        }
        std::vector<std::string> copies(50, s);
        for (auto &c : copies)
            r.hash = mix(r.hash, static_cast<unsigned char>(c[c.size() / 2]) + c.size());
        r.str += s.size();

        // shared_ptrs: made here, released by the next thread
        std::vector<std::shared_ptr<Node>> mine;
        for (int i = 0; i < 200; i++)
            mine.push_back(std::make_shared<Node>("node" + std::to_string(i), rng.below(300)));
        std::vector<std::shared_ptr<Node>> got;
        {
            std::lock_guard<std::mutex> g(g_lock);
            got.swap(g_slot[(tid + kThreads - 1) % kThreads]);
            g_slot[tid].insert(g_slot[tid].end(), mine.begin(), mine.end());
        }
        mine.clear();
        r.received += got.size();
        got.clear(); // the last reference: freed by this thread
        r.shared += 200;
    }
    *out = r;
}

int check_qslab()
{
    using node_fn = int (*)(const void *);
    auto node = reinterpret_cast<node_fn>(dlsym(RTLD_DEFAULT, "qslab_object_node"));
    if (!node) {
        std::printf("qslab_object_node not found: not running under libqslab-malloc\n");
        return 1;
    }
    int bad = 0;
    const size_t sizes[] = {1, 24, 100, 1000, 5000, 100000, 3u << 20, 40u << 20};
    for (size_t n : sizes) {
        char *p = new char[n];
        p[0] = p[n - 1] = 1;
        bool ok = node(p) >= 0 && malloc_usable_size(p) >= n;
        std::printf("new char[%zu]: %s\n", n, ok ? "qslab" : "NOT qslab");
        bad += !ok;
        delete[] p;
    }
    auto sp = std::make_shared<Node>("x", 10);
    std::vector<int> v(1000);
    std::string s(500, 's');
    std::map<int, int> m{{1, 2}};
    const void *objs[] = {sp.get(), v.data(), s.data(), &*m.begin()};
    const char *names[] = {"make_shared", "std::vector", "std::string", "std::map node"};
    for (int i = 0; i < 4; i++) {
        // the object may sit inside its allocation (make_shared's control block,
        // a map node's header): qslab_object_node takes any address in qslab memory
        bool ok = node(objs[i]) >= 0;
        std::printf("%s: %s\n", names[i], ok ? "qslab" : "NOT qslab");
        bad += !ok;
    }
    std::printf("%s\n", bad ? "FAIL: operator new is not served by qslab"
                            : "operator new memory is qslab's");
    return bad != 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1 && std::strcmp(argv[1], "--check-qslab") == 0)
        return check_qslab();
    Result res[kThreads];
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; t++)
        ts.emplace_back(worker, t, &res[t]);
    for (auto &t : ts)
        t.join();
    size_t left = 0;
    for (auto &slot : g_slot) {
        left += slot.size();
        slot.clear();
    }
    for (int t = 0; t < kThreads; t++)
        std::printf("thread %d hash=%016llx vec=%zu map=%zu umap=%zu str=%zu shared=%zu\n", t,
                    static_cast<unsigned long long>(res[t].hash), res[t].vec, res[t].map,
                    res[t].umap, res[t].str, res[t].shared);
    // received depends on the interleaving; the total handed over does not
    size_t received = 0;
    for (auto &r : res)
        received += r.received;
    std::printf("shared_ptrs handed over and released: %zu\n", received + left);
    return 0;
}
