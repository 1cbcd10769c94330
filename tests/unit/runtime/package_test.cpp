// A job's working directory as one archive (runtime/src/jobs/package.hpp): trees packed and
// unpacked in real folders under the temp directory, and hand-built archives that try to
// write outside their folder, claim more bytes than they hold, or are damaged.
#include "jobs/package.hpp"
#include "unit/runtime/temp_dir.hpp"

#include <celer/ids.hpp>

#include <catch2/catch.hpp>
#include <sodium.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

using namespace celer;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using celer_test::temp_dir;

void write(const fs::path& p, const std::string& bytes, fs::perms mode = fs::perms(0644)) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
  fs::permissions(p, mode);
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

unsigned permission_bits(const fs::path& p) {
  struct stat st{};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

mode_t current_umask() {
  const mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

/// Every path under `root`, relative, with what it is: "f a/b", "d a", "l a/c -> target".
std::set<std::string> listing(const fs::path& root) {
  std::set<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const auto rel = it->path().lexically_relative(root).generic_string();  // relative() would follow links
    if (it->is_symlink()) {
      out.insert("l " + rel + " -> " + fs::read_symlink(it->path()).string());
    } else if (it->is_directory()) {
      out.insert("d " + rel);
    } else {
      out.insert("f " + rel);
    }
  }
  return out;
}

/// 512 bytes holding every byte value twice, zeros among them.
std::string binary_bytes() {
  std::string s;
  for (int round = 0; round < 2; ++round) {
    for (int b = 0; b < 256; ++b) s.push_back(static_cast<char>(b));
  }
  return s;
}

/// The tree most cases pack: nested folders, an empty folder, an executable script, a binary
/// file and relative links (to a file beside it, to a folder, and climbing out of a folder).
void make_tree(const fs::path& root) {
  write(root / "src/main.py", "print('hello')\n");
  write(root / "src/lib/util.py", "def f():\n    return 1\n");
  write(root / "run.sh", "#!/bin/sh\necho ok\n", fs::perms(0755));
  write(root / "data/blob.bin", binary_bytes());
  fs::create_directories(root / "empty");
  fs::create_symlink("blob.bin", root / "data/latest");
  fs::create_symlink("src/lib", root / "lib");
  fs::create_symlink("../../data/blob.bin", root / "src/lib/blob");
}

/// Builds archives by hand, entry by entry, with a correct checksum: what a malicious or
/// buggy packer could send.
class archive_builder {
public:
  archive_builder& add(unsigned kind, std::uint32_t mode, std::string_view path, std::string_view data) {
    put(kind, 1);
    put(mode, 4);
    put(path.size(), 2);
    bytes_ += path;
    put(data.size(), 8);
    bytes_ += data;
    return *this;
  }
  archive_builder& file(std::string_view path, std::string_view contents) { return add(1, 0644, path, contents); }
  archive_builder& folder(std::string_view path) { return add(2, 0755, path, {}); }
  archive_builder& link(std::string_view path, std::string_view target) { return add(3, 0777, path, target); }
  /// Raw bytes, to build what add() cannot.
  archive_builder& raw(std::string_view b) {
    bytes_ += b;
    return *this;
  }
  /// The end entry, then the checksum.
  [[nodiscard]] std::string sealed() const { return with_checksum(bytes_ + std::string(1, '\0')); }
  /// The checksum without an end entry.
  [[nodiscard]] std::string sealed_without_end() const { return with_checksum(bytes_); }

private:
  void put(std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  static std::string with_checksum(std::string s) {
    REQUIRE(sodium_init() >= 0);
    std::array<unsigned char, 32> sum{};
    crypto_generichash(sum.data(), sum.size(), reinterpret_cast<const unsigned char*>(s.data()), s.size(), nullptr, 0);
    s.append(reinterpret_cast<const char*>(sum.data()), sum.size());
    return s;
  }
  std::string bytes_{jobs::package_magic};
};

bool is_empty_folder(const fs::path& p) { return fs::is_directory(p) && fs::is_empty(p); }

} // namespace

TEST_CASE("a packed tree unpacks to the same files, folders, modes and links", "[package]") {
  temp_dir t;
  make_tree(t.path / "tree");
  auto archive = jobs::pack_directory(t.path / "tree");
  REQUIRE(archive.has_value());
  CHECK(archive->substr(0, 8) == "CELERPK1");

  const auto out = t.path / "out";
  auto unpacked = jobs::unpack(*archive, out);
  REQUIRE(unpacked.has_value());

  CHECK(listing(out) == listing(t.path / "tree"));
  CHECK(listing(out) == std::set<std::string>{
                          "d data", "f data/blob.bin", "l data/latest -> blob.bin", "d empty",
                          "l lib -> src/lib", "f run.sh", "d src", "d src/lib",
                          "l src/lib/blob -> ../../data/blob.bin", "f src/lib/util.py", "f src/main.py"});
  CHECK(read(out / "src/main.py") == "print('hello')\n");
  CHECK(read(out / "src/lib/util.py") == "def f():\n    return 1\n");
  CHECK(read(out / "data/blob.bin") == binary_bytes());
  CHECK(read(out / "data/blob.bin").size() == 512);
  // The links work where they were unpacked.
  CHECK(read(out / "data/latest") == binary_bytes());
  CHECK(read(out / "lib/util.py") == "def f():\n    return 1\n");
  CHECK(read(out / "src/lib/blob") == binary_bytes());
  CHECK(is_empty_folder(out / "empty"));

  // Modes come back less the umask; the script stays executable, the rest do not become so.
  const unsigned mask = current_umask();
  CHECK(permission_bits(out / "run.sh") == (0755u & ~mask));
  CHECK((permission_bits(out / "run.sh") & 0100u) == 0100u);
  CHECK(permission_bits(out / "src/main.py") == (0644u & ~mask));
  CHECK(permission_bits(out / "src") == (0755u & ~mask));

  // No scratch folder is left beside it.
  std::vector<std::string> beside;
  for (const auto& e : fs::directory_iterator(t.path)) beside.push_back(e.path().filename().string());
  std::sort(beside.begin(), beside.end());
  CHECK(beside == std::vector<std::string>{"out", "tree"});

  auto summary = jobs::inspect(*archive);
  REQUIRE(summary.has_value());
  CHECK(summary->files == 4);
  CHECK(summary->folders == 4);
  CHECK(summary->links == 3);
  CHECK(summary->bytes == 15 + 22 + 18 + 512);
}

TEST_CASE("the same tree packs to the same bytes and digest, whatever order it was made in", "[package]") {
  temp_dir t;
  make_tree(t.path / "a");
  // The same tree made in another order, later (other times, other inode numbers).
  fs::create_directories(t.path / "b/src/lib");
  fs::create_symlink("../../data/blob.bin", t.path / "b/src/lib/blob");
  fs::create_symlink("src/lib", t.path / "b/lib");
  fs::create_directories(t.path / "b/empty");
  write(t.path / "b/data/blob.bin", binary_bytes());
  fs::create_symlink("blob.bin", t.path / "b/data/latest");
  write(t.path / "b/run.sh", "#!/bin/sh\necho ok\n", fs::perms(0755));
  write(t.path / "b/src/lib/util.py", "def f():\n    return 1\n");
  write(t.path / "b/src/main.py", "print('hello')\n");

  auto first = jobs::pack_directory(t.path / "a");
  auto again = jobs::pack_directory(t.path / "a");
  auto other = jobs::pack_directory(t.path / "b");
  REQUIRE(first.has_value());
  REQUIRE(again.has_value());
  REQUIRE(other.has_value());
  CHECK(*first == *again);
  CHECK(*first == *other);
  const auto digest = jobs::package_digest(*first);
  CHECK(digest.size() == 32);
  CHECK(digest.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(digest == jobs::package_digest(*other));

  // One byte of one file changes the digest.
  write(t.path / "b/src/main.py", "print('hellO')\n");
  auto changed = jobs::pack_directory(t.path / "b");
  REQUIRE(changed.has_value());
  CHECK(changed->size() == first->size());
  CHECK(jobs::package_digest(*changed) != digest);
  // So does the executable bit alone.
  write(t.path / "b/src/main.py", "print('hello')\n", fs::perms(0755));
  auto executable = jobs::pack_directory(t.path / "b");
  REQUIRE(executable.has_value());
  CHECK(jobs::package_digest(*executable) != digest);
}

TEST_CASE("the digest is BLAKE2b-128 of the archive in hex", "[package]") {
  CHECK(jobs::package_digest("") == "cae66941d9efbd404e4d88758ea67670");
  CHECK(jobs::package_digest("abc") == "cf4ab791c62b8d2b2109c90275287816");
}

TEST_CASE("excludes leave out .git and a nested folder, and nothing else", "[package]") {
  temp_dir t;
  const auto tree = t.path / "tree";
  write(tree / ".git/HEAD", "ref: refs/heads/main\n");
  write(tree / ".git/objects/ab/cdef", "blob");
  write(tree / ".gitignore", "build/\n");
  write(tree / "src/a.cpp", "int main() {}\n");
  write(tree / "src/gen/big.cpp", std::string(5000, 'x'));
  write(tree / "src/general.cpp", "// not under src/gen\n");

  auto archive = jobs::pack_directory(tree, {.excludes = {".git", "./src/gen/"}});
  REQUIRE(archive.has_value());
  auto summary = jobs::inspect(*archive);
  REQUIRE(summary.has_value());
  CHECK(summary->files == 3);
  CHECK(summary->folders == 1);
  CHECK(summary->bytes == 7 + 14 + 21);

  REQUIRE(jobs::unpack(*archive, t.path / "out").has_value());
  CHECK(listing(t.path / "out") ==
        std::set<std::string>{"f .gitignore", "d src", "f src/a.cpp", "f src/general.cpp"});

  // An exclude is a path inside the folder.
  for (const std::string bad : {"/etc", "../tree", "src/../.git", ""}) {
    auto refused = jobs::pack_directory(tree, {.excludes = {bad}});
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code() == error_code::invalid_argument);
    CHECK_THAT(refused.error().message(), Contains("exclude"));
  }
}

TEST_CASE("packing past the limit fails with resource_exhausted, giving the size reached and the limit", "[package]") {
  temp_dir t;
  const auto tree = t.path / "tree";
  write(tree / "big.bin", std::string(10000, 'b'));
  write(tree / "small.txt", "small\n");

  // The archive: magic, big.bin's entry (15 bytes besides path and contents), small.txt's,
  // the end entry and the checksum.
  const std::uint64_t whole = 8 + (15 + 7 + 10000) + (15 + 9 + 6) + 1 + 32;
  auto unlimited = jobs::pack_directory(tree);
  REQUIRE(unlimited.has_value());
  REQUIRE(unlimited->size() == whole);
  auto exactly = jobs::pack_directory(tree, {.limit_bytes = whole});
  REQUIRE(exactly.has_value());
  CHECK(*exactly == *unlimited);

  auto one_less = jobs::pack_directory(tree, {.limit_bytes = whole - 1});
  REQUIRE_FALSE(one_less.has_value());
  CHECK(one_less.error().code() == error_code::resource_exhausted);
  CHECK_THAT(one_less.error().message(), Contains(std::to_string(whole) + " bytes") &&
                                           Contains(std::to_string(whole - 1) + " bytes") &&
                                           Contains("'small.txt'"));

  auto small = jobs::pack_directory(tree, {.limit_bytes = 4096});
  REQUIRE_FALSE(small.has_value());
  CHECK(small.error().code() == error_code::resource_exhausted);
  // It stops at big.bin: the magic, its entry and the trailer are 8 + 10022 + 33 bytes.
  CHECK_THAT(small.error().message(), Contains("reaches 10063 bytes") && Contains("'big.bin'") &&
                                        Contains("limit of 4096 bytes") && Contains("--exclude") &&
                                        Contains("--working-dir-limit"));

  // Even an empty folder packs to 41 bytes (magic, end entry, checksum).
  fs::create_directories(t.path / "bare");
  auto bare = jobs::pack_directory(t.path / "bare");
  REQUIRE(bare.has_value());
  CHECK(bare->size() == 41);
  CHECK(jobs::inspect(*bare)->files == 0);
  auto tiny = jobs::pack_directory(t.path / "bare", {.limit_bytes = 40});
  REQUIRE_FALSE(tiny.has_value());
  CHECK(tiny.error().code() == error_code::resource_exhausted);
  CHECK_THAT(tiny.error().message(), Contains("reaches 41 bytes") && Contains("limit of 40 bytes"));

  // Leaving the large file out is the way through.
  auto without = jobs::pack_directory(tree, {.limit_bytes = 4096, .excludes = {"big.bin"}});
  REQUIRE(without.has_value());
  CHECK(without->size() == 8 + 15 + 9 + 6 + 1 + 32);
}

TEST_CASE("pack refuses links that leave the folder or are absolute, special files, and a missing folder", "[package]") {
  temp_dir t;
  const auto tree = t.path / "tree";
  write(tree / "a/file.txt", "x");

  SECTION("a link climbing out of the folder") {
    fs::create_symlink("../../outside", tree / "a/up");
    auto r = jobs::pack_directory(tree);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code() == error_code::invalid_argument);
    CHECK_THAT(r.error().message(), Contains("'a/up'") && Contains("'../../outside'") && Contains("outside the tree"));
    // Left out, the rest packs.
    CHECK(jobs::pack_directory(tree, {.excludes = {"a/up"}}).has_value());
  }
  SECTION("a link climbing just to the top is fine") {
    fs::create_symlink("../a/file.txt", tree / "a/same");
    fs::create_symlink("..", tree / "a/top");
    auto r = jobs::pack_directory(tree);
    REQUIRE(r.has_value());
    CHECK(jobs::inspect(*r)->links == 2);
  }
  SECTION("an absolute link") {
    fs::create_symlink("/etc/passwd", tree / "passwd");
    auto r = jobs::pack_directory(tree);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code() == error_code::invalid_argument);
    CHECK_THAT(r.error().message(), Contains("'passwd'") && Contains("absolute"));
  }
  SECTION("a link that climbs after descending") {
    // "a/.." is the top lexically, but were "a" a link it would be somewhere else.
    fs::create_symlink("a/../a/file.txt", tree / "roundabout");
    auto r = jobs::pack_directory(tree);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code() == error_code::invalid_argument);
    CHECK_THAT(r.error().message(), Contains("'roundabout'") && Contains("after descending"));
  }
  SECTION("a fifo") {
    REQUIRE(::mkfifo((tree / "a/pipe").c_str(), 0600) == 0);
    auto r = jobs::pack_directory(tree);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code() == error_code::invalid_argument);
    CHECK_THAT(r.error().message(), Contains("'a/pipe'") && Contains("a fifo") && Contains("--exclude"));
  }
  SECTION("no such folder, or not a folder") {
    auto missing = jobs::pack_directory(t.path / "nowhere");
    REQUIRE_FALSE(missing.has_value());
    CHECK(missing.error().code() == error_code::not_found);
    auto file = jobs::pack_directory(tree / "a/file.txt");
    REQUIRE_FALSE(file.has_value());
    CHECK(file.error().code() == error_code::invalid_argument);
    CHECK_THAT(file.error().message(), Contains("not a folder"));
  }
}

