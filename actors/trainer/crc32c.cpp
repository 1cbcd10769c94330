// CRC-32C (Castagnoli), table-driven (metrics_log.hpp).
#include <celer/actors/trainer/metrics_log.hpp>

#include <array>

namespace celer::trainer {
namespace {

/// The reflected Castagnoli polynomial 0x1EDC6F41.
constexpr std::uint32_t polynomial = 0x82F63B78u;

/// table[b]: the CRC of byte b, one byte at a time (Sarwate). Event files are small and
/// written a record at a time, so a 1 KiB table is all the speed they need.
constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) != 0 ? (crc >> 1) ^ polynomial : crc >> 1;
    table[b] = crc;
  }
  return table;
}
constexpr auto table = make_table();

} // namespace

std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

} // namespace celer::trainer
