#include "ps/wire/buffer_pool.h"

#include <algorithm>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ps {

struct BufferPool::State {
  explicit State(size_t max_idle) : max_idle(max_idle) {}
  void Return(std::unique_ptr<PooledBuffer::Block> block);

  const size_t max_idle;
  absl::Mutex mu;
  std::vector<std::unique_ptr<PooledBuffer::Block>> idle ABSL_GUARDED_BY(mu);
  size_t allocations ABSL_GUARDED_BY(mu) = 0;
};

struct PooledBuffer::Block {
  std::shared_ptr<BufferPool::State> pool;
  std::unique_ptr<char[]> bytes;
  size_t capacity = 0;
};

void BufferPool::State::Return(std::unique_ptr<PooledBuffer::Block> block) {
  std::shared_ptr<State> self = std::move(block->pool);
  absl::MutexLock lock(&mu);
  if (idle.size() < max_idle) idle.push_back(std::move(block));
}

PooledBuffer::PooledBuffer() = default;
PooledBuffer::PooledBuffer(PooledBuffer&&) noexcept = default;
PooledBuffer::PooledBuffer(std::unique_ptr<Block> block)
    : block_(std::move(block)) {}

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    if (block_) block_->pool->Return(std::move(block_));
    block_ = std::move(other.block_);
  }
  return *this;
}

PooledBuffer::~PooledBuffer() {
  if (block_) block_->pool->Return(std::move(block_));
}

char* PooledBuffer::data() const {
  return block_ ? block_->bytes.get() : nullptr;
}
size_t PooledBuffer::capacity() const { return block_ ? block_->capacity : 0; }

grpc::Slice PooledBuffer::ToSlice(size_t offset, size_t length) && {
  // gRPC's destroy hook is a C callback with a void*: ownership of the block
  // travels through it and is taken back as a unique_ptr on release.
  Block* block = block_.release();
  return grpc::Slice(
      block->bytes.get() + offset, length,
      [](void* raw) {
        std::unique_ptr<Block> owned(static_cast<Block*>(raw));
        owned->pool->Return(std::move(owned));
      },
      block);
}

BufferPool::BufferPool(size_t max_idle)
    : state_(std::make_shared<State>(max_idle)) {}

BufferPool::~BufferPool() = default;

PooledBuffer BufferPool::Acquire(size_t size) {
  {
    absl::MutexLock lock(&state_->mu);
    auto& idle = state_->idle;
    // Prefer the smallest idle buffer that fits; sizes are few in practice
    // (one per chunk size), so the scan is short.
    auto best = idle.end();
    for (auto it = idle.begin(); it != idle.end(); ++it) {
      if ((*it)->capacity >= size &&
          (best == idle.end() || (*it)->capacity < (*best)->capacity)) {
        best = it;
      }
    }
    if (best != idle.end()) {
      std::unique_ptr<PooledBuffer::Block> block = std::move(*best);
      idle.erase(best);
      block->pool = state_;
      return PooledBuffer(std::move(block));
    }
    ++state_->allocations;
  }
  auto block = std::make_unique<PooledBuffer::Block>();
  block->pool = state_;
  block->bytes = std::make_unique<char[]>(size);
  block->capacity = size;
  return PooledBuffer(std::move(block));
}

size_t BufferPool::allocations() const {
  absl::MutexLock lock(&state_->mu);
  return state_->allocations;
}

}  // namespace ps
