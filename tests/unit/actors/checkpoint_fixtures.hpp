#pragma once
// Pieces the checkpoint tests share: a temporary directory, reproducible noise, and looks at
// the archive's files (their layout is documented in actors/README.md, "On disk").
#include <celer/actors/checkpoint.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace checkpoint_test {

namespace fs = std::filesystem;

struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("celer-ckpt-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] celer::checkpoint::options both() const {
    return {.fast_dir = (path / "fast").string(), .archive_dir = (path / "archive").string()};
  }
  [[nodiscard]] celer::checkpoint::options archive_only() const {
    return {.archive_dir = (path / "archive").string()};
  }
};

inline std::vector<float> noise_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline std::string noise(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen());
  return s;
}

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

/// The archive's manifest file of checkpoint `id`.
inline fs::path manifest_file(const fs::path& archive, std::uint64_t id) {
  char name[32];
  std::snprintf(name, sizeof name, "%020llu.json", static_cast<unsigned long long>(id));
  return archive / "manifests" / name;
}

/// The chunk keys a manifest names (every 32-hex-digit string in it).
inline std::set<std::string> chunk_keys_in(const std::string& manifest_text) {
  std::set<std::string> keys;
  static const std::regex key("\"([0-9a-f]{32})\"");
  for (std::sregex_iterator it(manifest_text.begin(), manifest_text.end(), key), end; it != end;
       ++it) {
    keys.insert((*it)[1].str());
  }
  return keys;
}

inline fs::path chunk_file(const fs::path& archive, const std::string& key) {
  return archive / "chunks" / key.substr(0, 2) / key;
}

inline std::size_t count_chunk_files(const fs::path& archive) {
  std::size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(archive / "chunks")) {
    if (e.is_regular_file()) ++n;
  }
  return n;
}

} // namespace checkpoint_test
