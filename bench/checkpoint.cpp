// celer-bench-checkpoint: what the checkpoint writers (actors/checkpoint) cost.
//
//  1. Bytes written: a full checkpoint of a state of N floats (4M: 16 MiB), then an
//     incremental one after 1% of the values changed in one contiguous run, after 1%
//     changed at random places, and after every value changed (a dense SGD step). Each
//     scenario starts from its own full checkpoint in fresh directories (write(), both tiers).
//  2. save() against the background: a checkpointer in an embedded runtime saves the state
//     `--saves` times, each after a dense change, waiting for each: how long save() held the
//     caller, and how long until each tier's copy was durable.
//  3. Restore: 16 MiB and 64 MiB checkpoints read back from the fast tier and from the
//     archive alone, each verified (chunk hashes, entry checksums).
//  4. Chunking and hashing throughput, the work the writers do per byte.
//
//   build/bench/celer-bench-checkpoint [--smoke] [--dir DIR] [--floats N] [--saves N]
//
// Every restore is compared with what was saved; a mismatch prints "CHECK FAILED" and the
// program exits 1. Figures are medians where a workload repeats.
#include <celer/actors/checkpoint.hpp>
#include <celer/celer.hpp>
#include <celer/store/checksum.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace ckpt = celer::checkpoint;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::printf("CHECK FAILED: %s\n", what.c_str());
}

void row(const std::string& name, double value, const char* unit, const std::string& note = {}) {
  std::printf("%-40s %14.3f %-6s %s\n", name.c_str(), value, unit, note.c_str());
  std::fflush(stdout);
}

double ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }
double mib(std::uint64_t b) { return static_cast<double>(b) / (1 << 20); }

