#include "node/chunk_seal.hpp"

#include <celer/error.hpp>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <algorithm>
#include <limits>
#include <memory>

namespace celer::chunk_seal {
namespace {

struct ctx_free {
  void operator()(EVP_CIPHER_CTX* c) const noexcept { EVP_CIPHER_CTX_free(c); }
};
using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, ctx_free>;

constexpr std::size_t nonce_bytes = 12;

std::array<unsigned char, nonce_bytes> nonce_of(const place& at) {
  std::array<unsigned char, nonce_bytes> n{};
  for (int i = 0; i < 8; ++i) n[static_cast<std::size_t>(i)] = static_cast<unsigned char>(at.offset >> (8 * i));
  return n;
}

/// request id, object id, offset and length, little-endian: the associated data.
std::array<unsigned char, 40> aad_of(const place& at, std::size_t n) {
  std::array<unsigned char, 40> a{};
  const std::uint64_t fields[] = {at.request_id, at.id.hi, at.id.lo, at.offset, n};
  for (std::size_t f = 0; f < 5; ++f) {
    for (std::size_t i = 0; i < 8; ++i) a[f * 8 + i] = static_cast<unsigned char>(fields[f] >> (8 * i));
  }
  return a;
}

/// Runs `update` over `n` bytes in pieces OpenSSL's int lengths take.
template <class Update>
bool in_pieces(std::size_t n, Update update) {
  constexpr std::size_t piece = std::size_t{1} << 30;
  for (std::size_t done = 0; done < n; done += piece) {
    if (!update(done, std::min(piece, n - done))) return false;
  }
  return true;
}

cipher_ctx start(const std::string& key, const place& at, std::size_t n, bool encrypt) {
  if (key.size() != key_bytes) return nullptr;
  cipher_ctx c(EVP_CIPHER_CTX_new());
  if (!c) return nullptr;
  const auto nonce = nonce_of(at);
  const auto* k = reinterpret_cast<const unsigned char*>(key.data());
  const int ok = encrypt ? EVP_EncryptInit_ex(c.get(), EVP_aes_256_gcm(), nullptr, k, nonce.data())
                         : EVP_DecryptInit_ex(c.get(), EVP_aes_256_gcm(), nullptr, k, nonce.data());
  if (ok != 1) return nullptr;
  const auto aad = aad_of(at, n);
  int len = 0;
  const int added = encrypt ? EVP_EncryptUpdate(c.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size()))
                            : EVP_DecryptUpdate(c.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size()));
  return added == 1 ? std::move(c) : nullptr;
}

} // namespace

std::string new_key() {
  std::string k(key_bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(k.data()), static_cast<int>(k.size())) != 1) {
    throw exception(error_code::internal, "OpenSSL's random source failed: no key for a pull");
  }
  return k;
}

bool seal(const std::string& key, const place& at, const char* plain, std::size_t n, char* out) {
  auto c = start(key, at, n, true);
  if (!c) return false;
  auto* o = reinterpret_cast<unsigned char*>(out);
  const auto* p = reinterpret_cast<const unsigned char*>(plain);
  int len = 0;
  if (!in_pieces(n, [&](std::size_t from, std::size_t k) {
        return EVP_EncryptUpdate(c.get(), o + from, &len, p + from, static_cast<int>(k)) == 1;
      })) {
    return false;
  }
  if (EVP_EncryptFinal_ex(c.get(), o + n, &len) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag_bytes), o + n) == 1;
}

bool open(const std::string& key, const place& at, const char* sealed, std::size_t sealed_n,
          char* out) {
  if (sealed_n < tag_bytes) return false;
  const std::size_t n = sealed_n - tag_bytes;
  auto c = start(key, at, n, false);
  if (!c) return false;
  auto* o = reinterpret_cast<unsigned char*>(out);
  const auto* s = reinterpret_cast<const unsigned char*>(sealed);
  int len = 0;
  if (!in_pieces(n, [&](std::size_t from, std::size_t k) {
        return EVP_DecryptUpdate(c.get(), o + from, &len, s + from, static_cast<int>(k)) == 1;
      })) {
    return false;
  }
  std::array<unsigned char, tag_bytes> tag{};
  std::copy(s + n, s + sealed_n, tag.begin());
  if (EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag_bytes), tag.data()) != 1) {
    return false;
  }
  return EVP_DecryptFinal_ex(c.get(), o + n, &len) == 1;
}

} // namespace celer::chunk_seal
