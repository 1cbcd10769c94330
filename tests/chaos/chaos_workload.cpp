// The chaos run's workload (tests/chaos/chaos.sh kills processes under it). A driver that,
// round after round until --duration passes:
//   - runs a tree of nested tasks (max_retries = -1) whose leaves each record their number
//     with the recorder actor and return it; the root's sum must be right;
//   - calls checkpointing "tally" actors (max_restarts = -1, max_task_retries = -1) that
//     record each call's number too; a tally's count must never go back past its last
//     checkpoint (it checkpoints every 5 counts and reloads that in its restore hook);
//   - puts a durable object 4 times a second, read back and checked at the end;
//   - every 20th round, runs a task whose 147 KB output goes to the object store, and a
//     second that reverses it (taking the first by ref), both max_retries = -1; each pair
//     is held for 128 such rounds (10-20 s) and then read back and checked, so that
//     killed node agents take stored outputs with them and lineage must make them again.
// The recorder actor (max_restarts = -1, on the node labelled role=head) appends each
// number to a file, which outlives its process. At the end every number sent must be in it.
//
//   celer-chaos-workload --duration S --dir D      the run; writes D/rounds.csv, D/summary.json
//   celer-chaos-workload --check-resources S        waits up to S s for available == total
//
// CELER_ADDRESS names the cluster. Exit status 0 when every check passed.
#include <celer/celer.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
constexpr auto get_timeout = std::chrono::seconds(180);
constexpr int leaves_per_tree = 4;  // depth 2
constexpr int checkpoint_every = 5;

/// Appends "source number" lines to a file (O_APPEND: each line whole, kept when the
/// process is killed). Restarted, it goes on appending.
struct recorder {
  int fd = -1;
  explicit recorder(const std::string& path)
    : fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) {
    if (fd < 0) throw std::runtime_error("cannot open " + path);
  }
  ~recorder() { ::close(fd); }
  recorder(const recorder&) = delete;
  recorder& operator=(const recorder&) = delete;
  void record(std::string source, std::int64_t number) {
    const std::string line = source + " " + std::to_string(number) + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      throw std::runtime_error("cannot append to the record file");
    }
  }
};
recorder* make_recorder(std::string path) { return new recorder(path); }

void record(const std::string& source, std::int64_t number) {
  auto r = celer::get_actor<recorder>("chaos-recorder");
  celer::get(r.task(&recorder::record).remote(source, number), get_timeout);
}

/// A leaf records its number and returns it; an inner node sums its two children.
std::int64_t tree_sum(int depth, std::int64_t first) {
  if (depth == 0) {
    record("leaf", first);
    return first;
  }
  const std::int64_t half = std::int64_t{1} << (depth - 1);
  const celer::task_options o{.num_cpus = 0.5, .max_retries = -1};
  auto left = celer::task(tree_sum).options(o).remote(depth - 1, first);
  auto right = celer::task(tree_sum).options(o).remote(depth - 1, first + half);
  return celer::get(left, get_timeout) + celer::get(right, get_timeout);
}

/// A counter that checkpoints every 5 counts to a file and reloads it when restarted.
struct tally {
  std::string name, checkpoint;
  std::int64_t count = 0;
  tally(std::string n, std::string file) : name(std::move(n)), checkpoint(std::move(file)) {}
  void restore() {
    std::ifstream in(checkpoint);
    if (!(in >> count)) count = 0;  // died before its first checkpoint
  }
  /// Counts call `round`, records it, and returns the count.
  std::int64_t add(std::int64_t round) {
    ++count;
    record(name, round);
    if (count % checkpoint_every == 0) {
      {
        std::ofstream out(checkpoint + ".tmp");
        out << count;
      }
      std::filesystem::rename(checkpoint + ".tmp", checkpoint);
    }
    return count;
  }
};
tally* make_tally(std::string name, std::string file) { return new tally(std::move(name), std::move(file)); }

constexpr int stored_every = 20;  // rounds
constexpr std::size_t stored_kept = 128;

/// A stored output: round r's numbers, each over 2^32 so that msgpack packs it in 9 bytes
/// (147 KB in all, over the 100 KB inline limit).
std::vector<std::int64_t> stored_pattern(int round) {
  std::vector<std::int64_t> v(16384);
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = (std::int64_t{1} << 40) + round * 7919LL + static_cast<std::int64_t>(i) * 31;
  }
  return v;
}

