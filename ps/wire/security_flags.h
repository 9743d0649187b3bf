// The security flags of every binary that serves or calls servers
// (shardps-server, shardps-worker, shardps-bench, shardps-launch), defined
// here once: --tls_cert, --tls_key, --tls_ca (ps/wire/security.h) and
// --auth_token_file. A binary reads them once, into a Security.
//
// Thread-safety: call after flags are parsed; reads flags only.
#ifndef SHARDPS_PS_WIRE_SECURITY_FLAGS_H_
#define SHARDPS_PS_WIRE_SECURITY_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "ps/wire/security.h"

namespace ps {

struct Security {
  TlsFiles tls;
  std::string auth_token_file;  // "" without a token
  std::string auth_token;       // the file's token
};

// The flags' values, with the token read from --auth_token_file; an error
// names the flag and the file.
absl::StatusOr<Security> SecurityFromFlags();

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_SECURITY_FLAGS_H_
