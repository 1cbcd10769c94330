#pragma once
// What the celer-train test files share (celer_train_tests: train_report_test.cpp and
// train_models_test.cpp): a scratch directory, files read whole, the real binary run in a
// shell, metrics.jsonl's lines, and the shipped configs. CELER_TRAIN and CELER_SOURCE_DIR
// come from tests/apps/CMakeLists.txt.
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace celer_train_test {

namespace fs = std::filesystem;

/// A fresh directory under /tmp, removed afterwards.
struct scratch_dir {
  fs::path dir;
  scratch_dir() {
    char tmpl[] = "/tmp/celer-train-test.XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs `script` with bash in `cwd`, where $CELER_TRAIN is the binary and $LOG the file its
/// output should go to; the exit code, and that file in `output`.
inline int run_script(const fs::path& cwd, const std::string& script, std::string& output) {
  const std::string log = (cwd / "celer-train.out").string();
  const std::string command = "cd '" + cwd.string() + "' && CELER_TRAIN='" CELER_TRAIN "' LOG='" + log +
                              "' bash -c '" + script + "'";
  const int status = std::system(command.c_str());
  output = slurp(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Runs celer-train with `args` (shell words in double quotes, none holding a single quote)
/// in `cwd`, for at most 90 s; its exit code, its stdout and stderr in `output`.
inline int run_celer_train(const fs::path& cwd, const std::string& args, std::string& output) {
  return run_script(cwd, "timeout 90 \"$CELER_TRAIN\" " + args + " > \"$LOG\" 2>&1", output);
}

/// The lines of a JSONL file.
inline std::vector<nlohmann::json> jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(p));
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(nlohmann::json::parse(l));
  return out;
}

inline const std::string digits_config = std::string(CELER_SOURCE_DIR) + "/config/train/digits-mlp.yaml";
inline const std::string fortunes_config = std::string(CELER_SOURCE_DIR) + "/config/train/fortunes-transformer.yaml";

} // namespace celer_train_test
