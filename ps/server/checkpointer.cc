#include "ps/server/checkpointer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ps/base/file_io.h"
#include "ps/table/checkpoint.h"

namespace ps {
namespace {

constexpr char kCheckpointName[] = "checkpoint";
constexpr char kLockName[] = "LOCK";

uint64_t ArrayBytes(const std::vector<TableSnapshot>& tables) {
  uint64_t bytes = 0;
  for (const TableSnapshot& t : tables) {
    for (const std::vector<float>& a : t.arrays) bytes += a.size() * 4;
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Open(
    CheckpointOptions options, TableRegistry* registry) {
  if (options.dir.empty()) {
    return absl::InvalidArgumentError("checkpoint directory is empty");
  }
  if (options.every < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("checkpoint period must be >= 0");
  }
  if (absl::Status s = CreateDirectories(options.dir); !s.ok()) return s;
  const std::string lock_path = absl::StrCat(options.dir, "/", kLockName);
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "open", lock_path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint directory ", options.dir,
                       " is in use by another server (", lock_path,
                       " is locked); give each server its own directory"));
    }
    return ErrnoStatus(e, "lock", lock_path);
  }
  auto checkpointer =
      absl::WrapUnique(new Checkpointer(std::move(options), registry, fd));
  if (absl::Status s = checkpointer->Restore(); !s.ok()) return s;
  return checkpointer;
}

Checkpointer::~Checkpointer() {
  StopPeriodic();
  ::close(lock_fd_);  // releases the lock
}

std::string Checkpointer::path() const {
  return absl::StrCat(options_.dir, "/", kCheckpointName);
}

absl::Status Checkpointer::Restore() {
  // A leftover temporary file is a write that never finished.
  std::error_code ignored;
  std::filesystem::remove(path() + ".tmp", ignored);
  if (!std::filesystem::exists(path())) return absl::OkStatus();
  const absl::Time start = absl::Now();
  absl::StatusOr<Checkpoint> checkpoint = ReadCheckpoint(path());
  if (!checkpoint.ok()) {
    return absl::Status(
        checkpoint.status().code(),
        absl::StrCat(checkpoint.status().message(),
                     " (refusing to start without the model it holds; move "
                     "it away to start empty)"));
  }
  if (checkpoint->job != registry_.job()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path(), " belongs to job '", checkpoint->job,
        "', this server runs job '", registry_.job(), "'"));
  }
  const uint64_t bytes = ArrayBytes(checkpoint->tables);
  const size_t tables = checkpoint->tables.size();
  for (TableSnapshot& table : checkpoint->tables) {
    if (absl::Status s = registry_.Restore(std::move(table)); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("restoring ", path(), ": ", s.message()));
    }
  }
  restored_ = true;
  Logf(options_.log, "restored %d tables (%.1f MiB) from %s, written %s, in %s",
       tables, bytes / 1048576.0, path(), absl::FormatTime(checkpoint->written),
       absl::FormatDuration(absl::Now() - start));
  return absl::OkStatus();
}

absl::Status Checkpointer::WriteNow() {
  absl::MutexLock lock(&write_mu_);
  const absl::Time start = absl::Now();
  registry_.Snapshot(&buffers_);
  const absl::Duration copied = absl::Now() - start;
  if (absl::Status s = WriteCheckpoint(path(), registry_.job(), buffers_);
      !s.ok()) {
    return s;
  }
  written_.fetch_add(1, std::memory_order_relaxed);
  uint64_t version = 0;
  for (const TableSnapshot& t : buffers_) version += t.meta.version();
  Logf(options_.log,
       "checkpoint of %d tables (%.1f MiB, version %d) written to %s in %s "
       "(copy %s)",
       buffers_.size(), ArrayBytes(buffers_) / 1048576.0, version, path(),
       absl::FormatDuration(absl::Now() - start), absl::FormatDuration(copied));
  return absl::OkStatus();
}

void Checkpointer::StartPeriodic() {
  if (options_.every <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&mu_);
  if (periodic_.joinable()) return;
  stop_ = false;
  periodic_ = std::thread([this] { RunPeriodic(); });
}

void Checkpointer::StopPeriodic() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (periodic_.joinable()) periodic_.join();
}

void Checkpointer::RunPeriodic() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.every)) {
        return;
      }
    }
    if (absl::Status s = WriteNow(); !s.ok()) {
      Logf(options_.log, "checkpoint failed, will retry in %s: %s",
           absl::FormatDuration(options_.every), s.ToString());
    }
  }
}

}  // namespace ps
