#include "ps/wire/buffer_pool.h"

#include <grpcpp/support/byte_buffer.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace ps {
namespace {

TEST(BufferPoolTest, ReturnedBuffersAreReused) {
  BufferPool pool;
  char* first;
  {
    PooledBuffer a = pool.Acquire(1 << 20);
    ASSERT_GE(a.capacity(), 1u << 20);
    first = a.data();
  }
  PooledBuffer b = pool.Acquire(1000);  // smaller requests reuse it too
  EXPECT_EQ(b.data(), first);
  PooledBuffer c = pool.Acquire(1 << 20);  // b is out: a fresh one
  EXPECT_NE(c.data(), first);
  EXPECT_EQ(pool.allocations(), 2u);
}

TEST(BufferPoolTest, SliceReturnsBufferWhenGrpcDropsIt) {
  BufferPool pool;
  char* data;
  {
    PooledBuffer a = pool.Acquire(4096);
    data = a.data();
    std::memcpy(data + 10, "hello", 5);
    grpc::Slice slice = std::move(a).ToSlice(10, 5);
    grpc::ByteBuffer buffer(&slice, 1);
    grpc::Slice joined;
    ASSERT_TRUE(buffer.DumpToSingleSlice(&joined).ok());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(joined.begin()),
                          joined.size()),
              "hello");
    // Still referenced here: a new Acquire cannot get it.
    PooledBuffer other = pool.Acquire(4096);
    EXPECT_NE(other.data(), data);
  }
  EXPECT_EQ(pool.allocations(), 2u);
  PooledBuffer again = pool.Acquire(4096);
  EXPECT_EQ(pool.allocations(), 2u);
}

TEST(BufferPoolTest, BuffersMayOutliveThePool) {
  PooledBuffer survivor;
  {
    BufferPool pool;
    survivor = pool.Acquire(64);
  }
  survivor.data()[0] = 1;  // still valid memory; returned safely on destruction
  EXPECT_EQ(survivor.capacity(), 64u);
}

}  // namespace
}  // namespace ps
