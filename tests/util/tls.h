// Test helper: a throw-away CA ("ca", and an unrelated "other") and
// certificates it signed for a server (127.0.0.1, localhost) and a client,
// made with openssl into a directory.
#ifndef SHARDPS_TESTS_UTIL_TLS_H_
#define SHARDPS_TESTS_UTIL_TLS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ps/wire/security.h"
#include "util/files.h"
#include "util/processes.h"

namespace testutil {

inline bool HaveOpenssl() { return Shell("command -v openssl").first == 0; }

// DIR/{ca,other}.pem and .key, DIR/{server,client}.pem and .key.
inline absl::Status MakeTestCertificates(const std::string& dir) {
  WriteFile(dir + "/server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  WriteFile(dir + "/client.ext", "extendedKeyUsage=clientAuth\n");
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1";
  auto [code, out] = Shell(absl::StrCat(
      "cd ", dir, " && for ca in ca other; do openssl req -x509 ", ec,
      " -nodes -keyout $ca.key -out $ca.pem -days 2 -subj /CN=$ca; done",
      " && for who in server client; do openssl req ", ec,
      " -nodes -keyout $who.key -out $who.csr -subj /CN=$who && openssl x509",
      " -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out",
      " $who.pem -days 2 -extfile $who.ext; done"));
  if (code != 0) return absl::InternalError("openssl failed: " + out);
  return absl::OkStatus();
}

inline constexpr char kNoOpenssl[] =
    "openssl missing: cannot make test certificates";

// A fixture's throw-away certificates in a directory of their own:
//   void SetUp() override {
//     if (!testutil::HaveOpenssl()) GTEST_SKIP() << testutil::kNoOpenssl;
//     ASSERT_TRUE(certs_.Make().ok());
//   }
class TestCertificates {
 public:
  explicit TestCertificates(const std::string& prefix) : dir_(prefix) {}
  absl::Status Make() const { return MakeTestCertificates(dir_.path()); }
  const std::string& path() const { return dir_.path(); }
  std::string File(const std::string& name) const {
    return dir_.path() + "/" + name;
  }
  // What a server presents: server.pem and server.key, no client CA.
  ps::TlsFiles Server() const {
    return {File("server.pem"), File("server.key"), ""};
  }

 private:
  ScopedTempDir dir_;
};

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_TLS_H_
