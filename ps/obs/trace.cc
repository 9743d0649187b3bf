#include "ps/obs/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ps/base/atomic_file.h"

namespace ps {
namespace {

constexpr char kFirstLine[] = "{\"traceEvents\":[";

int32_t ThisThreadId() {
  // The kernel's id: unique in the process and what `top -H` shows.
  thread_local const int32_t tid = static_cast<int32_t>(::syscall(SYS_gettid));
  return tid;
}

// A JSON string literal of `s`.
std::string Quoted(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

Tracer::Tracer(TraceOptions options)
    : options_(std::move(options)), pid_(static_cast<int>(::getpid())) {
  ring_.reserve(std::min<size_t>(options_.max_events, 1 << 16));
}

absl::StatusOr<std::unique_ptr<Tracer>> Tracer::Open(TraceOptions options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("a trace needs a file path");
  }
  if (options.max_events == 0) {
    return absl::InvalidArgumentError("a trace needs room for an event");
  }
  auto tracer = absl::WrapUnique(new Tracer(std::move(options)));
  if (absl::Status s = tracer->Flush(); !s.ok()) return s;
  if (tracer->options_.flush_every > absl::ZeroDuration()) {
    tracer->flusher_ =
        std::thread([t = tracer.get()] { t->FlushPeriodically(); });
  }
  return tracer;
}

Tracer::~Tracer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (flusher_.joinable()) flusher_.join();
  if (absl::Status s = Flush(); !s.ok()) {
    Log(options_.log, s.ToString());
  }
}

void Tracer::FlushPeriodically() {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                               options_.flush_every)) {
    mu_.Unlock();
    if (absl::Status s = Flush(); !s.ok()) {
      Log(options_.log, s.ToString());
    }
    mu_.Lock();
  }
}

void Tracer::NameThread(absl::string_view name) {
  const int32_t tid = ThisThreadId();
  absl::MutexLock lock(&mu_);
  thread_names_[tid] = std::string(name);
}

void Tracer::Record(const char* name, const char* category, absl::Time start,
                    absl::Time end, const char* arg_name, int64_t arg) {
  const Event e{name,
                category,
                arg_name,
                arg,
                absl::ToUnixMicros(start),
                std::max<int64_t>(0, absl::ToInt64Microseconds(end - start)),
                ThisThreadId()};
  absl::MutexLock lock(&mu_);
  if (ring_.size() < options_.max_events) {
    ring_.push_back(e);
  } else {
    ring_[next_] = e;
  }
  next_ = (next_ + 1) % options_.max_events;
  ++recorded_;
}

uint64_t Tracer::dropped() const {
  absl::MutexLock lock(&mu_);
  return recorded_ - ring_.size();
}

absl::Status Tracer::Flush() {
  absl::MutexLock flushing(&flush_mu_);
  std::vector<Event> events;
  std::vector<std::pair<int32_t, std::string>> threads;
  uint64_t dropped;
  {
    absl::MutexLock lock(&mu_);
    // Oldest first: once the ring is full, next_ is the oldest.
    const size_t n = ring_.size();
    const size_t first = n < options_.max_events ? 0 : next_;
    events.reserve(n);
    for (size_t i = 0; i < n; ++i) events.push_back(ring_[(first + i) % n]);
    threads.assign(thread_names_.begin(), thread_names_.end());
    dropped = recorded_ - n;
  }
  std::string text = kFirstLine;
  absl::StrAppendFormat(&text,
                        "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
                        "\"tid\":0,\"args\":{\"name\":%s}}",
                        pid_, Quoted(options_.process_name));
  for (const auto& [tid, name] : threads) {
    absl::StrAppendFormat(&text,
                          ",\n{\"name\":\"thread_name\",\"ph\":\"M\","
                          "\"pid\":%d,\"tid\":%d,\"args\":{\"name\":%s}}",
                          pid_, tid, Quoted(name));
  }
  for (const Event& e : events) {
    absl::StrAppendFormat(&text,
                          ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\","
                          "\"pid\":%d,\"tid\":%d,\"ts\":%d,\"dur\":%d",
                          e.name, e.category, pid_, e.tid, e.start_us,
                          e.duration_us);
    if (e.arg_name != nullptr) {
      absl::StrAppendFormat(&text, ",\"args\":{\"%s\":%d}", e.arg_name, e.arg);
    }
    text += "}";
  }
  absl::StrAppendFormat(&text,
                        "\n],\n\"displayTimeUnit\":\"ms\",\"otherData\":{"
                        "\"process\":%s,\"dropped_events\":%d}}\n",
                        Quoted(options_.process_name), dropped);
  return WriteFileAtomically(options_.path, text);
}

absl::StatusOr<std::unique_ptr<Tracer>> OpenTraceFlag(
    const std::string& path, const std::string& process_name) {
  if (path.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<Tracer>> tracer =
      Tracer::Open({path, process_name});
  if (!tracer.ok()) {
    return absl::Status(tracer.status().code(),
                        absl::StrCat("--trace: ", tracer.status().message()));
  }
  return tracer;
}

absl::Status MergeTraces(const std::vector<std::string>& inputs,
                         const std::string& out) {
  std::string merged = kFirstLine;
  bool first_event = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::ifstream in(inputs[i]);
    if (!in) {
      return absl::NotFoundError(absl::StrCat("cannot read trace ", inputs[i]));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
    if (lines.empty() || lines[0] != kFirstLine) {
      return absl::InvalidArgumentError(
          absl::StrCat(inputs[i], " is not a shardps trace"));
    }
    // Each process gets pid i + 1 in the merged trace: processes on
    // different hosts may share a pid.
    std::string own_pid;
    const std::string new_pid = absl::StrCat("\"pid\":", i + 1, ",");
    size_t line = 1;
    for (; line < lines.size() && !absl::StartsWith(lines[line], "]"); ++line) {
      std::string event(absl::StripSuffix(lines[line], ","));
      const size_t at = event.find("\"pid\":");
      if (at == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            inputs[i], " line ", line + 1, ": an event without a pid"));
      }
      const size_t end = event.find(',', at);
      if (own_pid.empty()) own_pid = event.substr(at, end + 1 - at);
      if (event.compare(at, end + 1 - at, own_pid) == 0) {
        event.replace(at, end + 1 - at, new_pid);
      }
      merged += first_event ? "\n" : ",\n";
      merged += event;
      first_event = false;
    }
    if (line == lines.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(inputs[i], " ends before its event list does"));
    }
  }
  merged += "\n],\n\"displayTimeUnit\":\"ms\"}\n";
  return WriteFileAtomically(out, merged);
}

}  // namespace ps
