// driver.cpp: runs cases through the entry points of kernels/apply_token_bitmask.cu
// (or a file with the same entry points) on the lockstep-warp emulator.
//
// Build: c++ -std=c++20 -O2 -fno-strict-aliasing -Wno-unknown-pragmas
//            -fsanitize=alignment -fsanitize-undefined-trap-on-error
//            -include simt.hpp -include <kernel.cu> driver.cpp -o driver
// (clang spells the trap flag -fsanitize-trap=alignment).
// Run:   driver CASES OUT
//
// CASES holds one or more cases, each (little endian, u32 unless noted):
//   magic "SIMT", kernel name length, name bytes,
//   grid x y z, block x y z, num_rows, batch, vocab, words,
//   has_neg16, neg16, logits address mod 16, schedule (0: in order),
//   u64 logits byte count, the bytes, u64 bitmask word count, the words,
//   has_indices, u64 index count, the indices.
// OUT receives each case's logits after the launch, one after another. On
// the first problem (a diverged warp, a fault, a malformed case) it prints
// `simt error: case N: ...` to stderr and exits with status 2; at the end it
// prints one line of statistics to stdout.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Reader {
    const std::vector<unsigned char>& bytes;
    size_t at = 0;

    void take(void* out, size_t n) {
        if (bytes.size() - at < n) simt::fail("truncated case file at byte %zu", at);
        memcpy(out, bytes.data() + at, n);
        at += n;
    }
    uint32_t u32() {
        uint32_t v;
        take(&v, 4);
        return v;
    }
    uint64_t u64() {
        uint64_t v;
        take(&v, 8);
        return v;
    }
    dim3 dims() {
        dim3 d;
        d.x = u32();
        d.y = u32();
        d.z = u32();
        return d;
    }
    template <typename T>
    std::vector<T> array(uint64_t count) {
        if (count > (bytes.size() - at) / sizeof(T)) simt::fail("truncated case file at byte %zu", at);
        std::vector<T> v(count);
        take(v.data(), count * sizeof(T));
        return v;
    }
};

std::vector<unsigned char> read_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) simt::fail("cannot open %s", path);
    std::vector<unsigned char> bytes;
    unsigned char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
    fclose(f);
    return bytes;
}

// Launches `name` with the plan's arguments, as cudarc would push them: three
// pointers, four u32, and neg16 for the 16-bit kernels only.
void launch(const char* name, dim3 grid, dim3 block, uint64_t schedule, unsigned char* logits,
            const uint32_t* bitmask, const uint32_t* indices, uint32_t num_rows, uint32_t batch,
            uint32_t vocab, uint32_t words, bool has_neg16, uint32_t neg16) {
    const bool b16 = strstr(name, "_b16") != nullptr;
    if (has_neg16 != b16)
        simt::fail("the plan %s the -inf pattern to %s, which takes %s", has_neg16 ? "passes" : "omits",
                   name, b16 ? "it (8 parameters)" : "7 parameters");
    auto run = [&](auto kernel) { simt::launch(grid, block, schedule, kernel); };
    if (!strcmp(name, "apply_bitmask_b32"))
        run([&] {
            apply_bitmask_b32(reinterpret_cast<uint32_t*>(logits), bitmask, indices, num_rows, batch,
                              vocab, words);
        });
    else if (!strcmp(name, "apply_bitmask_b32_sectors"))
        run([&] {
            apply_bitmask_b32_sectors(reinterpret_cast<uint32_t*>(logits), bitmask, indices, num_rows,
                                      batch, vocab, words);
        });
    else if (!strcmp(name, "apply_bitmask_b16"))
        run([&] {
            apply_bitmask_b16(reinterpret_cast<uint16_t*>(logits), bitmask, indices, num_rows, batch,
                              vocab, words, neg16);
        });
    else if (!strcmp(name, "apply_bitmask_b16_pairs"))
        run([&] {
            apply_bitmask_b16_pairs(reinterpret_cast<uint16_t*>(logits), bitmask, indices, num_rows,
                                    batch, vocab, words, neg16);
        });
    else
        simt::fail("no entry point named \"%s\"", name);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CASES OUT\n", argv[0]);
        return 64;
    }
    simt::init();
    const std::vector<unsigned char> bytes = read_file(argv[1]);
    FILE* out = fopen(argv[2], "wb");
    if (!out) simt::fail("cannot create %s", argv[2]);
    Reader in{bytes};
    char label[32];
    for (unsigned index = 0; in.at < bytes.size(); ++index) {
        snprintf(label, sizeof label, "case %u", index);
        simt::case_label = label;
        if (in.u32() != 0x544D4953u) simt::fail("bad magic: not a case record");
        const std::vector<char> name_bytes = in.array<char>(in.u32());
        const std::string name(name_bytes.begin(), name_bytes.end());
        const dim3 grid = in.dims(), block = in.dims();
        const uint32_t num_rows = in.u32(), batch = in.u32(), vocab = in.u32(), words = in.u32();
        const bool has_neg16 = in.u32() != 0;
        const uint32_t neg16 = in.u32(), align = in.u32(), schedule = in.u32();
        const std::vector<unsigned char> logits = in.array<unsigned char>(in.u64());
        const std::vector<uint32_t> bitmask = in.array<uint32_t>(in.u64());
        const bool has_indices = in.u32() != 0;
        const std::vector<uint32_t> indices = in.array<uint32_t>(in.u64());

        simt::DeviceBuffer d_logits("logits", logits.data(), logits.size(), 16, align, false);
        simt::DeviceBuffer d_bitmask("bitmask", bitmask.data(), bitmask.size() * 4, 4, 0, true);
        simt::DeviceBuffer d_indices("indices", indices.data(), indices.size() * 4, 4, 0, true);
        launch(name.c_str(), grid, block, schedule, d_logits.data(),
               reinterpret_cast<const uint32_t*>(d_bitmask.data()),
               has_indices ? reinterpret_cast<const uint32_t*>(d_indices.data()) : nullptr, num_rows,
               batch, vocab, words, has_neg16, neg16);
        d_logits.check_canaries();
        if (fwrite(d_logits.data(), 1, d_logits.size(), out) != d_logits.size())
            simt::fail("cannot write %s", argv[2]);
    }
    if (fclose(out) != 0) simt::fail("cannot write %s", argv[2]);
    const simt::Stats& s = simt::stats;
    printf("%llu blocks, %llu warps, %llu warp collectives, %llu lane resumes\n",
           (unsigned long long)s.blocks, (unsigned long long)s.warps,
           (unsigned long long)s.collectives, (unsigned long long)s.resumes);
    return 0;
}
