#include "protocol/messages.hpp"

namespace celer::protocol {

std::vector<shared_bytes>*& bulk_sink() noexcept {
  thread_local std::vector<shared_bytes>* sink = nullptr;
  return sink;
}

bulk_frames*& bulk_source() noexcept {
  thread_local bulk_frames* source = nullptr;
  return source;
}

std::uint32_t take_bulk_frame(const char* ext_data) {
  const auto* b = reinterpret_cast<const unsigned char*>(ext_data);
  const std::uint32_t index = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
                              (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
  auto* source = bulk_source();
  if (source == nullptr || index >= source->frames.size()) {
    throw std::invalid_argument("a reference to bulk frame " + std::to_string(index) +
                                ", which the message does not have");
  }
  if (source->used[index]) {
    throw std::invalid_argument("bulk frame " + std::to_string(index) +
                                " is referenced more than once");
  }
  source->used[index] = true;
  ++source->used_count;
  return index;
}

namespace {

struct entry {
  const char* name;
  senders who;
  const char* doc;
};
constexpr entry entries[] = {
#define CELER_MESSAGE(type, who, doc) {#type, senders::who, doc},
#include "protocol/messages.def"
#undef CELER_MESSAGE
};
static_assert(std::size(entries) == std::variant_size_v<message>);

} // namespace

const char* name_of(const message& m) { return entries[m.index()].name; }

const char* name_of_type(std::size_t index) noexcept {
  return index < std::size(entries) ? entries[index].name : "unknown";
}

senders senders_of(std::size_t index) noexcept {
  return index < std::size(entries) ? entries[index].who : senders::local;
}

std::string markdown_table() {
  std::string out = "| tag | message | who may send it | from -> to: what it says |\n"
                    "|---|---|---|---|\n";
  for (std::size_t i = 0; i < std::size(entries); ++i) {
    const char* who = entries[i].who == senders::local     ? "never from the wire"
                      : entries[i].who == senders::cluster ? "head, node"
                      : entries[i].who == senders::any     ? "head, node, job (own job only)"
                                                           : "head, node, job (own job only), a job sharing a namespace with the receiver's";
    out += "| " + std::to_string(i) + " | `" + entries[i].name + "` | " + who + " | " +
           entries[i].doc + " |\n";
  }
  return out;
}

} // namespace celer::protocol
