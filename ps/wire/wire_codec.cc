#include "ps/wire/wire_codec.h"

#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"

namespace ps {
namespace {

// Wire types of the protobuf encoding.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

// Reads bytes across a sequence of slices without joining them.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {
    SkipEmpty();
  }

  size_t position() const { return position_; }
  bool AtEnd() const { return slice_ == slices_.size(); }

  bool ReadByte(uint8_t* out) {
    if (AtEnd()) return false;
    *out = slices_[slice_].begin()[offset_];
    Advance(1);
    return true;
  }

  bool ReadVarint(uint64_t* out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *out = value;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }

  // Moves `n` bytes forward, reporting each contiguous run to `sink`.
  template <typename Sink>
  bool Take(uint64_t n, Sink sink) {
    while (n > 0) {
      if (AtEnd()) return false;
      const grpc::Slice& s = slices_[slice_];
      const size_t run = std::min<uint64_t>(n, s.size() - offset_);
      sink(absl::string_view(reinterpret_cast<const char*>(s.begin()) + offset_,
                             run));
      Advance(run);
      n -= run;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    position_ += n;
    if (offset_ == slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (slice_ < slices_.size() && slices_[slice_].size() == 0) ++slice_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
  size_t position_ = 0;
};

char* WriteVarint(uint64_t value, char* out) {
  return reinterpret_cast<char*>(
      google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(
          value, reinterpret_cast<uint8_t*>(out)));
}

}  // namespace

absl::Status SplitBulkField(const grpc::ByteBuffer& buffer, int bulk_field,
                            SplitMessage* out) {
  out->slices.clear();
  out->bulk.clear();
  out->rest.clear();
  if (grpc::Status s = buffer.Dump(&out->slices); !s.ok()) {
    return absl::InvalidArgumentError("unreadable message buffer");
  }
  SliceCursor cursor(out->slices);
  auto malformed = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed message: ", what, " at byte ", cursor.position()));
  };
  auto append_rest = [out](absl::string_view run) {
    out->rest.append(run.data(), run.size());
  };
  char scratch[10];
  while (!cursor.AtEnd()) {
    uint64_t tag;
    if (!cursor.ReadVarint(&tag)) return malformed("truncated field tag");
    const uint32_t wire_type = tag & 7;
    const uint64_t field = tag >> 3;
    const bool is_bulk = field == static_cast<uint64_t>(bulk_field);
    if (is_bulk && wire_type != kLengthDelimited) {
      return malformed("bulk field is not length-delimited");
    }
    if (!is_bulk)
      out->rest.append(scratch, WriteVarint(tag, scratch) - scratch);
    switch (wire_type) {
      case kVarint: {
        uint64_t value;
        if (!cursor.ReadVarint(&value)) return malformed("truncated varint");
        out->rest.append(scratch, WriteVarint(value, scratch) - scratch);
        break;
      }
      case kFixed64:
        if (!cursor.Take(8, append_rest)) return malformed("truncated fixed64");
        break;
      case kFixed32:
        if (!cursor.Take(4, append_rest)) return malformed("truncated fixed32");
        break;
      case kLengthDelimited: {
        uint64_t length;
        if (!cursor.ReadVarint(&length)) return malformed("truncated length");
        if (is_bulk) {
          // A repeated occurrence replaces the earlier one, as in protobuf.
          out->bulk.clear();
          if (!cursor.Take(length, [out](absl::string_view run) {
                out->bulk.push_back(run);
              })) {
            return malformed("bulk field runs past the end");
          }
        } else {
          out->rest.append(scratch, WriteVarint(length, scratch) - scratch);
          // A large field (a sparse call's ids) is copied once, not again
          // each time the string outgrows itself.
          if (length <= buffer.Length()) {
            out->rest.reserve(out->rest.size() + length);
          }
          if (!cursor.Take(length, append_rest)) {
            return malformed("field runs past the end");
          }
        }
        break;
      }
      default:
        return malformed(absl::StrCat("unsupported wire type ", wire_type));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseSmallMessage(const grpc::ByteBuffer& buffer,
                               google::protobuf::MessageLite* message) {
  grpc::Slice joined;
  if (!buffer.DumpToSingleSlice(&joined).ok() ||
      !message->ParseFromArray(joined.begin(), joined.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed ", message->GetTypeName(),
                     " (not that message in protobuf encoding, or a string "
                     "field that is not UTF-8)"));
  }
  return absl::OkStatus();
}

grpc::ByteBuffer SerializeSmallMessage(
    const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return grpc::ByteBuffer(&slice, 1);
}

size_t WriteHeaderBefore(const google::protobuf::MessageLite& fields,
                         int bulk_field, size_t payload_bytes,
                         char* payload_start) {
  char header[kMaxWireHeaderBytes];
  // Also caches the sizes SerializeWithCachedSizesToArray relies on. Two
  // varints of at most 10 bytes each follow the fields.
  const size_t fields_size = fields.ByteSizeLong();
  assert(fields_size + 20 <= kMaxWireHeaderBytes);
  static_cast<void>(fields_size);
  char* end = reinterpret_cast<char*>(fields.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(header)));
  // Protobuf leaves an empty proto3 bytes field out entirely.
  if (payload_bytes > 0) {
    end = WriteVarint(
        (static_cast<uint64_t>(bulk_field) << 3) | kLengthDelimited, end);
    end = WriteVarint(payload_bytes, end);
  }
  const size_t length = end - header;
  std::memcpy(payload_start - length, header, length);
  return length;
}

absl::string_view Contiguous(absl::Span<const absl::string_view> pieces,
                             BufferPool& pool, PooledBuffer* storage) {
  if (pieces.empty()) return absl::string_view();
  if (pieces.size() == 1) return pieces[0];
  size_t total = 0;
  for (absl::string_view piece : pieces) total += piece.size();
  *storage = pool.Acquire(total);
  char* dst = storage->data();
  for (absl::string_view piece : pieces) {
    std::memcpy(dst, piece.data(), piece.size());
    dst += piece.size();
  }
  return absl::string_view(storage->data(), total);
}

}  // namespace ps