TEST_CASE("unpack refuses a flipped byte and every truncation, leaving nothing behind", "[package]") {
  temp_dir t;
  make_tree(t.path / "tree");
  auto archive = jobs::pack_directory(t.path / "tree");
  REQUIRE(archive.has_value());
  const auto parent = t.path / "unpack";
  fs::create_directories(parent);
  const auto into = parent / "out";

  std::size_t data_loss = 0, invalid = 0;
  for (std::size_t i = 0; i < archive->size(); ++i) {
    auto damaged = *archive;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
    auto r = jobs::unpack(damaged, into);
    REQUIRE_FALSE(r.has_value());
    // The magic's bytes say "not a package" (or another version); any other, damage.
    CHECK(r.error().code() == (i < 8 ? error_code::invalid_argument : error_code::data_loss));
    (r.error().code() == error_code::data_loss ? data_loss : invalid) += 1;
    REQUIRE(is_empty_folder(parent));
  }
  CHECK(invalid == 8);
  CHECK(data_loss == archive->size() - 8);

  for (std::size_t n = 0; n < archive->size(); ++n) {
    auto r = jobs::unpack(std::string_view(*archive).substr(0, n), into);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code() == error_code::data_loss);
    REQUIRE(is_empty_folder(parent));
    auto summary = jobs::inspect(std::string_view(*archive).substr(0, n));
    REQUIRE_FALSE(summary.has_value());
    CHECK(summary.error().code() == error_code::data_loss);
  }

  // The whole archive still unpacks there.
  REQUIRE(jobs::unpack(*archive, into).has_value());
  CHECK(read(into / "data/blob.bin") == binary_bytes());
}

