// Security of every shardps gRPC channel: TLS or mutual TLS from PEM files,
// and a shared job token that servers check on every call.
//
//  - TLS: the server presents cert/key; clients verify it against the CA.
//  - Mutual TLS: the server is also given the CA and then requires and
//    verifies a client certificate (clients present their cert/key).
//  - Token: clients send "authorization: Bearer <token>" with every call;
//    servers compare it in constant time and answer UNAUTHENTICATED
//    otherwise. Works with or without TLS (without, it is sent in clear).
// The gRPC health service stays open, for readiness probes.
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_PS_WIRE_SECURITY_H_
#define SHARDPS_PS_WIRE_SECURITY_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/string_ref.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// PEM files; all empty means plaintext.
struct TlsFiles {
  std::string cert;  // this side's certificate chain
  std::string key;   // its private key
  std::string ca;    // the CA that signs the other side's certificate
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// Server side: plaintext, TLS (cert + key) or mutual TLS (cert + key + ca).
// INVALID_ARGUMENT for an incomplete set; errors name unreadable files.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls);

// Client side: plaintext, TLS (ca) or mutual TLS (ca + cert + key).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const TlsFiles& tls);

// The token in `path` (surrounding whitespace removed); an error for a
// missing, unreadable or empty file. An empty `path` means no token: "".
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Metadata key and value a client sends for `token`.
constexpr char kAuthMetadataKey[] = "authorization";
std::string BearerValue(absl::string_view token);

// FAILED_PRECONDITION, saying why and what to do, for a server about to
// listen on a non-loopback `host` with neither TLS nor a token, unless
// `allow_insecure`.
absl::Status CheckExposure(absl::string_view host, const TlsFiles& tls,
                           bool has_token, bool allow_insecure);

// Whether `got` equals `want`, in time that depends only on their lengths.
bool ConstantTimeEquals(absl::string_view want, absl::string_view got);

// Whether the call's metadata holds `value` under `key` (compared in
// constant time).
bool MetadataHolds(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    absl::string_view key, absl::string_view value);

// A server's check of a call's client metadata: OK when `token` is empty or
// the call carries it as a bearer token (compared in constant time);
// UNAUTHENTICATED otherwise, saying nothing about the expected token.
absl::Status CheckAuthorization(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    absl::string_view token);

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_SECURITY_H_
