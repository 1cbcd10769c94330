#pragma once
/// Readers of celer-preprocess's inputs: CSV (RFC 4180), JSON Lines, plain text (a line an
/// item) and IDX images with their labels (MNIST, Fashion-MNIST), each file into `item`s.
///
///   namespace pp = celer::preprocess;
///   pp::field_map fields{.key = "sku", .label = "class", .category = "department",
///                        .text = {"title", "description"}, .values = {"price", "weight"}};
///   auto rows = pp::read_csv("catalog-03.csv", fields);   // expected<std::vector<item>>
///   if (!rows) { std::cerr << rows.error().message() << "\n"; return 1; }
///   // (*rows)[0].text == "<title> <description>", .values == {price, weight}
///
///   auto lines = pp::read_text("corpus.txt", /*limit=*/1000);   // keys "corpus.txt:<line>"
///   auto images = pp::read_idx("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz",
///                              "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
///
/// Every reader reads its whole file into memory (gzipped or plain: zlib tells them apart),
/// and returns the items in file order. A
/// file's rows and lines are numbered from 0 in default keys ("<file name>:<n>") and from 1
/// in error messages ("line 7"), as editors number them. Errors: not_found for a missing
/// file; invalid_argument naming the file (and the line, the column or field) for content
/// that does not fit; the I/O errors as the disk reports them. Pure functions: no runtime
/// calls, no threads.

#include <celer/actors/preprocess/item.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace celer::preprocess {

/// Which columns (CSV) or top-level fields (JSON Lines) fill which fields of an item. Names
/// are matched exactly (case-sensitive). A name given here that a file lacks is
/// invalid_argument naming it and the file.
struct field_map {
  /// The item's key, as written. Empty: "<file name>:<row>", the row counted from 0 among
  /// the data rows (CSV: the header excluded; JSON Lines: blank lines excluded).
  std::string key;
  /// The label, a decimal int32. Empty name: every label is -1. An empty value is -1 too.
  std::string label;
  /// The category, as written; empty name: every category is empty.
  std::string category;
  /// Joined, in this order, with one space between them (empty values included) into text.
  std::vector<std::string> text;
  /// Parsed as floats (std::from_chars: decimal or exponent form, "inf" and "nan" too;
  /// spaces and tabs around the number are ignored) into values, in this order.
  std::vector<std::string> values;
  MSGPACK_DEFINE(key, label, category, text, values)
};

struct csv_options {
  /// The field separator; a quote, a line break or a NUL is invalid_argument.
  char delimiter = ',';
  /// Stop after this many items; 0 reads them all.
  std::size_t limit = 0;
};

/// Reads a CSV file as RFC 4180 has it: a header row of column names (required; a UTF-8
/// byte-order mark before it is dropped), then one record a row; fields may be quoted, a
/// doubled quote inside quotes is one quote, and quoted fields may hold delimiters and line
/// breaks. Rows end in CRLF or LF; empty lines are skipped. Every row must have as many
/// fields as the header (invalid_argument naming the line otherwise); a quoted field must
/// end before the file does and be followed by a delimiter or the row's end. A quote inside
/// an unquoted field is kept as a character (`5" screen`). A column the map names twice in
/// the header is invalid_argument (which one was meant?).
[[nodiscard]] expected<std::vector<item>> read_csv(const std::string& path,
                                                   const field_map& fields,
                                                   const csv_options& options = {});

/// Reads a JSON Lines file: one JSON object a line (blank lines skipped), its top-level
/// fields named by `fields`. Key, category and text fields take strings as they are,
/// numbers and booleans as their JSON text, null as empty; labels an integer, a string of
/// one, or null (-1); values a number, a numeric string, or an array of them (each appended).
/// A line that is not a JSON object, lacks a named field or holds a value of the wrong kind
/// is invalid_argument naming the file, the line and the field. `limit` as in csv_options.
[[nodiscard]] expected<std::vector<item>> read_jsonl(const std::string& path,
                                                     const field_map& fields,
                                                     std::size_t limit = 0);

/// Reads a text file, one item per line that holds anything but ASCII whitespace (blank
/// lines are skipped but keep their number): key "<file name>:<line>", the line counted from
/// 0 among all lines, text the line without its line break (LF or CRLF). `limit` as above.
[[nodiscard]] expected<std::vector<item>> read_text(const std::string& path,
                                                    std::size_t limit = 0);

/// Reads an IDX image file (N × height × width unsigned bytes) and its IDX label file (N
/// unsigned bytes), each gzipped or plain, as MNIST and Fashion-MNIST ship: item i has key
/// "<images file name>:<i>", the raw pixels (channels 1), height and width from the header,
/// and label i. An empty `labels_path` gives every item label -1. invalid_argument for a
/// file that is not IDX of unsigned bytes, images that are not 3-dimensional, or counts
/// that differ; data_loss for a damaged gzip stream. `limit` as above.
[[nodiscard]] expected<std::vector<item>> read_idx(const std::string& images_path,
                                                   const std::string& labels_path,
                                                   std::size_t limit = 0);

} // namespace celer::preprocess