TEST_CASE("unpack needs a new folder whose parent exists, and leaves an existing one alone", "[package]") {
  temp_dir t;
  const auto archive = archive_builder().file("f", "new").sealed();
  write(t.path / "taken/f", "old");
  auto taken = jobs::unpack(archive, t.path / "taken");
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().code() == error_code::already_exists);
  CHECK(read(t.path / "taken/f") == "old");

  // Even an empty folder, which a plain rename would replace, or a dangling link.
  fs::create_directories(t.path / "empty");
  CHECK(jobs::unpack(archive, t.path / "empty").error().code() == error_code::already_exists);
  CHECK(is_empty_folder(t.path / "empty"));
  fs::create_symlink("nowhere", t.path / "dangling");
  CHECK(jobs::unpack(archive, t.path / "dangling").error().code() == error_code::already_exists);

  auto orphan = jobs::unpack(archive, t.path / "no/such/parent");
  REQUIRE_FALSE(orphan.has_value());
  CHECK(orphan.error().code() == error_code::not_found);
  CHECK_FALSE(fs::exists(t.path / "no"));

  // A trailing '/' names the same folder.
  REQUIRE(jobs::unpack(archive, (t.path / "fresh").string() + "/").has_value());
  CHECK(read(t.path / "fresh/f") == "new");
}

