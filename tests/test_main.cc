// GoogleTest main for every suite: keeps gRPC initialized until the tests
// are done and waits for its teardown before the process exits.
#include <gtest/gtest.h>

#include "ps/base/program.h"

int main(int argc, char** argv) {
  ps::GrpcRuntime grpc_runtime;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
