#include "ps/wire/security_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain this process presents: a server's (serve "
          "TLS, with --tls_key) or a client's (mutual TLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA: a client verifies the servers' certificates with it "
          "(TLS); a server given one requires client certificates signed by "
          "it (mutual TLS).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the job's token: servers refuse calls without it "
          "(UNAUTHENTICATED), clients send it with every call. Empty: no "
          "token (shardps-launch: a fresh random one in RUN_DIR/job.token).");

namespace ps {

absl::StatusOr<Security> SecurityFromFlags() {
  Security s;
  s.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
           absl::GetFlag(FLAGS_tls_ca)};
  s.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  absl::StatusOr<std::string> token = ReadTokenFile(s.auth_token_file);
  if (!token.ok()) {
    return absl::Status(
        token.status().code(),
        absl::StrCat("--auth_token_file: ", token.status().message()));
  }
  s.auth_token = *std::move(token);
  return s;
}

}  // namespace ps