TEST_CASE("unpack refuses hand-built archives that reach outside their folder", "[package]") {
  temp_dir t;
  const auto parent = t.path / "unpack";
  fs::create_directories(parent);
  const auto into = parent / "out";

  // The builder itself makes archives unpack accepts.
  const auto good =
    archive_builder().folder("a").file("a/f", "hi").link("l", "a/f").link("a/up", "../a/f").sealed();
  REQUIRE(jobs::unpack(good, into).has_value());
  CHECK(read(into / "l") == "hi");
  CHECK(read(into / "a/up") == "hi");
  fs::remove_all(into);

  struct refusal {
    std::string what;
    std::string archive;
    std::string says;
  };
  const std::vector<refusal> refusals = {
    {"a path climbing out", archive_builder().file("../x", "x").sealed(), "'..' component"},
    {"an absolute path", archive_builder().file("/etc/x", "x").sealed(), "absolute"},
    {"a path climbing out from inside", archive_builder().folder("a").file("a/../../x", "x").sealed(), "'..' component"},
    {"a '.' component", archive_builder().file("./x", "x").sealed(), "'.' or '..' component"},
    {"an empty path", archive_builder().file("", "x").sealed(), "empty"},
    {"a trailing '/'", archive_builder().folder("a/").sealed(), "empty component"},
    {"a NUL in a path", archive_builder().file(std::string("a\0b", 3), "x").sealed(), "NUL"},
    {"a duplicate path", archive_builder().file("x", "1").file("x", "2").sealed(), "appears twice"},
    {"a folder after a file of its name", archive_builder().file("x", "1").folder("x").sealed(), "appears twice"},
    {"a link escaping, then a file through it",
     archive_builder().link("link", "../../etc").file("link/f", "x").sealed(), "outside the tree"},
    {"a file through an in-tree link",
     archive_builder().folder("sub").link("link", "sub").file("link/f", "x").sealed(), "not a folder but a link"},
    {"a file under a file", archive_builder().file("f", "1").file("f/g", "2").sealed(), "not a folder but a file"},
    {"a file whose folder has no entry", archive_builder().file("a/f", "x").sealed(), "no earlier folder entry"},
    {"an absolute link", archive_builder().link("l", "/etc/passwd").sealed(), "absolute"},
    {"a link climbing after descending", archive_builder().folder("a").link("l", "a/../..").sealed(), "after descending"},
    {"a link climbing out of a folder", archive_builder().folder("a").link("a/l", "../../x").sealed(), "outside the tree"},
    {"an empty link", archive_builder().link("l", "").sealed(), "empty"},
    {"a folder with contents", archive_builder().add(2, 0755, "d", "xyz").sealed(), "a folder with a size of 3"},
    {"a setuid mode", archive_builder().add(1, 04755, "f", "x").sealed(), "mode 04755"},
    {"an unknown kind", archive_builder().add(9, 0644, "f", "x").sealed(), "unknown kind 9"},
    // A file entry for "f" by hand: kind 1, mode 0644, path length 1, "f", then a size.
    {"a size past what remains",
     archive_builder().raw(std::string("\x01\xa4\x01\0\0\x01\0f", 8)).raw(std::string("\xe8\x03\0\0\0\0\0\0abc", 11)).sealed(),
     "a size of 1000 bytes, but only 4 remain"},
    {"a huge size", archive_builder().raw(std::string("\x01\xa4\x01\0\0\x01\0f", 8)).raw(std::string(8, '\xff')).sealed(),
     "a size of 18446744073709551615 bytes"},
    {"a path length past what remains", archive_builder().raw(std::string("\x01\xa4\x01\0\0\xff\xff", 7)).sealed(),
     "a path of 65535 bytes"},
    {"no end entry", archive_builder().file("f", "x").sealed_without_end(), "no end entry"},
    {"bytes after the end entry", archive_builder().file("f", "x").raw(std::string(1, '\0')).raw("junk").sealed_without_end(),
     "4 bytes follow the end entry"},
  };
  for (const auto& r : refusals) {
    INFO(r.what);
    auto result = jobs::unpack(r.archive, into);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code() == error_code::invalid_argument);
    CHECK_THAT(result.error().message(), Contains(r.says));
    REQUIRE(is_empty_folder(parent));
    auto summary = jobs::inspect(r.archive);
    REQUIRE_FALSE(summary.has_value());
    CHECK(summary.error().code() == error_code::invalid_argument);
  }

  auto not_a_package = archive_builder().file("f", "x").sealed();
  not_a_package.replace(0, 8, "NOTAPKG!");
  CHECK_THAT(jobs::unpack(not_a_package, into).error().message(), Contains("not a celer package"));
  auto next_version = archive_builder().file("f", "x").sealed();
  next_version[7] = '2';
  CHECK_THAT(jobs::unpack(next_version, into).error().message(), Contains("version '2'"));
  CHECK(jobs::unpack(next_version, into).error().code() == error_code::invalid_argument);
  REQUIRE(is_empty_folder(parent));
}

