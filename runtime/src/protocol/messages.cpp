#include "protocol/messages.hpp"

namespace celer::protocol {

std::vector<std::string>*& bulk_sink() noexcept {
  thread_local std::vector<std::string>* sink = nullptr;
  return sink;
}

bulk_frames*& bulk_source() noexcept {
  thread_local bulk_frames* source = nullptr;
  return source;
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
                                                           : "head, node, job (own job only)";
    out += "| " + std::to_string(i) + " | `" + entries[i].name + "` | " + who + " | " +
           entries[i].doc + " |\n";
  }
  return out;
}

} // namespace celer::protocol
