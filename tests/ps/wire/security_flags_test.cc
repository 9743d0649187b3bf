// The shared security flags: read once into a Security, the token from its
// file, errors naming the flag and the file.
#include "ps/wire/security_flags.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "util/files.h"

ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, auth_token_file);

namespace ps {
namespace {

TEST(SecurityFlagsTest, TheFlagsBecomeOneSecurity) {
  testutil::ScopedTempDir dir;
  const std::string token = dir.path() + "/job.token";
  testutil::WriteFile(token, "  s3cret\n");
  absl::SetFlag(&FLAGS_tls_cert, "c.pem");
  absl::SetFlag(&FLAGS_tls_key, "k.pem");
  absl::SetFlag(&FLAGS_tls_ca, "ca.pem");
  absl::SetFlag(&FLAGS_auth_token_file, token);
  absl::StatusOr<Security> s = SecurityFromFlags();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tls.cert, "c.pem");
  EXPECT_EQ(s->tls.key, "k.pem");
  EXPECT_EQ(s->tls.ca, "ca.pem");
  EXPECT_EQ(s->auth_token_file, token);
  EXPECT_EQ(s->auth_token, "s3cret");

  absl::SetFlag(&FLAGS_auth_token_file, dir.path() + "/none");
  absl::Status missing = SecurityFromFlags().status();
  EXPECT_NE(missing.message().find("--auth_token_file: "), std::string::npos)
      << missing;
  EXPECT_NE(missing.message().find(dir.path() + "/none"), std::string::npos)
      << missing;
  absl::SetFlag(&FLAGS_auth_token_file, "");
  s = SecurityFromFlags();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->auth_token, "");  // no token
}

}  // namespace
}  // namespace ps