TEST_CASE("unpack refuses more file bytes than its limit", "[package]") {
  temp_dir t;
  const auto archive = archive_builder().file("a", std::string(600, 'a')).file("b", std::string(400, 'b')).sealed();
  auto summary = jobs::inspect(archive);
  REQUIRE(summary.has_value());
  CHECK(summary->bytes == 1000);

  auto r = jobs::unpack(archive, t.path / "out", /*limit_bytes=*/999);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == error_code::resource_exhausted);
  CHECK_THAT(r.error().message(), Contains("1000 bytes") && Contains("999 bytes"));
  CHECK(fs::is_empty(t.path));

  REQUIRE(jobs::unpack(archive, t.path / "out", /*limit_bytes=*/1000).has_value());
  CHECK(fs::file_size(t.path / "out/a") + fs::file_size(t.path / "out/b") == 1000);
}

TEST_CASE("a write that fails halfway through unpacking leaves nothing behind", "[package]") {
  temp_dir t;
  // Valid as an archive, but the last name is longer than any filesystem allows (255 bytes),
  // so its open fails after the folder and first file were written.
  const auto archive =
    archive_builder().folder("a").file("a/f", "written first").file("a/" + std::string(300, 'n'), "x").sealed();
  REQUIRE(jobs::inspect(archive).has_value());
  auto r = jobs::unpack(archive, t.path / "out");
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message(), Contains("cannot create") && Contains("too long"));
  CHECK(fs::is_empty(t.path));
}
