#include "ps/wire/security.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ps {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view what) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the TLS ", what, " file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TLS ", what, " file ", path, " is not PEM"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  if (tls.cert.empty() || tls.key.empty()) {
    return absl::InvalidArgumentError(
        "a TLS server needs both --tls_cert and --tls_key (and --tls_ca for "
        "mutual TLS)");
  }
  absl::StatusOr<std::string> cert = ReadPem(tls.cert, "certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(tls.key, "key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(
      tls.ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!tls.ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(tls.ca, "CA");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  if (tls.ca.empty() || tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client needs --tls_ca (and, for mutual TLS, both --tls_cert "
        "and --tls_key)");
  }
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> ca = ReadPem(tls.ca, "CA");
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *ca;
  if (!tls.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls.cert, "certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls.key, "key");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read --auth_token_file=", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file=", path, " is empty"));
  }
  return token;
}

absl::Status CheckExposure(absl::string_view host, const TlsFiles& tls,
                           bool has_token, bool allow_insecure) {
  const bool loopback = host == "localhost" || host == "::1" ||
                        host == "[::1]" || absl::StartsWith(host, "127.");
  if (loopback || tls.enabled() || has_token || allow_insecure) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to listen on ", host,
      " with neither TLS nor a token: anyone who reaches the port could read "
      "and overwrite the model. Give --auth_token_file (and/or --tls_cert, "
      "--tls_key, --tls_ca), listen on 127.0.0.1, or pass --allow_insecure "
      "on a trusted network"));
}

std::string BearerValue(absl::string_view token) {
  return absl::StrCat("Bearer ", token);
}

bool ConstantTimeEquals(absl::string_view want, absl::string_view got) {
  // Every byte of `want` is looked at whatever `got` holds; only the
  // lengths (not secret: the token's length is public) end it early.
  unsigned char diff = want.size() == got.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) {
    diff |= static_cast<unsigned char>(want[i] ^
                                       (i < got.size() ? got[i] : ~want[i]));
  }
  return diff == 0;
}

bool MetadataHolds(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    absl::string_view key, absl::string_view value) {
  auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
  return it != metadata.end() &&
         ConstantTimeEquals(
             value, absl::string_view(it->second.data(), it->second.size()));
}

absl::Status CheckAuthorization(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    absl::string_view token) {
  if (token.empty() ||
      MetadataHolds(metadata, kAuthMetadataKey, BearerValue(token))) {
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(
      metadata.find(kAuthMetadataKey) == metadata.end()
          ? "this server needs the job's auth token"
          : "wrong auth token");
}

}  // namespace ps