std::vector<std::int64_t> reversed_pattern(std::vector<std::int64_t> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

CELER_REMOTE(make_recorder, &recorder::record, tree_sum, make_tally, &tally::restore, &tally::add,
             stored_pattern, reversed_pattern);

std::vector<std::int64_t> payload_of(int round) {
  std::vector<std::int64_t> v(4096);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = round * 1000003LL + static_cast<std::int64_t>(i);
  return v;
}

int check_resources(double seconds) {
  const auto deadline = clock_type::now() + std::chrono::duration<double>(seconds);
  std::map<std::string, double> total, available;
  while (true) {
    total = celer::cluster_resources();
    available = celer::available_resources();
    bool same = true;
    for (const auto& [k, v] : total) {
      if (std::abs(available[k] - v) > 1e-6) same = false;
    }
    if (same) {
      std::cout << "resources: available equals total (";
      for (const auto& [k, v] : total) std::cout << " " << k << "=" << v;
      std::cout << " )\n";
      return 0;
    }
    if (clock_type::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::cout << "FAILED: after " << seconds << " s, available differs from total:";
  for (const auto& [k, v] : total) std::cout << " " << k << " " << available[k] << "/" << v;
  std::cout << "\n";
  return 1;
}

struct run_args {
  double duration = 120;
  std::filesystem::path dir;
  int tallies = 3;
};

int run(const run_args& a) {
  const auto start = clock_type::now();
  const auto start_epoch_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  const auto ms_since_start = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start).count();
  };
  const auto records = a.dir / "records.txt";
  auto rec = celer::actor(make_recorder)
               .options({.label_selector = {"role=head"},
                         .name = "chaos-recorder",
                         .max_restarts = -1,
                         .max_task_retries = -1})
               .remote(records.string());
  std::vector<celer::actor_handle<tally>> tallies;
  for (int i = 0; i < a.tallies; ++i) {
    const std::string name = "tally" + std::to_string(i);
    tallies.push_back(celer::actor(make_tally)
                        .options({.max_restarts = -1, .max_task_retries = -1})
                        .on_restart(&tally::restore)
                        .remote(name, (a.dir / (name + ".checkpoint")).string()));
  }
  std::ofstream rounds(a.dir / "rounds.csv");
  rounds << "round,end_ms,latency_ms\n";
  std::vector<std::int64_t> last_checkpoint(tallies.size(), 0);
  std::vector<std::pair<int, celer::object_ref<std::vector<std::int64_t>>>> durable;
  struct stored_pair {
    int round;
    celer::object_ref<std::vector<std::int64_t>> pattern, reversed;
  };
  std::deque<stored_pair> stored;
  std::int64_t stored_checked = 0;
  // Reads a pair back; false (and says so) when it is wrong.
  const auto check_stored = [&](const stored_pair& p) {
    auto want = stored_pattern(p.round);
    bool right = celer::get(p.pattern, get_timeout) == want;
    std::reverse(want.begin(), want.end());
    right = right && celer::get(p.reversed, get_timeout) == want;
    stored_checked += 2;
    if (!right) {
      std::cout << "FAILED: the stored outputs of round " << p.round << " read back wrong\n";
    }
    return right;
  };
  std::int64_t results = 0;
  auto next_durable = start;
  int round = 0;
  int failures = 0;
  for (; std::chrono::duration<double>(clock_type::now() - start).count() < a.duration; ++round) {
    const auto began = clock_type::now();
    const std::int64_t first = std::int64_t{round} * leaves_per_tree;
    auto tree = celer::task(tree_sum).options({.num_cpus = 0.5, .max_retries = -1}).remote(2, first);
    std::vector<celer::object_ref<std::int64_t>> counts;
    for (auto& t : tallies) counts.push_back(t.task(&tally::add).remote(std::int64_t{round}));
    try {
      if (round % stored_every == 0) {
        const celer::task_options o{.num_cpus = 0.5, .max_retries = -1};
        auto pattern = celer::task(stored_pattern).options(o).remote(round);
        auto reversed = celer::task(reversed_pattern).options(o).remote(pattern);
        stored.push_back({round, std::move(pattern), std::move(reversed)});
        if (stored.size() > stored_kept) {
          if (!check_stored(stored.front())) ++failures;
          results += 2;
          stored.pop_front();
        }
      }
      if (began >= next_durable) {  // 4 a second: 32 KB each, written through to disk
        durable.emplace_back(round, celer::put(payload_of(round), {.durable = true}));
        next_durable = began + std::chrono::milliseconds(250);
      }
      const std::int64_t expected = leaves_per_tree * first + leaves_per_tree * (leaves_per_tree - 1) / 2;
      const auto sum = celer::get(tree, get_timeout);
      ++results;
      if (sum != expected) {
        std::cout << "FAILED: round " << round << ": the tree summed to " << sum << ", not "
                  << expected << "\n";
        ++failures;
      }
      for (std::size_t i = 0; i < counts.size(); ++i) {
        const auto c = celer::get(counts[i], get_timeout);
        ++results;
        if (c <= last_checkpoint[i]) {
          std::cout << "FAILED: round " << round << ": tally" << i << " counted " << c
                    << ", back past its checkpoint " << last_checkpoint[i] << "\n";
          ++failures;
        }
        if (c % checkpoint_every == 0) last_checkpoint[i] = std::max(last_checkpoint[i], c);
      }
    } catch (const std::exception& e) {
      std::cout << "FAILED: round " << round << ": " << e.what() << "\n";
      return 1;
    }
    const auto latency =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - began).count();
    rounds << round << "," << ms_since_start() << "," << latency << "\n" << std::flush;
  }
  // The stored outputs still held read back whole.
  int lost = 0;
  for (const auto& p : stored) {
    try {
      if (!check_stored(p)) ++failures;
      results += 2;
    } catch (const std::exception& e) {
      std::cout << "FAILED: the stored outputs of round " << p.round << " are lost: " << e.what()
                << "\n";
      ++lost;
    }
  }
  // Every durable object reads back whole.
  for (const auto& [r, ref] : durable) {
    try {
      if (celer::get(ref, get_timeout) != payload_of(r)) {
        std::cout << "FAILED: the durable object of round " << r << " reads back wrong\n";
        ++failures;
      }
      ++results;
    } catch (const std::exception& e) {
      std::cout << "FAILED: the durable object of round " << r << " is lost: " << e.what() << "\n";
      ++lost;
    }
  }
  // Every number sent is recorded at least once.
  std::map<std::string, std::set<std::int64_t>> seen;
  {
    std::ifstream in(records);
    std::string source;
    std::int64_t n = 0;
    while (in >> source >> n) seen[source].insert(n);
  }
  std::int64_t missing = 0, sent = 0;
  for (std::int64_t leaf = 0; leaf < std::int64_t{round} * leaves_per_tree; ++leaf, ++sent) {
    if (!seen["leaf"].contains(leaf)) ++missing;
  }
  for (std::size_t i = 0; i < tallies.size(); ++i) {
    for (std::int64_t r = 0; r < round; ++r, ++sent) {
      if (!seen["tally" + std::to_string(i)].contains(r)) ++missing;
    }
  }
  if (missing > 0) std::cout << "FAILED: " << missing << " of " << sent << " numbers were never recorded\n";
  for (auto& t : tallies) celer::kill(t);
  celer::kill(rec);
  std::ofstream(a.dir / "summary.json")
    << "{\"start_ms\": " << start_epoch_ms << ", \"rounds\": " << round << ", \"results_checked\": " << results
    << ", \"numbers_sent\": " << sent << ", \"numbers_missing\": " << missing
    << ", \"durable_objects\": " << durable.size()
    << ", \"stored_outputs_checked\": " << stored_checked << ", \"lost\": " << lost
    << ", \"wrong_results\": " << failures << ", \"seconds\": " << ms_since_start() / 1000.0
    << "}\n";
  std::cout << "chaos workload: " << round << " rounds, " << results << " results checked, "
            << sent << " numbers recorded, " << durable.size() << " durable objects and "
            << stored_checked << " stored task outputs read back\n";
  return failures == 0 && missing == 0 && lost == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  celer::init();  // a worker process (CELER_WORKER_ID set) serves here and never returns
  run_args a;
  double check = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--duration") {
      a.duration = std::stod(argv[i + 1]);
    } else if (flag == "--dir") {
      a.dir = argv[i + 1];
    } else if (flag == "--tallies") {
      a.tallies = std::stoi(argv[i + 1]);
    } else if (flag == "--check-resources") {
      check = std::stod(argv[i + 1]);
    } else {
      std::cerr << "usage: celer-chaos-workload --duration S --dir D [--tallies N] | "
                   "--check-resources S\n";
      celer::shutdown();
      return 2;
    }
  }
  int status = 0;
  if (check >= 0) {
    status = check_resources(check);
  } else if (a.dir.empty()) {
    std::cerr << "celer-chaos-workload: --dir is required (where records and rounds go)\n";
    status = 2;
  } else {
    status = run(a);
  }
  celer::shutdown();
  return status;
}
