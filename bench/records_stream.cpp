// celer-bench-records: how fast CELERRC1 record files stream, every record's CRC-32 checked
// (record_reader::next, over mmap), against `cat` of the same bytes
// (bench/preprocess_stream.sh prints both). Reads each file once first so the page cache
// holds them, then times `--rounds` passes and prints the best.
//
//   celer-bench-records celer_results/catalog/shard-*.rec
#include <celer/actors/preprocess/records.hpp>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace pp = celer::preprocess;

int main(int argc, char** argv) {
  CLI::App cli{"celer-bench-records: streams record files, checking every record's CRC-32, and "
               "prints records/s and GB/s (best of --rounds, page cache warm)."};
  std::vector<std::string> files;
  int rounds = 3;
  cli.add_option("files", files, "record files (.rec)")->required();
  cli.add_option("--rounds", rounds, "timed passes (default 3)");
  CLI11_PARSE(cli, argc, argv);

  double best = 0;
  std::uint64_t bytes = 0, records = 0, payload = 0;
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms the page cache
    const auto t = std::chrono::steady_clock::now();
    bytes = records = payload = 0;
    for (const auto& f : files) {
      auto r = pp::record_reader::open(f);
      if (!r) {
        std::fprintf(stderr, "celer-bench-records: %s\n", r.error().message().c_str());
        return 1;
      }
      bytes += r->size();
      while (true) {
        auto rec = r->next();
        if (!rec) {
          std::fprintf(stderr, "celer-bench-records: %s\n", rec.error().message().c_str());
          return 1;
        }
        if (!*rec) break;
        ++records;
        payload += (*rec)->payload.size();
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (round > 0 && (best == 0 || s < best)) best = s;
  }
  std::printf("celer_records: %zu files, %.3f GB, %llu records (%.3f GB of payload) in %.4f s = "
              "%.2f GB/s, %.0f records/s (record_reader::next, each record's CRC-32 checked, "
              "page cache warm, best of %d)\n",
              files.size(), static_cast<double>(bytes) / 1e9,
              static_cast<unsigned long long>(records), static_cast<double>(payload) / 1e9, best,
              best > 0 ? static_cast<double>(bytes) / 1e9 / best : 0.0,
              best > 0 ? static_cast<double>(records) / best : 0.0, rounds);
  return 0;
}