template <class T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Fresh tier directories under `root`, removed when done.
struct scratch {
  fs::path path;
  explicit scratch(const fs::path& root) {
    static int n = 0;
    path = root / ("bench-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  [[nodiscard]] ckpt::options both() const {
    return {.fast_dir = (path / "fast").string(), .archive_dir = (path / "archive").string()};
  }
};

std::vector<float> state(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> w(n);
  for (auto& x : w) x = d(g);
  return w;
}

/// A dense SGD-like step: every value moves a little.
void dense_step(std::vector<float>& w, std::mt19937_64& g) {
  for (auto& x : w) x -= 1e-3f * (static_cast<float>(g() >> 40) / (1 << 24) - 0.5f);
}

ckpt::snapshot snap(const std::vector<float>& w, std::int64_t step) {
  ckpt::snapshot s;
  s.set_step(step);
  s.add_view("model/w", w.data(), w.size() * sizeof(float), {{"dtype", "float32"}});
  s.add_int("step", step);
  return s;
}

bool same(const ckpt::snapshot& s, const std::vector<float>& w) {
  const auto* e = s.find("model/w");
  return e != nullptr && e->data.size() == w.size() * sizeof(float) &&
         std::memcmp(e->data.data(), w.data(), e->data.size()) == 0;
}

void bytes_written(const fs::path& root, std::size_t floats) {
  const auto base = state(floats, 1);
  const std::uint64_t logical = floats * sizeof(float);
  struct scenario {
    const char* name;
    void (*change)(std::vector<float>&);
  };
  const scenario scenarios[] = {
    {"incremental_1pct_contiguous", [](std::vector<float>& w) {
       for (std::size_t i = 0; i < w.size() / 100; ++i) w[w.size() / 2 + i] += 1e-3f;
     }},
    {"incremental_1pct_scattered", [](std::vector<float>& w) {
       std::mt19937_64 g(2);
       for (std::size_t i = 0; i < w.size() / 100; ++i) w[g() % w.size()] += 1e-3f;
     }},
    {"incremental_dense_sgd_step", [](std::vector<float>& w) {
       std::mt19937_64 g(3);
       dense_step(w, g);
     }},
  };
  bool printed_full = false;
  for (const auto& sc : scenarios) {
    scratch dir(root);
    auto w = base;
    auto full = ckpt::write(snap(w, 1), dir.both());
    check(full.has_value(), "full write");
    if (!full) return;
    if (!printed_full) {
      row("full_checkpoint_bytes_written", mib(full->archive.bytes_written), "MiB",
          "of " + std::to_string(mib(logical)).substr(0, 5) + " MiB logical, " +
            std::to_string(full->archive.chunks) + " chunks (each tier)");
      printed_full = true;
    }
    sc.change(w);
    auto inc = ckpt::write(snap(w, 2), dir.both());
    check(inc.has_value(), std::string(sc.name) + " write");
    if (!inc) return;
    const auto& a = inc->archive;
    char note[128];
    std::snprintf(note, sizeof note, "%.1f%% of logical; %llu of %llu chunks new (each tier)",
                  100.0 * static_cast<double>(a.bytes_written) / static_cast<double>(logical),
                  static_cast<unsigned long long>(a.chunks_written),
                  static_cast<unsigned long long>(a.chunks));
    row(std::string(sc.name) + "_bytes_written", mib(a.bytes_written), "MiB", note);
    auto back = ckpt::restore(dir.both());
    check(back && same(back->data, w), std::string(sc.name) + " restores what was saved");
  }
}

void save_latency(const fs::path& root, std::size_t floats, int saves) {
  scratch dir(root);
  celer::init({.num_cpus = 2});
  {
    auto ck = ckpt::checkpointer::open(dir.both());
    check(ck.has_value(), "checkpointer::open");
    if (!ck) return;
    auto w = state(floats, 4);
    std::mt19937_64 g(5);
    std::vector<std::chrono::nanoseconds> blocked, fast, archive, busy;
    for (int k = 0; k < saves; ++k) {
      dense_step(w, g);  // every chunk new: the writers' worst case
      const auto id = ck->save(snap(w, k + 1));
      check(id.has_value(), "save");
      check(ck->wait().has_value(), "wait");
      for (const auto& r : ck->take_reports()) {
        blocked.push_back(r.blocked);
        fast.push_back(r.fast.durable_after);
        archive.push_back(r.archive.durable_after);
        busy.push_back(r.archive.busy);
      }
    }
    if (blocked.empty()) return;
    const std::string what = std::to_string(mib(floats * sizeof(float))).substr(0, 5) +
                             " MiB, all chunks new, median of " + std::to_string(blocked.size());
    row("save_blocked_ms", ms(median(blocked)), "ms", what + " (the caller's time)");
    row("save_durable_fast_ms", ms(median(fast)), "ms", "save() called -> fast tier synced");
    row("save_durable_archive_ms", ms(median(archive)), "ms",
        "save() called -> archive manifest renamed");
    row("archive_writer_busy_ms", ms(median(busy)), "ms", "cut, hash, write, fsync, retention");
    auto back = ckpt::restore(dir.both());
    check(back && same(back->data, w), "the last save restores");
  }
  celer::shutdown();
}

void restore_time(const fs::path& root, std::size_t bytes) {
  scratch dir(root);
  const auto w = state(bytes / sizeof(float), 6);
  check(ckpt::write(snap(w, 1), dir.both()).has_value(), "write for restore");
  const auto label = std::to_string(bytes >> 20) + "MiB";
  for (const bool archive_only : {false, true}) {
    ckpt::options o = dir.both();
    if (archive_only) o.fast_dir.clear();
    std::vector<std::chrono::nanoseconds> took;
    for (int k = 0; k < 3; ++k) {
      auto back = ckpt::restore(o);
      check(back && same(back->data, w), "restore " + label);
      if (back) took.push_back(back->elapsed);
    }
    if (took.empty()) continue;
    const double t = ms(median(took));
    char note[96];
    std::snprintf(note, sizeof note, "%.2f GB/s, median of 3, verified", bytes / t / 1e6);
    row("restore_" + label + (archive_only ? "_archive_ms" : "_fast_ms"), t, "ms", note);
  }
}

void throughput(std::size_t bytes) {
  const auto w = state(bytes / sizeof(float), 7);
  const auto* p = reinterpret_cast<const char*>(w.data());
  const auto t0 = clock_type::now();
  const auto cuts = ckpt::cut(p, bytes);
  const auto t1 = clock_type::now();
  std::size_t at = 0;
  std::uint64_t sink = 0;
  for (auto n : cuts) {
    sink += celer::store::content_hash(p + at, n).low;
    at += n;
  }
  const auto t2 = clock_type::now();
  check(sink != 0 && at == bytes, "hashed every chunk");
  const double gb = static_cast<double>(bytes) / 1e9;
  row("chunking_gb_per_s", gb / std::chrono::duration<double>(t1 - t0).count(), "GB/s",
      "FastCDC cut points");
  row("chunk_hashing_gb_per_s", gb / std::chrono::duration<double>(t2 - t1).count(), "GB/s",
      "XXH3-128 of every chunk");
}

} // namespace

int main(int argc, char** argv) {
  celer::serve_if_worker();
  CLI::App app{"celer-bench-checkpoint: bytes written, save latency and restore time of the "
               "checkpoint writers"};
  bool smoke = false;
  std::string dir = fs::temp_directory_path().string();
  std::size_t floats = std::size_t{4} << 20;
  int saves = 10;
  app.add_flag("--smoke", smoke, "tiny sizes, for the ctest");
  app.add_option("--dir", dir, "where the tiers go (a real disk gives honest fsync figures)");
  app.add_option("--floats", floats, "the state's size in floats (4M: 16 MiB)");
  app.add_option("--saves", saves, "saves for the latency figures");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::size_t> restore_sizes = {std::size_t{16} << 20, std::size_t{64} << 20};
  if (smoke) {
    floats = std::size_t{1} << 18;
    saves = 2;
    restore_sizes = {std::size_t{1} << 20};
  }
  std::printf("%-40s %14s %-6s %s\n", "workload", "value", "unit", "note");
  throughput(floats * sizeof(float));
  bytes_written(dir, floats);
  save_latency(dir, floats, saves);
  for (auto b : restore_sizes) restore_time(dir, b);
  if (failures > 0) return 1;
  std::printf("checkpoint_bench_done\n");
  return 0;
}
