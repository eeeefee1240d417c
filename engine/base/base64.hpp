// Standard base64 (RFC 4648 section 4: alphabet A-Z a-z 0-9 + /, '=' padding), the one encoder
// and decoder plumb has: kubeconfig *-data fields and etcd's JSON-gateway keys and values.
// Plain C++ rather than OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock: decoding a kubeconfig's CA
// happens on every CNI verb (DEL included), and this way it never loads libcrypto.
#pragma once

#include <string>
#include <string_view>

#include "engine/base/result.hpp"

namespace plumb::base64 {

/// Encodes `data` as one line of padded standard base64 ("" for no data).
[[nodiscard]] std::string encode(std::string_view data);

/// Decodes padded standard base64. ASCII white space anywhere is skipped (PEM-style wrapped
/// lines, as kubeconfig *-data fields may hold); what remains must be a multiple of four
/// characters of the alphabet with at most two '=' at the very end. "" decodes to "".
/// Errors: kDecode "cannot decode <what>: <reason>".
[[nodiscard]] Result<std::string> decode(std::string_view text, std::string_view what);

}  // namespace plumb::base64
