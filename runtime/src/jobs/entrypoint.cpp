#include "jobs/entrypoint.hpp"

namespace celer::jobs {
namespace {

/// What a shell would act on outside quotes, and the name the refusal gives it.
const char* shell_operator(char c) {
  switch (c) {
    case '|': return "a pipe (|)";
    case '&': return "& (background, &&)";
    case ';': return "; (a command list)";
    case '<':
    case '>': return "a redirection (< or >)";
    case '$': return "$ (a variable or substitution)";
    case '`': return "` (command substitution)";
    case '(':
    case ')': return "( ) (a subshell)";
    case '*':
    case '?': return "a glob (* or ?)";
    case '\n': return "a newline";
    default: return nullptr;
  }
}

} // namespace

expected<std::vector<std::string>> split_entrypoint(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    if (c == '\'') {
      const std::size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) return error(error_code::invalid_argument, "the entrypoint has an unclosed ' quote");
      word += text.substr(i + 1, close - i - 1);
      in_word = true;
      i = close;
      continue;
    }
    if (c == '"') {
      // Up to the next unescaped ": inside, \" and \\ stand for themselves; $ and `, which a
      // shell would still expand there, are refused.
      std::size_t k = i + 1;
      for (; k < text.size() && text[k] != '"'; ++k) {
        if (text[k] == '$' || text[k] == '`')
          return error(error_code::invalid_argument,
                       std::string("the entrypoint has ") + shell_operator(text[k]) +
                         " inside double quotes; celer runs it as an argument vector, not through a shell: "
                         "use single quotes for a literal, or `sh -c '...'` to ask for a shell");
        if (text[k] == '\\' && k + 1 < text.size() && (text[k + 1] == '"' || text[k + 1] == '\\')) ++k;
        word += text[k];
      }
      if (k == text.size()) return error(error_code::invalid_argument, "the entrypoint has an unclosed \" quote");
      in_word = true;
      i = k;
      continue;
    }
    if (c == '\\') {
      if (i + 1 == text.size()) return error(error_code::invalid_argument, "the entrypoint ends with a lone backslash");
      word += text[++i];
      in_word = true;
      continue;
    }
    if (const char* op = shell_operator(c)) {
      return error(error_code::invalid_argument,
                   std::string("the entrypoint has ") + op +
                     "; celer runs it as an argument vector, never through a shell: quote the character if it is "
                     "an argument, or make the shell the program (`sh -c '...'`)");
    }
    if (c == '~' && !in_word)
      return error(error_code::invalid_argument,
                   "the entrypoint starts a word with ~, which only a shell expands: give the full path");
    word += c;
    in_word = true;
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) return error(error_code::invalid_argument, "the entrypoint is empty: give the program to run");
  return words;
}

std::string join_entrypoint(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& w : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !w.empty();
    for (char c : w)
      if (c == ' ' || c == '\t' || c == '\'' || c == '"' || c == '\\' || c == '~' || shell_operator(c) != nullptr) plain = false;
    if (plain) {
      out += w;
      continue;
    }
    // Single quotes keep everything literal; a single quote itself is written '\''.
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

} // namespace celer::jobs
